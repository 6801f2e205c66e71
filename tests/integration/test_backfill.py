"""The backfill job on real Ray (2 CPUs) and milvus-lite, over the sample logs in tests/."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from jobs_helpers import SAMPLE_JSONL, SAMPLE_PARQUET, contents, snapshot

from memray import Memory, MemoryConfig
from memray.batch import backfill
from memray.batch.config import BackfillArgs
from memray.bench.jobs import _logs

ROOT = Path(__file__).parents[2]


pytestmark = pytest.mark.usefixtures("local_ray")


def args(data_dir: Path, *inputs: Path, infer: bool = True, **extra: object) -> BackfillArgs:
    return BackfillArgs.model_validate({"memory": {"data_dir": str(data_dir)},
                                        "input": [str(p) for p in inputs], "infer": infer,
                                        **extra})


def test_backfill_extracts_resolves_and_a_rerun_changes_nothing(tmp_path: Path) -> None:
    first = backfill.run(args(tmp_path, SAMPLE_JSONL))
    assert first["users"] == 5 and first["rows_read"] == 30 and first["rows_invalid"] == 0
    with Memory(MemoryConfig(data_dir=str(tmp_path))) as mem:
        assert "I moved to Berlin last week" in contents(mem, "alice")
        assert "I live in Paris" in contents(mem, "alice", "superseded")  # the later move wins
        assert contents(mem, "bob") == ["I work as a nurse"]  # "Forget my schedule" honoured
        assert contents(mem, "dave") == ["I like jazz"]  # the e-mail never stored
        assert contents(mem, "erin").count("I'm vegetarian") == 1  # said twice, kept once
        assert "我住在上海" in contents(mem, "carol")
        hit = mem.search("Which city do I live in?", user_id="alice")[0].memory
        assert hit.content == "I moved to Berlin last week"
        assert hit.created_at.isoformat().startswith("2026-04-10")  # the log's time
        before = snapshot(mem)
    again = backfill.run(args(tmp_path, SAMPLE_JSONL))
    assert again.get("users", 0) == 0 and again["users_already_done"] == 5
    with Memory(MemoryConfig(data_dir=str(tmp_path))) as mem:
        assert snapshot(mem) == before


def test_backfill_parquet_infer_false_imports_messages_idempotently(tmp_path: Path) -> None:
    with Memory(MemoryConfig(data_dir=str(tmp_path))) as mem:  # said online already
        mem.add("I'm vegetarian.", user_id="erin", infer=False)
    result = backfill.run(args(tmp_path, SAMPLE_PARQUET, infer=False))
    # 15 user turns: erin's "I'm vegetarian." (twice in the logs) is the one known already.
    assert result["op_add"] == 13 and result["op_noop"] == 1
    with Memory(MemoryConfig(data_dir=str(tmp_path))) as mem:
        assert len(contents(mem, "alice")) == 4
        assert all(r.type.value == "message" and r.source.value == "imported"
                   for r in mem.get_all(user_id="alice").items)
        dave = " ".join(contents(mem, "dave"))
        assert "[redacted:email]" in dave and "dave@example.com" not in dave  # PII redacted
        before = snapshot(mem)
    # The same turns from another file: their sessions are checkpointed, nothing changes.
    copy = tmp_path / "copy.parquet"
    shutil.copy(SAMPLE_PARQUET, copy)
    again = backfill.run(args(tmp_path, copy, infer=False))
    assert again["users_already_done"] == 5 and again.get("op_add", 0) == 0
    with Memory(MemoryConfig(data_dir=str(tmp_path))) as mem:
        assert snapshot(mem) == before


def test_deletions_and_forgets_made_after_the_logs_are_honoured(tmp_path: Path) -> None:
    cfg = MemoryConfig(data_dir=str(tmp_path))
    with Memory(cfg) as mem:  # online, today: after the logs were written
        mem.add("I'm allergic to peanuts.", user_id="alice")
        allergy = mem.get_all(user_id="alice").items[0]
        mem.delete(allergy.id, user_id="alice")
        mem.add("Forget where I live.", user_id="carol")
        mem.add("I like jazz.", user_id="dave")
        mem.delete_all(user_id="dave")
    backfill.run(args(tmp_path, SAMPLE_JSONL))
    with Memory(cfg) as mem:
        assert not any("peanut" in c for c in contents(mem, "alice", None))
        assert "I moved to Berlin last week" in contents(mem, "alice")  # the rest imported
        assert contents(mem, "carol", None) == ["我不吃香菜"]  # the city is forgotten
        assert contents(mem, "dave", None) == []
        nurse = next(r for r in mem.get_all(user_id="bob").items)
        mem.delete(nurse.id, user_id="bob")
    # Later the logs grow: bob's session gains a turn, so it is imported again.
    grown = tmp_path / "grown.jsonl"
    rows = [json.loads(line) for line in SAMPLE_JSONL.read_text().splitlines()]
    rows.append({"user_id": "bob", "session_id": "b-1", "turn_id": 9, "role": "user",
                 "content": "I like chess.", "ts": "2026-03-05T11:00:00Z"})
    grown.write_text("\n".join(json.dumps(r) for r in rows))
    result = backfill.run(args(tmp_path, grown))
    assert result["users"] == 1 and result["facts_tombstoned"] >= 1
    with Memory(cfg) as mem:
        assert contents(mem, "bob", None) == ["I like chess"]  # the nurse stays deleted


def test_bad_rows_are_counted_and_reported_not_imported(tmp_path: Path) -> None:
    logs = tmp_path / "bad.jsonl"
    logs.write_text("\n".join(json.dumps(r) for r in [
        {"user_id": "u1", "session_id": "s", "turn_id": 1, "role": "user",
         "content": "I like tea.", "ts": "2026-01-01T00:00:00Z"},
        {"user_id": "u1", "session_id": "s", "turn_id": 2, "role": "robot",
         "content": "beep", "ts": "2026-01-01T00:00:01Z"},
        {"user_id": "u1", "session_id": "s", "turn_id": 3, "role": "user",
         "content": "I like coffee.", "ts": "yesterday"},
    ]))
    result = backfill.run(args(tmp_path / "d", logs, infer=False))
    assert result["rows_invalid"] == 2 and result["op_add"] == 1
    assert "role must be one of" in result["first_errors"]
    from memray.errors import ConfigError

    with pytest.raises(ConfigError, match="does not exist"):
        backfill.run(args(tmp_path / "d", tmp_path / "missing.parquet"))


def _run_job(data_dir: Path, logs: Path, cfg: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    return subprocess.Popen(
        [sys.executable, str(ROOT / "jobs" / "backfill.py"), "--config", str(cfg),
         "--data-dir", str(data_dir), "--input", str(logs), "--infer", "false"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)


def test_backfill_resumes_after_kill_9(tmp_path: Path) -> None:
    logs = tmp_path / "logs.parquet"
    texts = _logs(logs, users=60, turns=20)
    cfg = tmp_path / "job.yaml"
    cfg.write_text("ray: {num_cpus: 2}\nprogress_every_s: 0.01\ndrain_rows: 40\n"
                   "embed: {batch_units: 2}\n")
    proc = _run_job(tmp_path / "data", logs, cfg)
    assert proc.stdout is not None
    killed_at = None
    for line in proc.stdout:
        if line.startswith("[backfill") and "op_add=" in line:
            added = int(line.split("op_add=")[1].split()[0])
            if added >= 200:
                proc.send_signal(signal.SIGKILL)
                killed_at = added
                break
    proc.wait(timeout=120)
    assert killed_at is not None and killed_at < len(texts), "the run ended before the kill"
    resumed = _run_job(tmp_path / "data", logs, cfg)
    out, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, out[-2000:]
    with Memory(MemoryConfig(data_dir=str(tmp_path / "data"))) as mem:
        per_user = {f"user-{u:05d}": mem.get_all(user_id=f"user-{u:05d}", limit=1000).items
                    for u in range(60)}
    assert all(len(v) == 20 for v in per_user.values())  # none lost, none twice
    assert sorted(r.content for v in per_user.values() for r in v) == sorted(texts)
    done_line = [line for line in out.splitlines() if "users_already_done" in line]
    assert done_line, out[-2000:]  # the resumed run skipped what the killed one committed


def test_memray_jobs_cli_runs_a_job_and_prints_the_summary(tmp_path: Path) -> None:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    exe = Path(sys.executable).with_name("memray")
    out = subprocess.run(
        [str(exe), "jobs", "maintenance", "--config", "jobs/configs/maintenance.yaml",
         "--data-dir", str(tmp_path), "--dry-run"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "maintenance (dry run: nothing written) summary" in out.stdout
    assert "merged_clusters" in out.stdout
    bad = subprocess.run([str(exe), "jobs", "backfill", "--data-dir", str(tmp_path)],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=60,
                         check=False)
    assert bad.returncode == 1 and "invalid job config" in bad.stderr


def test_users_are_grouped_into_several_blocks_each_user_in_one() -> None:
    """The sort shuffle keeps its input's block count: a log read as one block was one
    block of units, so one actor embedded every user in one task and the writer waited
    for all of it (and a pool of several actors had nothing to share)."""
    import pandas as pd
    import ray.data

    from memray.batch.runtime import _configure_data
    from memray.batch.stages import by_user

    _configure_data()  # the jobs' Ray Data settings: the sort shuffle
    logs = pd.read_parquet(SAMPLE_PARQUET)
    one_block = ray.data.from_pandas(logs)  # what a single small file reads as
    assert one_block.num_blocks() == 1
    grouped = by_user(one_block, 3).map_groups(
        lambda g: g.head(1)[["user_id"]], batch_format="pandas").materialize()
    assert grouped.num_blocks() > 1
    users = list(grouped.to_pandas()["user_id"])
    assert sorted(users) == sorted(set(logs["user_id"]))

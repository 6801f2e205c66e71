"""Pure pieces of the batch jobs: log parsing, units, tombstones, plans, diffs, ids."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
import yaml

from memray.batch.config import BackfillArgs, MaintenanceArgs, MigrateArgs
from memray.core.ids import stable_id
from memray.errors import ConfigError, InvalidInputError
from memray.extract.rules import RuleExtractor
from memray.ingest.logs import LogTurn, parse_turn, ts_ms
from memray.ingest.units import build_unit, mark_key, session_key
from memray.maintain.plan import MaintenanceSettings, plan_user, rule_summary
from memray.migrate.sync import diff
from memray.models import MemoryRecord, MemoryStatus, MemoryType, content_hash
from memray.store.base import StoredMemory
from memray.store.events import Tombstone

ROOT = Path(__file__).parents[2]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def turn(tid: str, role: str, text: str, session: str = "s1", ms: int = 0) -> LogTurn:
    return LogTurn("u1", session, tid, role, text, 1_767_225_600_000 + ms)


def test_ts_accepts_datetimes_iso_and_epochs() -> None:
    assert ts_ms("2026-01-01T00:00:00Z") == ts_ms(T0) == ts_ms(1_767_225_600) \
        == ts_ms(1_767_225_600_000)
    assert ts_ms(datetime(2026, 1, 1)) == ts_ms(T0)  # naive means UTC
    with pytest.raises(InvalidInputError):
        ts_ms("yesterday")


def test_parse_turn_names_the_bad_column() -> None:
    row = {"user_id": "u", "session_id": "s", "turn_id": 1, "role": "user", "content": "hi",
           "ts": "2026-01-01T00:00:00Z"}
    assert parse_turn(row, 100).turn_id == "1"
    with pytest.raises(InvalidInputError, match="missing column"):
        parse_turn({**row, "content": None}, 100)
    with pytest.raises(InvalidInputError, match="role"):
        parse_turn({**row, "role": "bot"}, 100)
    with pytest.raises(InvalidInputError, match="longer"):
        parse_turn({**row, "content": "x" * 101}, 100)


def test_units_skip_checkpointed_sessions_and_keep_round_order() -> None:
    turns = [turn("1", "user", "I live in Paris.", ms=0), turn("2", "assistant", "ok", ms=1),
             turn("3", "user", "I moved to Berlin.", ms=2), turn("4", "assistant", "ok", ms=3),
             turn("9", "user", "I like tea.", session="s2", ms=5)]
    unit = build_unit(turns, infer=True, extractor=RuleExtractor(), done=frozenset())
    assert unit is not None
    assert [f["content"] for r in unit["rounds"] for f in r["facts"]] == [
        "I live in Paris", "I moved to Berlin", "I like tea"]
    key = session_key("s1", turns[:4])
    assert key == session_key("s1", list(reversed(turns[:4])))  # order-free
    assert key != session_key("s1", turns[:3])  # a grown session is imported again
    rest = build_unit(turns, infer=False, extractor=None,
                      done=frozenset({mark_key("u1", key)}))
    assert rest is not None and [i["text"] for i in rest["items"]] == ["I like tea."]
    again = build_unit(turns, infer=False, extractor=None, done=frozenset(
        {mark_key("u1", key), mark_key("u1", session_key("s2", turns[4:]))}))
    assert again is None


def test_stable_ids_are_fixed_by_their_inputs_and_time_ordered() -> None:
    a = stable_id(1000, "u1", "s", "1")
    assert a == stable_id(1000, "u1", "s", "1") != stable_id(1000, "u2", "s", "1")
    assert stable_id(999, "z") < a < stable_id(1001, "a")


def test_tombstones_cover_only_older_matching_facts() -> None:
    h = content_hash("I live in Paris")
    at = 5_000
    assert Tombstone("hash", h, at).covers(content_hash=h, slot=None, at_ms=4_000)
    assert not Tombstone("hash", h, at).covers(content_hash=h, slot=None, at_ms=6_000)
    assert Tombstone("slot", "like:", at).covers(content_hash="x", slot="like:tea", at_ms=1)
    assert not Tombstone("slot", "city", at).covers(content_hash="x", slot="job", at_ms=1)
    assert Tombstone("all", "*", at).covers(content_hash="x", slot=None, at_ms=at)


def record(text: str, *, importance: float = 0.2, days: float = 0,
           type_: MemoryType = MemoryType.PREFERENCE) -> MemoryRecord:
    at = T0 - timedelta(days=days)
    return MemoryRecord(id=stable_id(int(at.timestamp() * 1000), text), user_id="u1",
                        type=type_, content=text, importance=importance, created_at=at,
                        updated_at=at, last_confirmed_at=at, embedding_model="m",
                        content_hash=content_hash(text))


def test_plan_merges_close_low_importance_memories_only() -> None:
    vec = {"tea": np.array([1.0, 0.0, 0.0], np.float32),
           "tea2": np.array([0.96, 0.28, 0.0], np.float32),
           "dog": np.array([0.0, 0.0, 1.0], np.float32)}
    rows = [StoredMemory(record("I like tea"), vec["tea"]),
            StoredMemory(record("I love tea"), vec["tea2"]),
            StoredMemory(record("I have a dog"), vec["dog"]),
            StoredMemory(record("Tea is fine", importance=0.9), vec["tea"])]
    plan = plan_user("u1", rows, T0, MaintenanceSettings())
    assert len(plan.merges) == 1
    merge = plan.merges[0]
    assert {r.content for r in merge.originals} == {"I like tea", "I love tea"}
    assert set(merge.merged.content.split("; ")) == {"I like tea", "I love tea"}
    assert merge.merged.metadata["merged_from"] == sorted(r.id for r in merge.originals)
    assert plan_user("u1", rows, T0, MaintenanceSettings()).merges[0].merged.id == merge.merged.id


def test_plan_expires_retires_and_decays_deterministically() -> None:
    expired = record("task", type_=MemoryType.TASK_STATE).model_copy(
        update={"expires_at": T0 - timedelta(hours=1), "importance": 0.5})
    candidate = record("maybe", days=31, importance=0.5).model_copy(
        update={"status": MemoryStatus.CANDIDATE})
    old = record("pref", days=180, importance=0.8)
    rows = [StoredMemory(r, np.ones(3, np.float32)) for r in (expired, candidate, old)]
    plan = plan_user("u1", rows, T0, MaintenanceSettings(merge_below=0.0))
    why = {old_.content: (new.status.value, new.importance, reason)
           for old_, new, reason in plan.updates}
    assert why["task"][0] == "expired" and why["maybe"][0] == "expired"
    assert why["pref"] == ("active", 0.4, "decayed")
    decayed = StoredMemory(next(n for o, n, _ in plan.updates if o.content == "pref"),
                           np.ones(3, np.float32))
    # a second pass: no-op
    assert plan_user("u1", [decayed], T0, MaintenanceSettings()).updates == []


def test_rule_summary_keeps_whole_distinct_statements_within_the_cap() -> None:
    assert rule_summary(["I like tea.", "i like tea", "I like green tea"], 100) == \
        "I like tea; I like green tea"
    assert rule_summary(["a" * 30, "b" * 30], 40) == "a" * 30


def test_diff_copies_missing_or_changed_and_deletes_stale() -> None:
    a, b, c = record("a"), record("b"), record("c")
    changed = b.model_copy(update={"importance": 0.9})
    copy, gone = diff([a, changed], [a.model_copy(update={"embedding_model": "other"}), b, c])
    assert copy == [changed] and gone == [c.id]


def test_shipped_job_configs_and_k8s_manifests_validate() -> None:
    for name, model in (("backfill", BackfillArgs), ("maintenance", MaintenanceArgs),
                        ("migrate", MigrateArgs)):
        model.load(ROOT / "jobs" / "configs" / f"{name}.yaml")
        cm = yaml.safe_load((ROOT / "k8s" / "jobs" / "configmap.yaml").read_text())
        model.model_validate(yaml.safe_load(cm["data"][f"{name}.yaml"]))
        job = yaml.safe_load((ROOT / "k8s" / "jobs" / f"rayjob-{name}.yaml").read_text())
        script = job["spec"]["entrypoint"].split()[1]
        assert (ROOT / script).is_file() and job["kind"] == "RayJob"
    cron = yaml.safe_load((ROOT / "k8s" / "jobs" / "cronjob-maintenance.yaml").read_text())
    command = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert "jobs/maintenance.py" in command
    with pytest.raises(ConfigError, match="invalid job config"):
        BackfillArgs.load(None, {"input": []})


def test_progress_lines_in_logs_and_only_the_last_at_a_terminal(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from memray.batch import runtime

    for tty, lines in ((False, 2), (True, 1)):
        monkeypatch.setattr(runtime, "interactive", lambda tty=tty: tty)
        progress = runtime.Progress("job", every_s=0)
        progress.tick({"rows": 1})
        progress.tick({"rows": 2}, force=True)  # the last line, always
        printed = capsys.readouterr().err.splitlines()
        assert len(printed) == lines and printed[-1].endswith("rows=2"), printed

"""The backfill's extraction through Ray Data LLM (`ray.data.llm`'s HTTP request
processor) against the real packaged model's OpenAI-compatible server, on real Ray (2
CPUs) and milvus-lite. Content is checked loosely (a 1.5B model), bookkeeping strictly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jobs_helpers import SAMPLE_JSONL, contents, snapshot

from memray import Memory, MemoryConfig
from memray.batch import backfill
from memray.batch.config import BackfillArgs
from memray.localllm.models import DEFAULT_MODEL

pytestmark = [pytest.mark.usefixtures("local_ray"), pytest.mark.llm]


def args(data_dir: Path, url: str, log: Path, **llm: Any) -> BackfillArgs:
    return BackfillArgs.model_validate({
        "memory": {"data_dir": str(data_dir), "write": {"extractor": "llm", "llm": {
            "base_url": url, "model": DEFAULT_MODEL, **llm}}},
        "input": [str(log)], "infer": True,
        "llm": {"processor": "http", "concurrency": 1, "batch_size": 4}})


def sessions_log(tmp_path: Path, *sessions: str) -> Path:
    """The sample log of some sessions only: each round is a real LLM call of ~10 s on two
    cores, so the tests take the fewest rounds that show what they check."""
    log = tmp_path / ("-".join(sessions) + ".jsonl")
    log.write_text("".join(line for line in SAMPLE_JSONL.read_text().splitlines(True)
                           if json.loads(line)["session_id"] in sessions))
    return log


def test_backfill_extracts_through_the_llm_processor_and_a_rerun_changes_nothing(
        tmp_path: Path, real_llm: str) -> None:
    log = sessions_log(tmp_path, "a-1", "d-1")
    data = tmp_path / "d"
    first = backfill.run(args(data, real_llm, log))
    assert first["users"] == 2 and first["rows_read"] == 8, first
    assert first.get("llm_failed_sessions", 0) == 0, first
    cfg = MemoryConfig(data_dir=str(data))
    with Memory(cfg) as mem:
        alice = " ".join(contents(mem, "alice", None))
        assert "Paris" in alice or "peanut" in alice, alice
        dave = json.dumps(list(mem.export(user_id="dave")), default=str)
        assert "@" not in dave  # the rules in front redact the e-mail before the LLM
        before = snapshot(mem, ("alice", "dave"))
    again = backfill.run(args(data, real_llm, log))
    assert again.get("users", 0) == 0 and again["users_already_done"] == 2
    with Memory(cfg) as mem:
        assert snapshot(mem, ("alice", "dave")) == before


def test_rounds_the_llm_fails_are_recorded_and_their_sessions_retried(
        tmp_path: Path, real_llm: str) -> None:
    log = sessions_log(tmp_path, "b-1")
    # Answers cut off at 8 tokens are never valid: every round fails, nothing is written,
    # and the sessions stay unmarked.
    failed = backfill.run(args(tmp_path / "d", real_llm, log, max_tokens=8))
    assert failed["llm_failed_sessions"] >= 1 and "cut off" in failed["first_errors"], failed
    with Memory(MemoryConfig(data_dir=str(tmp_path / "d"))) as mem:
        assert contents(mem, "bob", None) == []
    retried = backfill.run(args(tmp_path / "d", real_llm, log))
    assert retried.get("llm_failed_sessions", 0) == 0 and retried["users"] == 1, retried
    with Memory(MemoryConfig(data_dir=str(tmp_path / "d"))) as mem:
        assert any("nurse" in c for c in contents(mem, "bob", None)), contents(mem, "bob")

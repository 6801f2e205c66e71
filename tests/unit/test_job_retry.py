"""Async adds that fail for a passing reason are claimed again after their lease; what a
retry cannot fix fails at once (memray/api/jobs.py, on the real SQLite log)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memray.api.jobs import JobQueue
from memray.errors import InvalidInputError, StoreUnavailableError
from memray.store.sqlite_log import SQLiteEventLog


@pytest.fixture
def log(tmp_path: Path) -> Iterator[SQLiteEventLog]:
    events = SQLiteEventLog(tmp_path / "log.sqlite", dim=8)
    events.open()
    yield events
    events.close()


def _settle(queue: JobQueue, job_id: str, deadline_s: float = 10) -> dict[str, Any]:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        found = queue.get(job_id)
        assert found is not None
        if found[1]["status"] in ("done", "failed"):
            return found[1]
        time.sleep(0.02)
    raise AssertionError(f"job {job_id} still {found[1]['status']}")


def _queue(log: SQLiteEventLog, run: Callable[[dict[str, Any]], dict[str, Any]]) -> JobQueue:
    return JobQueue(log, run, lease_s=0.1, poll_s=0.02, max_attempts=3)


def test_a_store_outage_is_retried_until_the_add_runs(log: SQLiteEventLog) -> None:
    calls: list[float] = []

    def run(request: dict[str, Any]) -> dict[str, Any]:
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise StoreUnavailableError("cannot reach Milvus")
        return {"events": [], "text": request["text"]}

    queue = _queue(log, run)
    queue.open()
    try:
        job = queue.enqueue("u", None, {"text": "hi"})
        done = _settle(queue, job["job_id"])
    finally:
        queue.close()
    assert done["status"] == "done" and done["result"] == {"events": [], "text": "hi"}
    assert len(calls) == 3 and calls[2] - calls[0] >= 0.2  # each retry waited for the lease


def test_bad_input_fails_at_once_and_a_lasting_outage_after_the_tries(
        log: SQLiteEventLog) -> None:
    calls: list[str] = []

    def run(request: dict[str, Any]) -> dict[str, Any]:
        calls.append(request["kind"])
        if request["kind"] == "bad":
            raise InvalidInputError("content is empty")
        raise StoreUnavailableError("cannot reach Milvus")

    queue = _queue(log, run)
    queue.open()
    try:
        bad = _settle(queue, queue.enqueue("u", None, {"kind": "bad"})["job_id"])
        down = _settle(queue, queue.enqueue("u", None, {"kind": "down"})["job_id"])
    finally:
        queue.close()
    assert bad["status"] == "failed" and "InvalidInputError" in bad["error"]
    assert down["status"] == "failed" and "StoreUnavailableError" in down["error"]
    assert calls.count("bad") == 1 and calls.count("down") == 3

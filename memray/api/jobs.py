"""Durable async adds and idempotency keys, kept in the shared log (`TurnLog`).

A request with `async: true` is queued in the log before the 202 goes out. A worker
thread in every API process claims queued jobs one at a time (each job goes to exactly
one worker; with PostgreSQL, across processes) under a lease: if the process that holds
a job dies, the lease runs out and another process's worker takes it over. Re-running
an add is harmless (an exact repeat resolves to NOOP), so a job that failed for a passing
reason (the store or the extractor unreachable) is left to its lease and claimed again
(up to 5 tries in a process) instead of failing. An idempotency key, per user,
maps a retried request to the first one's job, so a retry is a no-op; this holds for
synchronous adds too.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from memray.core.ids import new_id
from memray.errors import DimensionMismatchError, ExtractionError, MemrayError, StoreError
from memray.store.events import AddJob, TurnLog

log = logging.getLogger(__name__)

Runner = Callable[[dict[str, Any]], dict[str, Any]]


class JobQueue:
    """Async adds over `log`; `open()` starts the worker, `close()` stops it."""

    def __init__(self, log_: TurnLog, run: Runner, *, lease_s: float = 120.0,
                 poll_s: float = 1.0, max_attempts: int = 5) -> None:
        self._log, self._run = log_, run
        self._lease, self._poll, self._max_attempts = lease_s, poll_s, max_attempts
        self._attempts: dict[str, int] = {}  # passing failures per job, this process
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def open(self) -> None:
        self._thread = threading.Thread(target=self._work, name="memray-jobs", daemon=True)
        self._thread.start()
        self._wake.set()  # resume whatever was left queued

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def find(self, user_id: str, idem: str) -> dict[str, Any] | None:
        found = self._log.find_add(user_id, idem)
        return None if found is None else _reply(found)

    def get(self, job_id: str) -> tuple[str, dict[str, Any]] | None:
        """(user_id, job) or None."""
        found = self._log.get_add(job_id)
        return None if found is None else (found.user_id, _reply(found))

    def enqueue(self, user_id: str, idem: str | None, request: dict[str, Any]) -> dict[str, Any]:
        """Durably queue; with a known idempotency key, the existing job instead."""
        job = self._log.enqueue_add(new_id(), user_id, idem, json.dumps(request))
        self._wake.set()
        return _reply(job)

    def record(self, user_id: str, idem: str, result: dict[str, Any]) -> None:
        """Remember a synchronous add's result under its idempotency key."""
        self._log.record_add(new_id(), user_id, idem, json.dumps(result))

    def _work(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=self._poll)
            self._wake.clear()
            while not self._stop.is_set() and self._step():
                pass

    def _step(self) -> bool:
        try:
            job = self._log.claim_add(self._lease)
        except MemrayError as exc:  # the log is unreachable: try again on the next poll
            log.warning("cannot claim async adds: %s", exc)
            return False
        if job is None:
            return False
        try:
            result = json.dumps(self._run(json.loads(job.request)))
            self._log.finish_add(job.id, "done", result, None)
        except Exception as exc:  # the job records why it failed; the worker goes on
            if self._retry(job.id, exc):
                return True
            log.warning("async add %s failed: %s", job.id, type(exc).__name__)
            self._log.finish_add(job.id, "failed", None, f"{type(exc).__name__}: {exc}")
        self._attempts.pop(job.id, None)
        return True

    def _retry(self, job_id: str, exc: Exception) -> bool:
        """A passing failure (the store or the extractor unreachable) leaves the job
        claimed: when its lease runs out it is claimed again, here or in another process,
        up to `attempts` times in this process. What a retry cannot fix fails at once."""
        passing = isinstance(exc, StoreError | ExtractionError) and not isinstance(
            exc, DimensionMismatchError)
        tries = self._attempts.get(job_id, 0) + 1
        if not passing or tries >= self._max_attempts:
            return False
        self._attempts[job_id] = tries
        log.warning("async add %s: %s; tried again in %g s (%d of %d)", job_id,
                    type(exc).__name__, self._lease, tries, self._max_attempts)
        return True


def _reply(job: AddJob) -> dict[str, Any]:
    status = "queued" if job.status == "running" else job.status
    return {"job_id": job.id, "status": status,
            "result": json.loads(job.result) if job.result else None, "error": job.error}

"""Durable async adds and idempotency keys.

A request with `async: true` is written to SQLite before the 202 goes out; a worker thread
processes queued jobs in order and survives restarts (queued jobs are picked up again on
start). An idempotency key, per user, maps a retried request to the first one's job, so a
retry is a no-op; this holds for synchronous adds too.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memray.core.ids import new_id

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, user_id TEXT NOT NULL, idem TEXT, status TEXT NOT NULL,
    request TEXT NOT NULL, result TEXT, error TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS jobs_idem ON jobs(user_id, idem) WHERE idem IS NOT NULL;
"""

Runner = Callable[[dict[str, Any]], dict[str, Any]]


class JobQueue:
    def __init__(self, path: str | Path, run: Runner) -> None:
        self._path, self._run = Path(path), run
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def open(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.executescript(_SCHEMA)
        self._db = db
        self._thread = threading.Thread(target=self._work, name="memray-jobs", daemon=True)
        self._thread.start()
        self._wake.set()  # resume whatever a previous process left queued

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._db is not None:
            self._db.close()
            self._db = None

    def find(self, user_id: str, idem: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._conn().execute(
                "SELECT id, status, result, error FROM jobs WHERE user_id = ? AND idem = ?",
                (user_id, idem)).fetchone()
        return None if row is None else self._job(row)

    def get(self, job_id: str) -> tuple[str, dict[str, Any]] | None:
        """(user_id, job) or None."""
        with self._lock:
            row = self._conn().execute(
                "SELECT id, status, result, error, user_id FROM jobs WHERE id = ?",
                (job_id,)).fetchone()
        return None if row is None else (row[4], self._job(row[:4]))

    def enqueue(self, user_id: str, idem: str | None, request: dict[str, Any]) -> dict[str, Any]:
        """Durably queue; with a known idempotency key, the existing job instead."""
        job_id = new_id()
        # A retry with a known key hits the unique index: the first job wins.
        with self._lock, contextlib.suppress(sqlite3.IntegrityError):
            self._conn().execute(
                "INSERT INTO jobs(id, user_id, idem, status, request) VALUES (?,?,?,?,?)",
                (job_id, user_id, idem, "queued", json.dumps(request)))
        self._wake.set()
        existing = self.find(user_id, idem) if idem else None
        return existing or {"job_id": job_id, "status": "queued", "result": None, "error": None}

    def record(self, user_id: str, idem: str, result: dict[str, Any]) -> None:
        """Remember a synchronous add's result under its idempotency key."""
        with self._lock:
            self._conn().execute(
                "INSERT OR IGNORE INTO jobs(id, user_id, idem, status, request, result) "
                "VALUES (?,?,?,?,?,?)", (new_id(), user_id, idem, "done", "{}",
                                         json.dumps(result)))

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("job queue is not open")
        return self._db

    @staticmethod
    def _job(row: tuple[Any, ...]) -> dict[str, Any]:
        job_id, status, result, error = row
        return {"job_id": job_id, "status": status,
                "result": json.loads(result) if result else None, "error": error}

    def _work(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=1.0)
            self._wake.clear()
            while not self._stop.is_set() and self._step():
                pass

    def _step(self) -> bool:
        with self._lock:
            row = self._conn().execute(
                "SELECT id, request FROM jobs WHERE status = 'queued' ORDER BY id LIMIT 1"
            ).fetchone()
        if row is None:
            return False
        job_id, request = row
        try:
            result, status, error = json.dumps(self._run(json.loads(request))), "done", None
        except Exception as exc:  # the job records why it failed; the worker goes on
            log.warning("async add %s failed: %s", job_id, type(exc).__name__)
            result, status, error = None, "failed", f"{type(exc).__name__}: {exc}"
        with self._lock:
            self._conn().execute("UPDATE jobs SET status = ?, result = ?, error = ? "
                                 "WHERE id = ?", (status, result, error, job_id))
        return True

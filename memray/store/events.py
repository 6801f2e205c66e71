"""The event log: history of every change, the write-ahead outbox, and per-user versions.

A write is acknowledged only after its events and the store operations that apply it are
committed here in one SQLite transaction. The store is then changed and the outbox entry
cleared; if the process dies in between, `pending()` hands the operations back on the next
open and they are replayed (they are idempotent), so an acknowledged write is never lost.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import numpy as np

from memray.errors import StoreError
from memray.models import MemoryEvent, MemoryRecord, utcnow
from memray.store.base import StoredMemory
from memray.store.rows import to_ms

OpKind = Literal["replace", "delete", "delete_user"]


@dataclass(frozen=True)
class StoreOp:
    """One idempotent change to apply to the vector store."""

    kind: OpKind
    user_id: str
    rows: tuple[StoredMemory, ...] = ()
    ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tombstone:
    """What a deletion leaves behind so that nothing older brings it back (a backfill of
    old logs, a merge): a content hash, a slot ("city", "like:" = prefix) or the whole
    user ("*"), with when it was deleted. Content is never kept, only its hash."""

    kind: Literal["hash", "slot", "all"]
    key: str
    at_ms: int

    def covers(self, *, content_hash: str, slot: str | None, at_ms: int) -> bool:
        """True when a fact stated at `at_ms` is older than this deletion and matches it."""
        if at_ms > self.at_ms:
            return False
        if self.kind == "all":
            return True
        if self.kind == "hash":
            return content_hash == self.key
        s = slot or ""
        return bool(s) and (s == self.key or (self.key.endswith(":") and s.startswith(self.key)))


@dataclass(frozen=True)
class Pending:
    seq: int
    op: StoreOp


class EventLog(Protocol):
    """Durable history, outbox and versions. Every method is scoped to one user."""

    def open(self) -> None: ...
    def close(self) -> None: ...

    def commit(self, user_id: str, events: Sequence[MemoryEvent], ops: Sequence[StoreOp],
               *, purge_ids: Sequence[str] = (), purge_user: bool = False,
               clear_turns: Sequence[int] = (), tombstones: Sequence[Tombstone] = (),
               marks: Sequence[tuple[str, str]] = ()) -> list[int]:
        """Atomically: purge history content (and, with purge_user, logged turns), drop the
        processed turns, append events, record tombstones and job marks (job, key), queue
        ops, bump the version. Returns the outbox sequence numbers of `ops`."""

    def log_turns(self, user_id: str, session: str, turns: Sequence[tuple[str, str, str]]) -> None:
        """Durably append (turn_id, role, content) turns awaiting extraction."""

    def pending_turns(self, user_id: str, session: str) -> list[tuple[int, str, str, str]]:
        """(seq, turn_id, role, content) of the session's unprocessed turns, oldest first."""

    def pending(self) -> list[Pending]:
        """Queued ops not yet marked done, oldest first."""

    def done(self, seqs: Sequence[int]) -> None: ...
    def history(self, user_id: str, memory_id: str) -> list[MemoryEvent]: ...
    def user_events(self, user_id: str) -> Iterator[MemoryEvent]: ...
    def version(self, user_id: str) -> int: ...
    def has_pending(self, user_id: str) -> bool:
        """True while an op of this user waits in the outbox (the store is behind)."""

    def tombstones(self, user_id: str) -> list[Tombstone]: ...
    def marks(self, job: str) -> set[str]:
        """Keys a batch job recorded as done (its checkpoint)."""

    def versions(self) -> dict[str, int]:
        """Every user's memory version (users this log has seen)."""

    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None:
        """Small durable settings of the jobs (e.g. the model a migration came from)."""

    def set_dim(self, dim: int) -> None:
        """Change the vector size of queued ops; only with an empty outbox (migration)."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL, memory_id TEXT NOT NULL, op TEXT NOT NULL,
    at_ms INTEGER NOT NULL, body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_memory ON events(user_id, memory_id, seq);
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL, kind TEXT NOT NULL, ids TEXT NOT NULL,
    records TEXT NOT NULL, vectors BLOB
);
CREATE TABLE IF NOT EXISTS versions (user_id TEXT PRIMARY KEY, version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS turns (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL, session TEXT NOT NULL, turn_id TEXT NOT NULL,
    role TEXT NOT NULL, content TEXT NOT NULL, at_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS turns_by_session ON turns(user_id, session, seq);
CREATE TABLE IF NOT EXISTS tombstones (
    user_id TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, at_ms INTEGER NOT NULL,
    PRIMARY KEY (user_id, kind, key)
);
CREATE TABLE IF NOT EXISTS marks (job TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (job, key));
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class SQLiteEventLog:
    """`EventLog` in one SQLite file (WAL, synchronous=FULL). Thread-safe."""

    def __init__(self, path: str | Path, *, dim: int) -> None:
        self._path, self._dim = Path(path), dim
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def open(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open event log {self._path}: {exc}") from exc
        self._db = db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError("event log is not open")
        return self._db

    def commit(self, user_id: str, events: Sequence[MemoryEvent], ops: Sequence[StoreOp],
               *, purge_ids: Sequence[str] = (), purge_user: bool = False,
               clear_turns: Sequence[int] = (), tombstones: Sequence[Tombstone] = (),
               marks: Sequence[tuple[str, str]] = ()) -> list[int]:
        with self._lock:
            db = self._conn()
            try:
                db.execute("BEGIN IMMEDIATE")
                if purge_user:
                    db.execute("DELETE FROM events WHERE user_id = ?", (user_id,))
                    db.execute("DELETE FROM turns WHERE user_id = ?", (user_id,))
                db.executemany("DELETE FROM turns WHERE user_id = ? AND seq = ?",
                               [(user_id, s) for s in clear_turns])
                for mid in purge_ids:
                    db.execute("DELETE FROM events WHERE user_id = ? AND memory_id = ?",
                               (user_id, mid))
                db.executemany(
                    "INSERT INTO events(user_id, memory_id, op, at_ms, body) VALUES (?,?,?,?,?)",
                    [(user_id, e.memory_id, e.op, to_ms(e.at), e.model_dump_json())
                     for e in events])
                db.executemany(
                    "INSERT INTO tombstones VALUES (?,?,?,?) ON CONFLICT(user_id, kind, key) "
                    "DO UPDATE SET at_ms = max(at_ms, excluded.at_ms)",
                    [(user_id, t.kind, t.key, t.at_ms) for t in tombstones])
                db.executemany("INSERT OR IGNORE INTO marks VALUES (?, ?)", list(marks))
                seqs = [self._queue(db, op) for op in ops]
                if events or ops or purge_ids or purge_user:  # a real change
                    db.execute(
                        "INSERT INTO versions VALUES (?, 1) ON CONFLICT(user_id) "
                        "DO UPDATE SET version = version + 1", (user_id,))
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                db.execute("ROLLBACK")
                raise StoreError(f"event log write failed: {exc}") from exc
        return seqs

    def _queue(self, db: sqlite3.Connection, op: StoreOp) -> int:
        records = json.dumps([r.record.model_dump(mode="json") for r in op.rows])
        vectors = b"".join(np.asarray(r.vector, np.float32).tobytes() for r in op.rows)
        cur = db.execute("INSERT INTO outbox(user_id, kind, ids, records, vectors) "
                         "VALUES (?,?,?,?,?)",
                         (op.user_id, op.kind, json.dumps(list(op.ids)), records, vectors))
        assert cur.lastrowid is not None
        return cur.lastrowid

    def log_turns(self, user_id: str, session: str, turns: Sequence[tuple[str, str, str]]) -> None:
        now = to_ms(utcnow())
        with self._lock:
            db = self._conn()
            try:
                db.execute("BEGIN IMMEDIATE")
                db.executemany(
                    "INSERT INTO turns(user_id, session, turn_id, role, content, at_ms) "
                    "VALUES (?,?,?,?,?,?)",
                    [(user_id, session, tid, role, text, now) for tid, role, text in turns])
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                db.execute("ROLLBACK")
                raise StoreError(f"turn log write failed: {exc}") from exc

    def pending_turns(self, user_id: str, session: str) -> list[tuple[int, str, str, str]]:
        with self._lock:
            rows = self._conn().execute(
                "SELECT seq, turn_id, role, content FROM turns WHERE user_id = ? AND session = ? "
                "ORDER BY seq", (user_id, session)).fetchall()
        return [(int(a), str(b), str(c), str(d)) for a, b, c, d in rows]

    def pending(self) -> list[Pending]:
        with self._lock:
            rows = self._conn().execute(
                "SELECT seq, user_id, kind, ids, records, vectors FROM outbox ORDER BY seq"
            ).fetchall()
        return [Pending(seq, self._decode(user, kind, ids, recs, vecs))
                for seq, user, kind, ids, recs, vecs in rows]

    def _decode(self, user: str, kind: OpKind, ids: str, recs: str, vecs: bytes) -> StoreOp:
        records = [MemoryRecord.model_validate(r) for r in json.loads(recs)]
        matrix = np.frombuffer(vecs or b"", dtype=np.float32).reshape(len(records), self._dim)
        rows = tuple(StoredMemory(r, matrix[i].copy()) for i, r in enumerate(records))
        return StoreOp(kind, user, rows, tuple(json.loads(ids)))

    def done(self, seqs: Sequence[int]) -> None:
        with self._lock:
            self._conn().executemany("DELETE FROM outbox WHERE seq = ?", [(s,) for s in seqs])

    def history(self, user_id: str, memory_id: str) -> list[MemoryEvent]:
        with self._lock:
            rows = self._conn().execute(
                "SELECT body FROM events WHERE user_id = ? AND memory_id = ? ORDER BY seq",
                (user_id, memory_id)).fetchall()
        return [MemoryEvent.model_validate_json(b) for (b,) in rows]

    def user_events(self, user_id: str) -> Iterator[MemoryEvent]:
        with self._lock:
            rows = self._conn().execute(
                "SELECT body FROM events WHERE user_id = ? ORDER BY seq", (user_id,)).fetchall()
        for (body,) in rows:
            yield MemoryEvent.model_validate_json(body)

    def has_pending(self, user_id: str) -> bool:
        with self._lock:
            row = self._conn().execute(
                "SELECT 1 FROM outbox WHERE user_id = ? LIMIT 1", (user_id,)).fetchone()
        return row is not None

    def tombstones(self, user_id: str) -> list[Tombstone]:
        with self._lock:
            rows = self._conn().execute(
                "SELECT kind, key, at_ms FROM tombstones WHERE user_id = ?", (user_id,)
            ).fetchall()
        return [Tombstone(kind, key, int(at)) for kind, key, at in rows]

    def marks(self, job: str) -> set[str]:
        with self._lock:
            rows = self._conn().execute("SELECT key FROM marks WHERE job = ?", (job,)).fetchall()
        return {str(k) for (k,) in rows}

    def versions(self) -> dict[str, int]:
        with self._lock:
            rows = self._conn().execute("SELECT user_id, version FROM versions").fetchall()
        return {str(u): int(v) for u, v in rows}

    def get_meta(self, key: str) -> str | None:
        with self._lock:
            row = self._conn().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._conn().execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE "
                                 "SET value = excluded.value", (key, value))

    def set_dim(self, dim: int) -> None:
        with self._lock:
            row = self._conn().execute("SELECT 1 FROM outbox LIMIT 1").fetchone()
            if row is not None:
                raise StoreError("cannot change the vector size while ops are queued")
            self._dim = dim

    def version(self, user_id: str) -> int:
        with self._lock:
            row = self._conn().execute(
                "SELECT version FROM versions WHERE user_id = ?", (user_id,)).fetchone()
        return int(row[0]) if row else 0

"""`EventLog` in one SQLite file under `data_dir`: the embedded default, for one process
(the milvus-lite dir beside it belongs to one process anyway)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Literal

from memray.errors import StoreError
from memray.models import MemoryEvent, utcnow
from memray.store.events import (
    CANCELLED_BY_DELETE,
    AddJob,
    DataKey,
    OpKind,
    Pending,
    StoreOp,
    Tombstone,
    UserLocks,
    decode_op,
    encode_op,
)
from memray.store.rows import to_ms

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
CREATE INDEX IF NOT EXISTS outbox_by_user ON outbox(user_id, seq);
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
CREATE TABLE IF NOT EXISTS add_jobs (
    id TEXT PRIMARY KEY, user_id TEXT NOT NULL, idem TEXT, status TEXT NOT NULL,
    request TEXT NOT NULL, result TEXT, error TEXT, lease_until REAL
);
CREATE UNIQUE INDEX IF NOT EXISTS add_jobs_idem ON add_jobs(user_id, idem)
    WHERE idem IS NOT NULL;
CREATE TABLE IF NOT EXISTS receipts (
    id TEXT PRIMARY KEY, user_id TEXT NOT NULL, at_ms INTEGER NOT NULL, body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS receipts_by_user ON receipts(user_id, at_ms);
CREATE TABLE IF NOT EXISTS data_keys (
    user_id TEXT PRIMARY KEY, key_id TEXT NOT NULL, wrapped BLOB NOT NULL,
    master_id TEXT NOT NULL
);
"""


class SQLiteEventLog:
    """`EventLog` in one SQLite file (WAL, synchronous=FULL). Thread-safe."""

    shared = False  # one process's file: other processes never write to it

    @property
    def lock_capacity(self) -> int:
        """In-process striped locks: a thread may hold any number."""
        return 1_000_000

    def __init__(self, path: str | Path, *, dim: int) -> None:
        self._path, self._dim = Path(path), dim
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._users = UserLocks()

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

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        with self._lock:
            try:
                return self._conn().execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise self._failed("event log read", exc) from exc

    def _run(self, sql: str, args: tuple[Any, ...] = ()) -> None:
        """One statement in its own transaction; IntegrityError is left to the caller."""
        with self._lock:
            try:
                self._conn().execute(sql, args)
            except sqlite3.IntegrityError:
                raise
            except sqlite3.Error as exc:
                raise self._failed("event log write", exc) from exc

    @contextmanager
    def _transaction(self, what: str) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT on the shared connection, under the lock. On any
        failure the transaction is rolled back, unless SQLite already ended it (a full
        disk does), so the connection is never left inside one."""
        with self._lock:
            db = self._conn()
            try:
                db.execute("BEGIN IMMEDIATE")
                yield db
                db.execute("COMMIT")
            except BaseException as exc:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self._failed(what, exc) from exc
                raise

    def _failed(self, what: str, exc: sqlite3.Error) -> StoreError:
        hint = " (the disk is full or read-only; nothing was written)" if isinstance(
            exc, sqlite3.OperationalError) and any(
            w in str(exc) for w in ("full", "readonly", "read-only", "disk I/O")) else ""
        return StoreError(f"{what} failed on {self._path}: {exc}{hint}")

    # -- ChangeLog -------------------------------------------------------------------
    def user_lock(self, user_id: str) -> AbstractContextManager[None]:
        return self._users.hold(user_id)

    def try_user_lock(self, user_id: str) -> AbstractContextManager[bool]:
        return self._users.try_hold(user_id)

    def write_barrier(self) -> AbstractContextManager[None]:
        return nullcontext()  # one process: Memory's write gate keeps its writers out

    def commit(self, user_id: str, events: Sequence[MemoryEvent], ops: Sequence[StoreOp],
               *, purge_ids: Sequence[str] = (), purge_user: bool = False,
               clear_turns: Sequence[int] = (), tombstones: Sequence[Tombstone] = (),
               marks: Sequence[tuple[str, str]] = ()) -> list[int]:
        with self._transaction("event log write") as db:
            if purge_user:
                db.execute("DELETE FROM events WHERE user_id = ?", (user_id,))
                db.execute("DELETE FROM turns WHERE user_id = ?", (user_id,))
                db.execute("UPDATE add_jobs SET request = '{}', result = NULL, idem = NULL, "
                           "lease_until = NULL, "
                           "error = CASE status WHEN 'done' THEN NULL ELSE ? END, "
                           "status = CASE status WHEN 'done' THEN 'done' ELSE 'failed' END "
                           "WHERE user_id = ?", (CANCELLED_BY_DELETE, user_id))
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
        return seqs

    @staticmethod
    def _queue(db: sqlite3.Connection, op: StoreOp) -> int:
        cur = db.execute("INSERT INTO outbox(user_id, kind, ids, records, vectors) "
                         "VALUES (?,?,?,?,?)", (op.user_id, op.kind, *encode_op(op)))
        assert cur.lastrowid is not None
        return cur.lastrowid

    def pending(self, user_id: str | None = None) -> list[Pending]:
        sql = "SELECT seq, user_id, kind, ids, records, vectors FROM outbox"
        rows = self._rows(sql + " ORDER BY seq") if user_id is None else \
            self._rows(sql + " WHERE user_id = ? ORDER BY seq", (user_id,))
        return [Pending(seq, self._decode(user, kind, ids, recs, vecs))
                for seq, user, kind, ids, recs, vecs in rows]

    def _decode(self, user: str, kind: OpKind, ids: str, recs: str, vecs: bytes) -> StoreOp:
        return decode_op(user, kind, ids, recs, vecs, self._dim)

    def pending_users(self) -> list[str]:
        rows = self._rows("SELECT user_id, min(seq) AS first FROM outbox GROUP BY user_id "
                          "ORDER BY first")
        return [str(u) for u, _ in rows]

    def done(self, seqs: Sequence[int]) -> None:
        with self._lock:
            self._conn().executemany("DELETE FROM outbox WHERE seq = ?", [(s,) for s in seqs])

    def history(self, user_id: str, memory_id: str) -> list[MemoryEvent]:
        rows = self._rows("SELECT body FROM events WHERE user_id = ? AND memory_id = ? "
                          "ORDER BY seq", (user_id, memory_id))
        return [MemoryEvent.model_validate_json(b) for (b,) in rows]

    def user_events(self, user_id: str) -> Iterator[MemoryEvent]:
        rows = self._rows("SELECT body FROM events WHERE user_id = ? ORDER BY seq", (user_id,))
        for (body,) in rows:
            yield MemoryEvent.model_validate_json(body)

    def has_pending(self, user_id: str) -> bool:
        return bool(self._rows("SELECT 1 FROM outbox WHERE user_id = ? LIMIT 1", (user_id,)))

    def versions(self) -> dict[str, int]:
        return {str(u): int(v) for u, v in self._rows("SELECT user_id, version FROM versions")}

    def version(self, user_id: str) -> int:
        rows = self._rows("SELECT version FROM versions WHERE user_id = ?", (user_id,))
        return int(rows[0][0]) if rows else 0

    def set_dim(self, dim: int) -> None:
        with self._lock:
            row = self._conn().execute("SELECT 1 FROM outbox LIMIT 1").fetchone()
            if row is not None:
                raise StoreError("cannot change the vector size while ops are queued")
            self._dim = dim

    # -- TurnLog ---------------------------------------------------------------------
    def log_turns(self, user_id: str, session: str, turns: Sequence[tuple[str, str, str]]) -> None:
        now = to_ms(utcnow())
        with self._transaction("turn log write") as db:
            db.executemany(
                "INSERT INTO turns(user_id, session, turn_id, role, content, at_ms) "
                "VALUES (?,?,?,?,?,?)",
                [(user_id, session, tid, role, text, now) for tid, role, text in turns])

    def pending_turns(self, user_id: str, session: str) -> list[tuple[int, str, str, str]]:
        rows = self._rows("SELECT seq, turn_id, role, content FROM turns "
                          "WHERE user_id = ? AND session = ? ORDER BY seq", (user_id, session))
        return [(int(a), str(b), str(c), str(d)) for a, b, c, d in rows]

    def user_turns(self, user_id: str) -> list[tuple[int, str, str]]:
        rows = self._rows("SELECT seq, turn_id, content FROM turns WHERE user_id = ? "
                          "ORDER BY seq", (user_id,))
        return [(int(a), str(b), str(c)) for a, b, c in rows]

    def enqueue_add(self, job_id: str, user_id: str, idem: str | None, request: str) -> AddJob:
        try:
            self._run("INSERT INTO add_jobs(id, user_id, idem, status, request) "
                      "VALUES (?,?,?,?,?)", (job_id, user_id, idem, "queued", request))
        except sqlite3.IntegrityError:  # a retry with a known key: the first job wins
            assert idem is not None
            found = self.find_add(user_id, idem)
            assert found is not None
            return found
        return AddJob(job_id, user_id, "queued", request)

    def record_add(self, job_id: str, user_id: str, idem: str, result: str) -> None:
        self._run("INSERT OR IGNORE INTO add_jobs(id, user_id, idem, status, request, result) "
                  "VALUES (?,?,?,?,?,?)", (job_id, user_id, idem, "done", "{}", result))

    _JOB = "SELECT id, user_id, status, request, result, error FROM add_jobs"

    def find_add(self, user_id: str, idem: str) -> AddJob | None:
        rows = self._rows(self._JOB + " WHERE user_id = ? AND idem = ?", (user_id, idem))
        return AddJob(*rows[0]) if rows else None

    def get_add(self, job_id: str) -> AddJob | None:
        rows = self._rows(self._JOB + " WHERE id = ?", (job_id,))
        return AddJob(*rows[0]) if rows else None

    def claim_add(self, lease_s: float) -> AddJob | None:
        now = time.time()
        with self._transaction("async add claim") as db:
            row = db.execute(
                self._JOB + " WHERE status = 'queued' OR (status = 'running' AND "
                "lease_until < ?) ORDER BY id LIMIT 1", (now,)).fetchone()
            if row is not None:
                db.execute("UPDATE add_jobs SET status = 'running', lease_until = ? "
                           "WHERE id = ?", (now + lease_s, row[0]))
        return None if row is None else AddJob(row[0], row[1], "running", *row[3:])

    def finish_add(self, job_id: str, status: Literal["done", "failed"], result: str | None,
                   error: str | None) -> None:
        self._run("UPDATE add_jobs SET status = ?, result = ?, error = ?, lease_until = NULL "
                  "WHERE id = ?", (status, result, error, job_id))

    # -- JobState --------------------------------------------------------------------
    def tombstones(self, user_id: str) -> list[Tombstone]:
        rows = self._rows("SELECT kind, key, at_ms FROM tombstones WHERE user_id = ?",
                          (user_id,))
        return [Tombstone(kind, key, int(at)) for kind, key, at in rows]

    def marks(self, job: str) -> set[str]:
        return {str(k) for (k,) in self._rows("SELECT key FROM marks WHERE job = ?", (job,))}

    def get_meta(self, key: str) -> str | None:
        rows = self._rows("SELECT value FROM meta WHERE key = ?", (key,))
        return None if not rows else str(rows[0][0])

    def set_meta(self, key: str, value: str) -> None:
        self._run("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE "
                  "SET value = excluded.value", (key, value))

    def record_receipt(self, user_id: str, receipt_id: str, at_ms: int, body: str) -> None:
        self._run("INSERT OR IGNORE INTO receipts VALUES (?, ?, ?, ?)",
                  (receipt_id, user_id, at_ms, body))

    def receipts(self, user_id: str) -> list[str]:
        rows = self._rows("SELECT body FROM receipts WHERE user_id = ? ORDER BY at_ms, id",
                          (user_id,))
        return [str(b) for (b,) in rows]

    def data_key(self, user_id: str) -> DataKey | None:
        rows = self._rows("SELECT key_id, wrapped, master_id FROM data_keys "
                          "WHERE user_id = ?", (user_id,))
        return None if not rows else DataKey(str(rows[0][0]), bytes(rows[0][1]),
                                             str(rows[0][2]))

    def add_data_key(self, user_id: str, key: DataKey) -> DataKey:
        self._run("INSERT OR IGNORE INTO data_keys VALUES (?, ?, ?, ?)",
                  (user_id, key.key_id, key.wrapped, key.master_id))
        kept = self.data_key(user_id)
        assert kept is not None
        return kept

    def drop_data_key(self, user_id: str) -> bool:
        had = self.data_key(user_id) is not None
        # secure_delete: the freed page is zeroed, so the wrapped key is not left in it.
        with self._lock:
            db = self._conn()
            try:
                db.execute("PRAGMA secure_delete = ON")
                db.execute("DELETE FROM data_keys WHERE user_id = ?", (user_id,))
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                raise self._failed("event log write", exc) from exc
        return had

    def data_keys(self) -> list[tuple[str, DataKey]]:
        rows = self._rows("SELECT user_id, key_id, wrapped, master_id FROM data_keys")
        return [(str(u), DataKey(str(k), bytes(w), str(m))) for u, k, w, m in rows]

    def rewrap_data_key(self, user_id: str, key: DataKey) -> None:
        self._run("UPDATE data_keys SET wrapped = ?, master_id = ? "
                  "WHERE user_id = ? AND key_id = ?",
                  (key.wrapped, key.master_id, user_id, key.key_id))

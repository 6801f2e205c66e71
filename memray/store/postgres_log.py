"""`EventLog` on PostgreSQL: the log every process of a cluster shares (cluster mode).

The schema is created and versioned here (`memray_schema`); the per-user lock is a
session-level advisory lock, so writes of one user are serialized across processes.
User ids, sessions and keys may be long (16 KiB): unique keys and indexes use their
sha256 (`memray_key`), never the text itself, which a btree index could not hold.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Literal, cast

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from memray.errors import StoreError, StoreUnavailableError
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

log = logging.getLogger(__name__)

Conn = psycopg.Connection[TupleRow]

SCHEMA_VERSION = 3
# Advisory lock keys: the schema lock is in the two-int4 key space, user locks in the
# bigint one; PostgreSQL keeps the two spaces apart, so they can never collide.
_SCHEMA_LOCK = (0x6D656D72, 1)  # ("memr", 1)
_CONNECT_TIMEOUT_S = 30.0
# A pooled connection back in the pool for less than this is lent without a check. The
# check is a round trip of its own: on every borrow it was half of a search's statements.
# A connection that died in that window (a server restart) fails once; reads are retried
# on a fresh one.
_CHECK_AFTER_IDLE_S = 2.0

# Each entry takes the schema from the previous version to this one.
_MIGRATIONS: dict[int, tuple[str, ...]] = {1: (
    # sha256 of the UTF-8 text. convert_to is only STABLE (it depends on the database
    # encoding, which never changes for a database), so declaring this IMMUTABLE is sound.
    """CREATE OR REPLACE FUNCTION memray_key(text) RETURNS bytea LANGUAGE sql IMMUTABLE
       STRICT PARALLEL SAFE AS $$ SELECT sha256(convert_to($1, 'UTF8')) $$""",
    """CREATE TABLE IF NOT EXISTS memray_events (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        user_id TEXT NOT NULL,
        user_key BYTEA GENERATED ALWAYS AS (memray_key(user_id)) STORED,
        memory_id TEXT NOT NULL, op TEXT NOT NULL, at_ms BIGINT NOT NULL, body TEXT NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS memray_events_by_memory
       ON memray_events (user_key, memory_id, seq)""",
    """CREATE TABLE IF NOT EXISTS memray_outbox (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        user_id TEXT NOT NULL,
        user_key BYTEA GENERATED ALWAYS AS (memray_key(user_id)) STORED,
        kind TEXT NOT NULL, ids TEXT NOT NULL, records TEXT NOT NULL,
        vectors BYTEA NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS memray_outbox_by_user ON memray_outbox (user_key, seq)",
    """CREATE TABLE IF NOT EXISTS memray_versions (
        user_id TEXT NOT NULL,
        user_key BYTEA GENERATED ALWAYS AS (memray_key(user_id)) STORED PRIMARY KEY,
        version BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS memray_turns (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        user_id TEXT NOT NULL,
        user_key BYTEA GENERATED ALWAYS AS (memray_key(user_id)) STORED,
        session TEXT NOT NULL,
        session_key BYTEA GENERATED ALWAYS AS (memray_key(session)) STORED,
        turn_id TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL,
        at_ms BIGINT NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS memray_turns_by_session
       ON memray_turns (user_key, session_key, seq)""",
    """CREATE TABLE IF NOT EXISTS memray_tombstones (
        user_id TEXT NOT NULL,
        user_key BYTEA GENERATED ALWAYS AS (memray_key(user_id)) STORED,
        kind TEXT NOT NULL, key TEXT NOT NULL,
        key_hash BYTEA GENERATED ALWAYS AS (memray_key(key)) STORED,
        at_ms BIGINT NOT NULL,
        PRIMARY KEY (user_key, kind, key_hash))""",
    """CREATE TABLE IF NOT EXISTS memray_marks (
        job TEXT NOT NULL, key TEXT NOT NULL,
        key_hash BYTEA GENERATED ALWAYS AS (memray_key(key)) STORED,
        PRIMARY KEY (job, key_hash))""",
    "CREATE TABLE IF NOT EXISTS memray_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS memray_add_jobs (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        user_key BYTEA GENERATED ALWAYS AS (memray_key(user_id)) STORED,
        idem TEXT,
        idem_key BYTEA GENERATED ALWAYS AS (memray_key(idem)) STORED,
        status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed')),
        request TEXT NOT NULL, result TEXT, error TEXT, lease_until TIMESTAMPTZ)""",
    """CREATE UNIQUE INDEX IF NOT EXISTS memray_add_jobs_idem
       ON memray_add_jobs (user_key, idem_key) WHERE idem IS NOT NULL""",
    """CREATE INDEX IF NOT EXISTS memray_add_jobs_open
       ON memray_add_jobs (id) WHERE status IN ('queued', 'running')""",
), 2: (
    # Deletion receipts (ids and counts, no content): they outlive the user's deletion.
    """CREATE TABLE IF NOT EXISTS memray_receipts (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        user_key BYTEA GENERATED ALWAYS AS (memray_key(user_id)) STORED,
        at_ms BIGINT NOT NULL, body TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS memray_receipts_by_user ON memray_receipts (user_key, at_ms)",
), 3: (
    # Per-user data keys, wrapped by a master key (memray/crypto/): dropping one shreds
    # everything encrypted under it.
    """CREATE TABLE IF NOT EXISTS memray_data_keys (
        user_id TEXT NOT NULL,
        user_key BYTEA GENERATED ALWAYS AS (memray_key(user_id)) STORED,
        key_id TEXT NOT NULL, wrapped BYTEA NOT NULL, master_id TEXT NOT NULL)""",
    "CREATE UNIQUE INDEX IF NOT EXISTS memray_data_keys_user ON memray_data_keys (user_key)",
)}


# The write barrier's advisory key (two-int form: a key space apart from user keys).
_BARRIER = (0x6D656D72, 2)


def user_lock_key(user_id: str) -> int:
    """The user's advisory lock key: a stable signed 64-bit hash of the id."""
    digest = hashlib.blake2b(user_id.encode("utf-8"), digest_size=8,
                             person=b"memray-user-lock").digest()
    return int.from_bytes(digest, "big", signed=True)


class PostgresEventLog:
    """`EventLog` in PostgreSQL tables prefixed `memray_`, shared by every process.

    Thread-safe: each call takes a connection from the pool, except that a thread holding
    a user lock runs its calls on the lock's connection, so a lock holder never waits for
    a second one. At most `pool_size` users can be locked at once per process.
    """

    shared = True  # every process of a deployment writes here: versions are global

    @property
    def lock_capacity(self) -> int:
        """Each held user lock keeps a pooled connection; leave one for other calls."""
        return max(1, self._pool_size - 1)

    def __init__(self, dsn: str, *, dim: int, pool_size: int = 8,
                 check_after_idle_s: float = _CHECK_AFTER_IDLE_S) -> None:
        self._dsn, self._dim, self._pool_size = dsn, dim, pool_size
        self._check_after_idle_s = check_after_idle_s
        self._returned: dict[int, float] = {}  # id(connection) -> when it came back
        self._pool: ConnectionPool[Conn] | None = None
        self._users = UserLocks()
        self._local = threading.local()

    def open(self) -> None:
        """Connect, then create or check the schema; StoreError when the database's
        schema is newer than this code's. Opening an open log does nothing."""
        if self._pool is not None:
            return
        # One plain connection first: it fails fast with the server's reason (a pool
        # would retry until its timeout), and sets up the schema.
        try:
            conn = psycopg.connect(self._dsn, autocommit=True,
                                   connect_timeout=int(_CONNECT_TIMEOUT_S))
        except psycopg.Error as exc:
            raise StoreUnavailableError(f"cannot reach the PostgreSQL event log: {exc}") from exc
        try:
            with conn:
                self._migrate(conn)
        except psycopg.Error as exc:
            raise StoreError(f"event log schema setup failed: {exc}") from exc
        pool: ConnectionPool[Conn] = ConnectionPool(
            self._dsn, min_size=1, max_size=self._pool_size, open=False,
            kwargs={"autocommit": True}, check=self._check_if_idle,
            name="memray-events", timeout=_CONNECT_TIMEOUT_S)
        try:
            pool.open(wait=True, timeout=_CONNECT_TIMEOUT_S)
        except psycopg.Error as exc:
            pool.close()
            raise StoreUnavailableError(f"cannot reach the PostgreSQL event log: {exc}") from exc
        self._pool = pool

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    @staticmethod
    def _migrate(conn: Conn) -> None:
        # The transaction-level lock makes processes that open at once take turns: the
        # first creates the tables, the others find them.
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", _SCHEMA_LOCK)
            conn.execute("CREATE TABLE IF NOT EXISTS memray_schema ("
                         "id INT PRIMARY KEY CHECK (id = 1), version INT NOT NULL)")
            row = conn.execute("SELECT version FROM memray_schema").fetchone()
            found = 0 if row is None else int(row[0])
            if found > SCHEMA_VERSION:
                raise StoreError(f"the event log's schema is version {found}, newer than this "
                                 f"memray's {SCHEMA_VERSION}: upgrade memray")
            for version in range(found + 1, SCHEMA_VERSION + 1):
                log.info("event log schema: migrating to version %d", version)
                for statement in _MIGRATIONS[version]:
                    conn.execute(statement)
            conn.execute("INSERT INTO memray_schema VALUES (1, %s) ON CONFLICT (id) "
                         "DO UPDATE SET version = EXCLUDED.version", (SCHEMA_VERSION,))

    # -- connections -------------------------------------------------------------------
    def _held(self) -> dict[int, Conn]:
        """This thread's advisory locks: key -> the connection holding it."""
        held: dict[int, Conn] | None = getattr(self._local, "held", None)
        if held is None:
            held = self._local.held = {}
        return held

    def _get_pool(self) -> ConnectionPool[Conn]:
        if self._pool is None:
            raise StoreError("event log is not open")
        return self._pool

    def _returning(self, conn: Conn) -> None:
        """Stamps `conn` as it goes back to the pool. Not the pool's `reset` callback:
        with one, psycopg_pool hands every returned connection to a worker thread."""
        if len(self._returned) > 4 * self._pool_size:  # stamps of connections since closed
            self._returned.clear()  # (a connection without one is checked: safe)
        self._returned[id(conn)] = time.monotonic()

    def _check_if_idle(self, conn: Conn) -> None:
        """The pool's check on lending `conn`: only when it sat idle long enough to have
        met a server restart or an idle timeout unseen (a new connection has no stamp)."""
        back = self._returned.pop(id(conn), None)
        if back is None or time.monotonic() - back >= self._check_after_idle_s:
            ConnectionPool.check_connection(conn)

    @contextmanager
    def _conn(self, what: str) -> Iterator[Conn]:
        """A connection for one call (the thread's lock connection if it holds one);
        driver errors become StoreError."""
        held = self._held()
        try:
            if held:
                yield next(reversed(held.values()))
            else:
                with self._get_pool().connection() as conn:
                    try:
                        yield conn
                    finally:
                        self._returning(conn)
        except psycopg.Error as exc:
            raise StoreError(f"event log {what} failed: {exc}") from exc

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[TupleRow]:
        """A read's rows, run once more on a connection the server dropped."""
        with self._conn("read") as conn:
            try:
                return conn.execute(sql, args).fetchall()
            except psycopg.OperationalError:
                # Lent unchecked and dead (see _CHECK_AFTER_IDLE_S): the pool drops it when
                # it comes back, and a read can run again. Not inside a held user lock,
                # whose connection it is.
                if not conn.broken or self._held():
                    raise
        self._returned.clear()  # its neighbours may be dead too: check each one lent next
        with self._conn("read") as conn:
            return conn.execute(sql, args).fetchall()

    def _written(self, sql: str, args: Sequence[Any] = ()) -> list[TupleRow]:
        """A write's RETURNING rows; never run twice (the first may have committed)."""
        with self._conn("write") as conn:
            return conn.execute(sql, args).fetchall()

    def _run(self, sql: str, args: Sequence[Any] = ()) -> None:
        with self._conn("write") as conn:
            conn.execute(sql, args)

    # -- user locks --------------------------------------------------------------------
    @contextmanager
    def _user_lock(self, user_id: str) -> Iterator[None]:
        with self._users.hold(user_id), self._advisory(user_id, wait=True):
            yield

    def user_lock(self, user_id: str) -> AbstractContextManager[None]:
        """Waits for the user's lock in this process, then across processes (a session
        advisory lock held on one pooled connection until release). Reentrant within
        a thread."""
        return self._user_lock(user_id)

    @contextmanager
    def _try_user_lock(self, user_id: str) -> Iterator[bool]:
        with self._users.try_hold(user_id) as got:
            if not got:
                yield False
                return
            with self._advisory(user_id, wait=False) as locked:
                yield locked

    def try_user_lock(self, user_id: str) -> AbstractContextManager[bool]:
        """Yields False, holding nothing, when another thread or process has the lock."""
        return self._try_user_lock(user_id)

    @contextmanager
    def _advisory(self, user_id: str, *, wait: bool) -> Iterator[bool]:
        key, held = user_lock_key(user_id), self._held()
        if key in held:  # this thread has it already; the outermost holder releases it
            yield True
            return
        conn = self._acquire(key, wait=wait)
        if conn is None:
            yield False
            return
        held[key] = conn
        try:
            yield True
        finally:
            del held[key]
            self._release(conn, key)

    def _acquire(self, key: int, *, wait: bool) -> Conn | None:
        """A pooled connection now holding the advisory lock `key`, or None (not waiting
        and someone else has it)."""
        pool = self._get_pool()
        try:
            conn = pool.getconn()
        except psycopg.Error as exc:
            raise StoreError(f"event log lock failed: {exc}") from exc
        try:
            got = self._lock_on(conn, key, wait=wait)
        except BaseException as exc:
            conn.close()  # interrupted while waiting: the session may hold the lock
            pool.putconn(conn)
            if isinstance(exc, psycopg.Error):
                raise StoreError(f"event log lock failed: {exc}") from exc
            raise
        if not got:
            self._give_back(conn)
            return None
        return conn

    @staticmethod
    def _lock_on(conn: Conn, key: int, *, wait: bool) -> bool:
        """The write barrier shared first (so a waiting writer holds nothing a migration
        could wait for), then the user's lock; on a miss, nothing stays held."""
        if wait:
            conn.execute("SELECT pg_advisory_lock_shared(%s, %s)", _BARRIER)
            conn.execute("SELECT pg_advisory_lock(%s)", (key,))
            return True
        row = conn.execute("SELECT pg_try_advisory_lock_shared(%s, %s)", _BARRIER).fetchone()
        if row is None or not row[0]:
            return False
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        if row is None or not row[0]:
            conn.execute("SELECT pg_advisory_unlock_shared(%s, %s)", _BARRIER)
            return False
        return True

    def _release(self, conn: Conn, key: int) -> None:
        try:
            row = conn.execute("SELECT pg_advisory_unlock(%s)", (key,)).fetchone()
            if row is None or not row[0]:
                log.warning("advisory lock %d was not held at release", key)
            conn.execute("SELECT pg_advisory_unlock_shared(%s, %s)", _BARRIER)
        except psycopg.Error as exc:
            # Closing the session is what frees its locks.
            log.warning("advisory lock %d: unlock failed, dropping the connection: %s",
                        key, exc)
            conn.close()
        finally:
            self._give_back(conn)

    @contextmanager
    def _barrier(self) -> Iterator[None]:
        pool = self._get_pool()
        try:
            conn = pool.getconn()
            conn.execute("SELECT pg_advisory_lock(%s, %s)", _BARRIER)
        except psycopg.Error as exc:
            raise StoreError(f"event log barrier failed: {exc}") from exc
        try:
            yield
        finally:
            try:
                conn.execute("SELECT pg_advisory_unlock(%s, %s)", _BARRIER)
            except psycopg.Error:
                conn.close()  # closing the session frees the barrier
            self._give_back(conn)

    def write_barrier(self) -> AbstractContextManager[None]:
        """Exclusive: waits for every process's user locks to be released and holds new
        ones back (PostgreSQL queues them behind this waiter) until released."""
        return self._barrier()

    def _give_back(self, conn: Conn) -> None:
        pool = self._pool
        if pool is None:  # closed while the lock was held
            conn.close()
        else:
            self._returning(conn)
            pool.putconn(conn)

    # -- ChangeLog ---------------------------------------------------------------------
    def commit(self, user_id: str, events: Sequence[MemoryEvent], ops: Sequence[StoreOp],
               *, purge_ids: Sequence[str] = (), purge_user: bool = False,
               clear_turns: Sequence[int] = (), tombstones: Sequence[Tombstone] = (),
               marks: Sequence[tuple[str, str]] = ()) -> list[int]:
        """One transaction. The version row is bumped first: its row lock orders
        concurrent commits of one user (from any process), so their outbox entries are in
        commit order and no bump is lost."""
        encoded = [(op.user_id, op.kind, *encode_op(op)) for op in ops]
        with self._conn("write") as conn, conn.transaction():
            cur = conn.cursor()
            if events or ops or purge_ids or purge_user:  # a real change
                cur.execute(
                    "INSERT INTO memray_versions (user_id, version) VALUES (%s, 1) "
                    "ON CONFLICT (user_key) DO UPDATE SET version = memray_versions.version + 1",
                    (user_id,))
            self._purge(cur, user_id, purge_ids, purge_user, clear_turns)
            if events:
                cur.executemany(
                    "INSERT INTO memray_events (user_id, memory_id, op, at_ms, body) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    [(user_id, e.memory_id, e.op, to_ms(e.at), e.model_dump_json())
                     for e in events])
            self._record(cur, user_id, tombstones, marks)
            seqs = []
            for row in encoded:
                cur.execute("INSERT INTO memray_outbox (user_id, kind, ids, records, vectors) "
                            "VALUES (%s, %s, %s, %s, %s) RETURNING seq", row)
                seqs.append(int(self._one(cur)[0]))
        return seqs

    @staticmethod
    def _one(cur: psycopg.Cursor[TupleRow]) -> TupleRow:
        row = cur.fetchone()
        if row is None:
            raise StoreError("event log write returned no row")
        return row

    @staticmethod
    def _purge(cur: psycopg.Cursor[TupleRow], user_id: str, purge_ids: Sequence[str],
               purge_user: bool, clear_turns: Sequence[int]) -> None:
        if purge_user:
            cur.execute("DELETE FROM memray_events WHERE user_key = memray_key(%s)", (user_id,))
            cur.execute("DELETE FROM memray_turns WHERE user_key = memray_key(%s)", (user_id,))
            cur.execute("UPDATE memray_add_jobs SET request = '{}', result = NULL, "
                        "idem = NULL, lease_until = NULL, "
                        "error = CASE status WHEN 'done' THEN NULL ELSE %s END, "
                        "status = CASE status WHEN 'done' THEN 'done' ELSE 'failed' END "
                        "WHERE user_key = memray_key(%s)", (CANCELLED_BY_DELETE, user_id))
        if clear_turns:
            cur.execute("DELETE FROM memray_turns WHERE user_key = memray_key(%s) "
                        "AND seq = ANY(%s)", (user_id, list(clear_turns)))
        if purge_ids:
            cur.execute("DELETE FROM memray_events WHERE user_key = memray_key(%s) "
                        "AND memory_id = ANY(%s)", (user_id, list(purge_ids)))

    @staticmethod
    def _record(cur: psycopg.Cursor[TupleRow], user_id: str, tombstones: Sequence[Tombstone],
                marks: Sequence[tuple[str, str]]) -> None:
        # Sorted, so that concurrent commits lock shared rows (marks) in one order and
        # cannot deadlock.
        if tombstones:
            cur.executemany(
                "INSERT INTO memray_tombstones (user_id, kind, key, at_ms) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (user_key, kind, key_hash) DO UPDATE "
                "SET at_ms = GREATEST(memray_tombstones.at_ms, EXCLUDED.at_ms)",
                sorted((user_id, t.kind, t.key, t.at_ms) for t in tombstones))
        if marks:
            cur.executemany("INSERT INTO memray_marks (job, key) VALUES (%s, %s) "
                            "ON CONFLICT DO NOTHING", sorted(set(marks)))

    def pending(self, user_id: str | None = None) -> list[Pending]:
        """Queued ops (of one user or all), by outbox sequence."""
        sql = "SELECT seq, user_id, kind, ids, records, vectors FROM memray_outbox"
        rows = self._rows(sql + " ORDER BY seq") if user_id is None else \
            self._rows(sql + " WHERE user_key = memray_key(%s) ORDER BY seq", (user_id,))
        return [Pending(int(seq), self._decode(user, kind, ids, recs, bytes(vecs)))
                for seq, user, kind, ids, recs, vecs in rows]

    def _decode(self, user: str, kind: OpKind, ids: str, recs: str, vecs: bytes) -> StoreOp:
        return decode_op(user, kind, ids, recs, vecs, self._dim)

    def pending_users(self) -> list[str]:
        """Users with queued ops, the one with the oldest op first."""
        rows = self._rows("SELECT user_id FROM memray_outbox GROUP BY user_key, user_id "
                          "ORDER BY min(seq)")
        return [str(u) for (u,) in rows]

    def done(self, seqs: Sequence[int]) -> None:
        if seqs:
            self._run("DELETE FROM memray_outbox WHERE seq = ANY(%s)", (list(seqs),))

    def history(self, user_id: str, memory_id: str) -> list[MemoryEvent]:
        """The memory's events, oldest first."""
        rows = self._rows("SELECT body FROM memray_events WHERE user_key = memray_key(%s) "
                          "AND memory_id = %s ORDER BY seq", (user_id, memory_id))
        return [MemoryEvent.model_validate_json(b) for (b,) in rows]

    def user_events(self, user_id: str) -> Iterator[MemoryEvent]:
        """The user's events, oldest first (read at the call)."""
        rows = self._rows("SELECT body FROM memray_events WHERE user_key = memray_key(%s) "
                          "ORDER BY seq", (user_id,))
        return (MemoryEvent.model_validate_json(b) for (b,) in rows)

    def has_pending(self, user_id: str) -> bool:
        return bool(self._rows("SELECT 1 FROM memray_outbox WHERE user_key = memray_key(%s) "
                               "LIMIT 1", (user_id,)))

    def versions(self) -> dict[str, int]:
        rows = self._rows("SELECT user_id, version FROM memray_versions")
        return {str(u): int(v) for u, v in rows}

    def version(self, user_id: str) -> int:
        """The user's memory version: 0 before the first real change."""
        rows = self._rows("SELECT version FROM memray_versions WHERE user_key = memray_key(%s)",
                          (user_id,))
        return int(rows[0][0]) if rows else 0

    def set_dim(self, dim: int) -> None:
        """Refused (StoreError) while any op is queued. Changes this process's decoding
        only: every other process sharing the log needs the same call."""
        if self._rows("SELECT 1 FROM memray_outbox LIMIT 1"):
            raise StoreError("cannot change the vector size while ops are queued")
        self._dim = dim

    # -- TurnLog -----------------------------------------------------------------------
    def log_turns(self, user_id: str, session: str, turns: Sequence[tuple[str, str, str]]) -> None:
        if not turns:
            return
        now = to_ms(utcnow())
        with self._conn("turn log write") as conn, conn.transaction():
            conn.cursor().executemany(
                "INSERT INTO memray_turns (user_id, session, turn_id, role, content, at_ms) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                [(user_id, session, tid, role, text, now) for tid, role, text in turns])

    def pending_turns(self, user_id: str, session: str) -> list[tuple[int, str, str, str]]:
        rows = self._rows("SELECT seq, turn_id, role, content FROM memray_turns "
                          "WHERE user_key = memray_key(%s) AND session_key = memray_key(%s) "
                          "ORDER BY seq", (user_id, session))
        return [(int(a), str(b), str(c), str(d)) for a, b, c, d in rows]

    def user_turns(self, user_id: str) -> list[tuple[int, str, str]]:
        rows = self._rows("SELECT seq, turn_id, content FROM memray_turns "
                          "WHERE user_key = memray_key(%s) ORDER BY seq", (user_id,))
        return [(int(a), str(b), str(c)) for a, b, c in rows]

    _JOB = "SELECT id, user_id, status, request, result, error FROM memray_add_jobs"

    @staticmethod
    def _job(row: TupleRow) -> AddJob:
        return AddJob(row[0], row[1], cast(Any, row[2]), row[3], row[4], row[5])

    def enqueue_add(self, job_id: str, user_id: str, idem: str | None, request: str) -> AddJob:
        """Queue a job; with a known (user_id, idem) the first job is returned instead.
        A job id already in use is refused (StoreError)."""
        rows = self._written(
            "INSERT INTO memray_add_jobs (id, user_id, idem, status, request) "
            "VALUES (%s, %s, %s, 'queued', %s) "
            "ON CONFLICT (user_key, idem_key) WHERE idem IS NOT NULL DO NOTHING RETURNING id",
            (job_id, user_id, idem, request))
        if rows:
            return AddJob(job_id, user_id, "queued", request)
        found = None if idem is None else self.find_add(user_id, idem)
        if found is None:
            raise StoreError(f"add job {job_id} conflicts with a job that vanished")
        return found

    def record_add(self, job_id: str, user_id: str, idem: str, result: str) -> None:
        """Keep a synchronous add's result; a known id or (user_id, idem) wins."""
        self._run("INSERT INTO memray_add_jobs (id, user_id, idem, status, request, result) "
                  "VALUES (%s, %s, %s, 'done', '{}', %s) ON CONFLICT DO NOTHING",
                  (job_id, user_id, idem, result))

    def find_add(self, user_id: str, idem: str) -> AddJob | None:
        rows = self._rows(self._JOB + " WHERE user_key = memray_key(%s) "
                          "AND idem_key = memray_key(%s) AND idem IS NOT NULL", (user_id, idem))
        return self._job(rows[0]) if rows else None

    def get_add(self, job_id: str) -> AddJob | None:
        rows = self._rows(self._JOB + " WHERE id = %s", (job_id,))
        return self._job(rows[0]) if rows else None

    def claim_add(self, lease_s: float) -> AddJob | None:
        """The queued (or lease-expired) job with the smallest id, now running for
        `lease_s` seconds (database clock) under this caller alone: SKIP LOCKED lets
        concurrent claimers pass each other's row instead of taking it twice."""
        rows = self._written(
            "UPDATE memray_add_jobs SET status = 'running', "
            "lease_until = now() + make_interval(secs => %s) "
            "WHERE id = (SELECT id FROM memray_add_jobs WHERE status = 'queued' "
            "OR (status = 'running' AND lease_until < now()) "
            "ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) "
            "RETURNING id, user_id, status, request, result, error", (lease_s,))
        return self._job(rows[0]) if rows else None

    def finish_add(self, job_id: str, status: Literal["done", "failed"], result: str | None,
                   error: str | None) -> None:
        """Record the outcome and end the lease (unknown ids are ignored)."""
        self._run("UPDATE memray_add_jobs SET status = %s, result = %s, error = %s, "
                  "lease_until = NULL WHERE id = %s", (status, result, error, job_id))

    # -- JobState ----------------------------------------------------------------------
    def tombstones(self, user_id: str) -> list[Tombstone]:
        """The user's tombstones, ordered by (kind, key)."""
        rows = self._rows("SELECT kind, key, at_ms FROM memray_tombstones "
                          "WHERE user_key = memray_key(%s) ORDER BY kind, key", (user_id,))
        return [Tombstone(kind, key, int(at)) for kind, key, at in rows]

    def marks(self, job: str) -> set[str]:
        return {str(k) for (k,) in self._rows("SELECT key FROM memray_marks WHERE job = %s",
                                              (job,))}

    def get_meta(self, key: str) -> str | None:
        rows = self._rows("SELECT value FROM memray_meta WHERE key = %s", (key,))
        return None if not rows else str(rows[0][0])

    def set_meta(self, key: str, value: str) -> None:
        self._run("INSERT INTO memray_meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE "
                  "SET value = EXCLUDED.value", (key, value))

    def record_receipt(self, user_id: str, receipt_id: str, at_ms: int, body: str) -> None:
        self._run("INSERT INTO memray_receipts (id, user_id, at_ms, body) "
                  "VALUES (%s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                  (receipt_id, user_id, at_ms, body))

    def receipts(self, user_id: str) -> list[str]:
        rows = self._rows("SELECT body FROM memray_receipts WHERE user_key = memray_key(%s) "
                          "ORDER BY at_ms, id", (user_id,))
        return [str(b) for (b,) in rows]

    def data_key(self, user_id: str) -> DataKey | None:
        rows = self._rows("SELECT key_id, wrapped, master_id FROM memray_data_keys "
                          "WHERE user_key = memray_key(%s) AND user_id = %s",
                          (user_id, user_id))
        return None if not rows else DataKey(str(rows[0][0]), bytes(rows[0][1]),
                                             str(rows[0][2]))

    def add_data_key(self, user_id: str, key: DataKey) -> DataKey:
        self._run("INSERT INTO memray_data_keys (user_id, key_id, wrapped, master_id) "
                  "VALUES (%s, %s, %s, %s) ON CONFLICT (user_key) DO NOTHING",
                  (user_id, key.key_id, key.wrapped, key.master_id))
        kept = self.data_key(user_id)
        assert kept is not None
        return kept

    def drop_data_key(self, user_id: str) -> bool:
        with self._conn("write") as conn:
            gone = conn.execute("DELETE FROM memray_data_keys WHERE user_key = memray_key(%s) "
                                "AND user_id = %s", (user_id, user_id)).rowcount
        return bool(gone)

    def data_keys(self) -> list[tuple[str, DataKey]]:
        rows = self._rows("SELECT user_id, key_id, wrapped, master_id FROM memray_data_keys")
        return [(str(u), DataKey(str(k), bytes(w), str(m))) for u, k, w, m in rows]

    def rewrap_data_key(self, user_id: str, key: DataKey) -> None:
        self._run("UPDATE memray_data_keys SET wrapped = %s, master_id = %s "
                  "WHERE user_key = memray_key(%s) AND user_id = %s AND key_id = %s",
                  (key.wrapped, key.master_id, user_id, user_id, key.key_id))

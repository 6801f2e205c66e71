"""The event log's seams and the types that cross them.

`ChangeLog`: history of every change, the write-ahead outbox, per-user versions and the
per-user write lock. `TurnLog`: turns awaiting extraction and queued async adds.
`JobState`: tombstones, batch-job marks and metadata. Implementations: in memory
(`store.fake_log`, the fake), SQLite (`store.sqlite_log`, the embedded default) and
PostgreSQL (`store.postgres_log`, shared by every process of a cluster); one contract
suite runs all three.

A write is acknowledged only after its events and the store operations that apply it are
committed in one transaction. The store is then changed and the outbox entry cleared; if
the process dies in between, `pending()` hands the operations back and they are replayed
(they are idempotent), so an acknowledged write is never lost.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

import numpy as np

from memray.models import MemoryEvent, MemoryRecord
from memray.store.base import StoredMemory

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
class DataKey:
    """A user's data key as the log keeps it: wrapped (encrypted) by a master key, never
    in the clear (memray/crypto/)."""

    key_id: str
    wrapped: bytes
    master_id: str


@dataclass(frozen=True)
class Pending:
    seq: int
    op: StoreOp


def overlaid(records: Sequence[MemoryRecord], ops: Sequence[StoreOp]) -> list[MemoryRecord]:
    """The records as they will be once the queued ops are applied, in order."""
    return _replayed({r.id: r for r in records}, ops, lambda row: row.record)


def overlaid_rows(rows: Sequence[StoredMemory], ops: Sequence[StoreOp]) -> list[StoredMemory]:
    """The rows (records and vectors) as they will be once the queued ops are applied."""
    return _replayed({row.record.id: row for row in rows}, ops, lambda row: row)


_Held = TypeVar("_Held", MemoryRecord, StoredMemory)


def _replayed(held: dict[str, _Held], ops: Sequence[StoreOp],
              pick: Callable[[StoredMemory], _Held]) -> list[_Held]:
    for op in ops:
        if op.kind == "delete_user":
            held.clear()
        for mid in op.ids:
            held.pop(mid, None)
        held.update((row.record.id, pick(row)) for row in op.rows)
    return list(held.values())


# The event log's meta key of a user's stored profile (core/profile.py), which the
# cascade re-reads and the cipher seals.
PROFILE_META = "profile:"

# What an async add queued before its user's `delete_all` says instead of running: its
# request and result (what the user said) are scrubbed, the job itself stays answerable.
CANCELLED_BY_DELETE = "cancelled: the user's memories were deleted (delete_all) first"


@dataclass(frozen=True)
class AddJob:
    """An async add queued by the API: `request` and `result` are JSON text."""

    id: str
    user_id: str
    status: Literal["queued", "running", "done", "failed"]
    request: str
    result: str | None = None
    error: str | None = None


class ChangeLog(Protocol):
    """History, per-user versions and the write-ahead outbox: what every write commits.
    Every method is scoped to one user except the outbox scans. `shared`: other
    processes write to the same log (versions are global, user locks cross processes)."""

    shared: bool

    @property
    def lock_capacity(self) -> int:
        """How many users' locks one thread may hold at once (a bulk drain holds several);
        on PostgreSQL each is a pooled connection."""

    def open(self) -> None: ...
    def close(self) -> None: ...

    def commit(self, user_id: str, events: Sequence[MemoryEvent], ops: Sequence[StoreOp],
               *, purge_ids: Sequence[str] = (), purge_user: bool = False,
               clear_turns: Sequence[int] = (), tombstones: Sequence[Tombstone] = (),
               marks: Sequence[tuple[str, str]] = ()) -> list[int]:
        """Atomically: purge history content (and, with purge_user, logged turns), drop the
        processed turns, append events, record tombstones and job marks (job, key), queue
        ops, bump the version. Returns the outbox sequence numbers of `ops`."""

    def user_lock(self, user_id: str) -> AbstractContextManager[None]:
        """Held around one user's read-decide-commit-apply: two writes of one user never
        interleave, across threads and, for a shared log, across processes. Reentrant
        within a thread."""

    def try_user_lock(self, user_id: str) -> AbstractContextManager[bool]:
        """Like `user_lock` but never waits: yields False when another holder has it."""

    def write_barrier(self) -> AbstractContextManager[None]:
        """Held while a migration switches the live model: no user lock is held anywhere
        meanwhile, and none is granted until it is released (every user lock holds the
        barrier shared). For a log of one process, the process's own write gate does
        this and the barrier holds nothing."""

    def pending(self, user_id: str | None = None) -> list[Pending]:
        """Queued ops not yet marked done (of one user, or of all), oldest first."""

    def pending_users(self) -> list[str]:
        """Users with queued ops, the one with the oldest op first."""

    def done(self, seqs: Sequence[int]) -> None: ...
    def history(self, user_id: str, memory_id: str) -> list[MemoryEvent]: ...
    def user_events(self, user_id: str) -> Iterator[MemoryEvent]: ...
    def version(self, user_id: str) -> int: ...
    def has_pending(self, user_id: str) -> bool:
        """True while an op of this user waits in the outbox (the store is behind)."""

    def versions(self) -> dict[str, int]:
        """Every user's memory version (users this log has seen)."""

    def set_dim(self, dim: int) -> None:
        """Change the vector size of queued ops; only with an empty outbox (migration)."""


class TurnLog(Protocol):
    """Turns waiting for extraction, and async adds waiting for a worker."""

    def log_turns(self, user_id: str, session: str, turns: Sequence[tuple[str, str, str]]) -> None:
        """Durably append (turn_id, role, content) turns awaiting extraction."""

    def pending_turns(self, user_id: str, session: str) -> list[tuple[int, str, str, str]]:
        """(seq, turn_id, role, content) of the session's unprocessed turns, oldest first."""

    def user_turns(self, user_id: str) -> list[tuple[int, str, str]]:
        """(seq, turn_id, content) of the user's unprocessed turns in every session: what
        a deletion must reach so that no logged turn brings a deleted memory back."""

    def enqueue_add(self, job_id: str, user_id: str, idem: str | None, request: str) -> AddJob:
        """Durably queue an async add; with a known (user_id, idem), the first job instead."""

    def record_add(self, job_id: str, user_id: str, idem: str, result: str) -> None:
        """Remember a synchronous add's result under its idempotency key (first one wins)."""

    def find_add(self, user_id: str, idem: str) -> AddJob | None: ...
    def get_add(self, job_id: str) -> AddJob | None: ...
    def claim_add(self, lease_s: float) -> AddJob | None:
        """Hand one queued job (oldest first) to this caller alone, or one whose holder's
        lease ran out (its process died); None when there is none."""

    def finish_add(self, job_id: str, status: Literal["done", "failed"], result: str | None,
                   error: str | None) -> None: ...


class JobState(Protocol):
    """What deletions leave behind and what batch jobs record."""

    def tombstones(self, user_id: str) -> list[Tombstone]: ...
    def marks(self, job: str) -> set[str]:
        """Keys a batch job recorded as done (its checkpoint)."""

    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None:
        """Small durable settings of the jobs (e.g. the model a migration came from)."""

    def record_receipt(self, user_id: str, receipt_id: str, at_ms: int, body: str) -> None:
        """Keep a deletion receipt (ids and counts, never content) in the audit log; it
        outlives the user's deletion."""

    def receipts(self, user_id: str) -> list[str]:
        """The user's deletion receipts (JSON), oldest first."""

    def data_key(self, user_id: str) -> DataKey | None:
        """The user's wrapped data key, if one exists (encryption on, not shredded)."""

    def add_data_key(self, user_id: str, key: DataKey) -> DataKey:
        """Keep `key` as the user's data key unless one exists; the one kept (two
        processes creating a key at once agree on one)."""

    def drop_data_key(self, user_id: str) -> bool:
        """Destroy the user's data key (crypto-shredding); False if there was none."""

    def data_keys(self) -> list[tuple[str, DataKey]]:
        """Every (user_id, data key), for re-wrapping under a new master key."""

    def rewrap_data_key(self, user_id: str, key: DataKey) -> None:
        """Replace the wrapping of the user's key `key.key_id` (not its value)."""


class EventLog(ChangeLog, TurnLog, JobState, Protocol):
    """The shared log: one backend holds all three seams, so that a commit can change
    history, turns, tombstones and marks in one transaction. A commit that purges a user
    also drops the user's logged turns and scrubs the user's async add jobs (requests and
    results hold what the user said): a queued one is failed with CANCELLED_BY_DELETE, a
    finished one keeps its status without its result; neither keeps an idempotency key."""


class UserLocks:
    """In-process per-user locks: striped re-entrant locks, so writes of different users
    mostly run in parallel and a thread may re-enter its own user's lock."""

    def __init__(self, stripes: int = 64) -> None:
        self._locks = [threading.RLock() for _ in range(stripes)]

    def of(self, user_id: str) -> threading.RLock:
        return self._locks[zlib.crc32(user_id.encode("utf-8")) % len(self._locks)]

    @contextmanager
    def hold(self, user_id: str) -> Iterator[None]:
        with self.of(user_id):
            yield

    @contextmanager
    def try_hold(self, user_id: str) -> Iterator[bool]:
        lock = self.of(user_id)
        got = lock.acquire(blocking=False)
        try:
            yield got
        finally:
            if got:
                lock.release()


def encode_op(op: StoreOp) -> tuple[str, str, bytes]:
    """(ids, records, vectors) of an op as stored in an outbox row."""
    records = json.dumps([r.record.model_dump(mode="json") for r in op.rows])
    vectors = b"".join(np.asarray(r.vector, np.float32).tobytes() for r in op.rows)
    return json.dumps(list(op.ids)), records, vectors


def decode_op(user: str, kind: OpKind, ids: str, recs: str, vecs: bytes, dim: int) -> StoreOp:
    records = [MemoryRecord.model_validate(r) for r in json.loads(recs)]
    matrix = np.frombuffer(vecs or b"", dtype=np.float32).reshape(len(records), dim)
    rows = tuple(StoredMemory(r, matrix[i].copy()) for i, r in enumerate(records))
    return StoreOp(kind, user, rows, tuple(json.loads(ids)))

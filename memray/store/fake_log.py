"""`EventLog` in process memory: the fake for tests, with the semantics of the SQLite log
(the contract suite in tests/integration/test_event_log_contract.py runs both)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from typing import Literal

from memray.errors import StoreError
from memray.models import MemoryEvent
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

_TombKind = Literal["hash", "slot", "all"]


@dataclass(frozen=True)
class _Queued:
    """An outbox row, kept encoded as the durable logs keep it (so `dim` matters here too
    and the caller's vectors are copied)."""

    user_id: str
    kind: OpKind
    ids: str
    records: str
    vectors: bytes


@dataclass(frozen=True)
class _Event:
    """A history row: the event kept as JSON text, as the durable logs keep it."""

    user_id: str
    memory_id: str
    body: str


@dataclass(frozen=True)
class _Turn:
    seq: int
    user_id: str
    session: str
    turn_id: str
    role: str
    content: str


@dataclass(frozen=True)
class _Job:
    job: AddJob
    idem: str | None
    lease_until: float | None = None


def _scrubbed(job: _Job) -> _Job:
    done = job.job.status == "done"
    return _Job(AddJob(job.job.id, job.job.user_id, "done" if done else "failed", "{}",
                       None, None if done else CANCELLED_BY_DELETE), None)


class InMemoryEventLog:
    """`EventLog` in dicts and lists behind one lock; nothing survives the process.
    Thread-safe; `user_lock` serializes threads of this process only."""

    shared = False

    @property
    def lock_capacity(self) -> int:
        """In-process striped locks: a thread may hold any number."""
        return 1_000_000

    def __init__(self, dim: int) -> None:
        self._dim = dim
        self._lock = threading.Lock()
        self._users = UserLocks()
        self._seq = itertools.count(1)  # one counter for events, outbox and turns
        self._events: list[_Event] = []
        self._outbox: dict[int, _Queued] = {}
        self._versions: dict[str, int] = {}
        self._turns: list[_Turn] = []
        self._tombstones: dict[tuple[str, _TombKind, str], int] = {}
        self._marks: set[tuple[str, str]] = set()
        self._meta: dict[str, str] = {}
        self._jobs: dict[str, _Job] = {}
        self._receipts: list[tuple[str, str, int, str]] = []
        self._keys: dict[str, DataKey] = {}

    def open(self) -> None:
        """Nothing to open."""

    def close(self) -> None:
        """Nothing to close; the data stays until the object goes."""

    # -- ChangeLog -------------------------------------------------------------------
    def user_lock(self, user_id: str) -> AbstractContextManager[None]:
        """This process's per-user lock (reentrant within a thread)."""
        return self._users.hold(user_id)

    def try_user_lock(self, user_id: str) -> AbstractContextManager[bool]:
        """Yields False at once when another thread holds the user's lock stripe."""
        return self._users.try_hold(user_id)

    def write_barrier(self) -> AbstractContextManager[None]:
        """One process: Memory's write gate keeps its writers out."""
        return nullcontext()

    def commit(self, user_id: str, events: Sequence[MemoryEvent], ops: Sequence[StoreOp],
               *, purge_ids: Sequence[str] = (), purge_user: bool = False,
               clear_turns: Sequence[int] = (), tombstones: Sequence[Tombstone] = (),
               marks: Sequence[tuple[str, str]] = ()) -> list[int]:
        """All or nothing: everything that can fail (encoding) runs before the first
        change."""
        rows = [_Event(user_id, e.memory_id, e.model_dump_json()) for e in events]
        queued = [_Queued(op.user_id, op.kind, *encode_op(op)) for op in ops]
        with self._lock:
            self._purge(user_id, set(purge_ids), purge_user, set(clear_turns))
            self._events.extend(rows)
            for t in tombstones:
                at = self._tombstones.get((user_id, t.kind, t.key), t.at_ms)
                self._tombstones[(user_id, t.kind, t.key)] = max(at, t.at_ms)
            self._marks.update(marks)
            seqs = [next(self._seq) for _ in queued]
            self._outbox.update(zip(seqs, queued, strict=True))
            if events or ops or purge_ids or purge_user:  # a real change
                self._versions[user_id] = self._versions.get(user_id, 0) + 1
        return seqs

    def _purge(self, user_id: str, ids: set[str], user: bool, turns: set[int]) -> None:
        if user or ids:
            self._events = [e for e in self._events
                            if e.user_id != user_id or (not user and e.memory_id not in ids)]
        if user or turns:
            self._turns = [t for t in self._turns
                           if t.user_id != user_id or (not user and t.seq not in turns)]
        if user:
            self._jobs = {k: _scrubbed(j) if j.job.user_id == user_id else j
                          for k, j in self._jobs.items()}

    def pending(self, user_id: str | None = None) -> list[Pending]:
        """Queued ops (of one user or all), oldest first."""
        with self._lock:
            rows = [(s, q) for s, q in sorted(self._outbox.items())
                    if user_id is None or q.user_id == user_id]
            dim = self._dim
        return [Pending(s, decode_op(q.user_id, q.kind, q.ids, q.records, q.vectors, dim))
                for s, q in rows]

    def pending_users(self) -> list[str]:
        """Users with queued ops, ordered by their oldest op."""
        with self._lock:
            users = [q.user_id for _, q in sorted(self._outbox.items())]
        return list(dict.fromkeys(users))

    def done(self, seqs: Sequence[int]) -> None:
        """Drop these outbox entries (unknown ones are ignored)."""
        with self._lock:
            for s in seqs:
                self._outbox.pop(s, None)

    def history(self, user_id: str, memory_id: str) -> list[MemoryEvent]:
        """The memory's events, oldest first."""
        with self._lock:
            rows = [e.body for e in self._events
                    if e.user_id == user_id and e.memory_id == memory_id]
        return [MemoryEvent.model_validate_json(b) for b in rows]

    def user_events(self, user_id: str) -> Iterator[MemoryEvent]:
        """The user's events, oldest first (a snapshot taken at the call)."""
        with self._lock:
            rows = [e.body for e in self._events if e.user_id == user_id]
        return (MemoryEvent.model_validate_json(b) for b in rows)

    def has_pending(self, user_id: str) -> bool:
        with self._lock:
            return any(q.user_id == user_id for q in self._outbox.values())

    def versions(self) -> dict[str, int]:
        with self._lock:
            return dict(self._versions)

    def version(self, user_id: str) -> int:
        """The user's memory version: 0 before the first real change."""
        with self._lock:
            return self._versions.get(user_id, 0)

    def set_dim(self, dim: int) -> None:
        """Refused (StoreError) while any op is queued."""
        with self._lock:
            if self._outbox:
                raise StoreError("cannot change the vector size while ops are queued")
            self._dim = dim

    # -- TurnLog ---------------------------------------------------------------------
    def log_turns(self, user_id: str, session: str, turns: Sequence[tuple[str, str, str]]) -> None:
        with self._lock:
            self._turns.extend(_Turn(next(self._seq), user_id, session, tid, role, text)
                               for tid, role, text in turns)

    def pending_turns(self, user_id: str, session: str) -> list[tuple[int, str, str, str]]:
        with self._lock:
            return [(t.seq, t.turn_id, t.role, t.content) for t in self._turns
                    if t.user_id == user_id and t.session == session]

    def user_turns(self, user_id: str) -> list[tuple[int, str, str]]:
        with self._lock:
            return [(t.seq, t.turn_id, t.content) for t in self._turns if t.user_id == user_id]

    def enqueue_add(self, job_id: str, user_id: str, idem: str | None, request: str) -> AddJob:
        """Queue a job; a known (user_id, idem) returns the first job; a known job id with
        another key is refused (StoreError)."""
        with self._lock:
            first = self._by_idem(user_id, idem)
            if first is not None:
                return first.job
            if job_id in self._jobs:
                raise StoreError(f"add job {job_id} already exists")
            job = AddJob(job_id, user_id, "queued", request)
            self._jobs[job_id] = _Job(job, idem)
            return job

    def record_add(self, job_id: str, user_id: str, idem: str, result: str) -> None:
        """Keep a finished add under its key, unless the id or the key is already known."""
        with self._lock:
            if job_id in self._jobs or self._by_idem(user_id, idem) is not None:
                return
            self._jobs[job_id] = _Job(AddJob(job_id, user_id, "done", "{}", result), idem)

    def _by_idem(self, user_id: str, idem: str | None) -> _Job | None:
        if idem is None:
            return None
        return next((j for j in self._jobs.values()
                     if j.idem == idem and j.job.user_id == user_id), None)

    def find_add(self, user_id: str, idem: str) -> AddJob | None:
        with self._lock:
            found = self._by_idem(user_id, idem)
            return None if found is None else found.job

    def get_add(self, job_id: str) -> AddJob | None:
        with self._lock:
            found = self._jobs.get(job_id)
            return None if found is None else found.job

    def claim_add(self, lease_s: float) -> AddJob | None:
        """The queued (or lease-expired) job with the smallest id, now running for
        `lease_s` seconds under this caller alone."""
        now = time.time()
        with self._lock:
            for job_id in sorted(self._jobs):
                j = self._jobs[job_id]
                expired = j.lease_until is not None and j.lease_until < now
                if j.job.status == "queued" or (j.job.status == "running" and expired):
                    running = replace(j.job, status="running")
                    self._jobs[job_id] = _Job(running, j.idem, now + lease_s)
                    return running
        return None

    def finish_add(self, job_id: str, status: Literal["done", "failed"], result: str | None,
                   error: str | None) -> None:
        """Record the outcome and end the lease (unknown ids are ignored)."""
        with self._lock:
            j = self._jobs.get(job_id)
            if j is not None:
                done = replace(j.job, status=status, result=result, error=error)
                self._jobs[job_id] = _Job(done, j.idem)

    # -- JobState --------------------------------------------------------------------
    def tombstones(self, user_id: str) -> list[Tombstone]:
        """The user's tombstones, ordered by (kind, key)."""
        with self._lock:
            return [Tombstone(kind, key, at)
                    for (user, kind, key), at in sorted(self._tombstones.items())
                    if user == user_id]

    def marks(self, job: str) -> set[str]:
        with self._lock:
            return {key for j, key in self._marks if j == job}

    def get_meta(self, key: str) -> str | None:
        with self._lock:
            return self._meta.get(key)

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._meta[key] = value

    def record_receipt(self, user_id: str, receipt_id: str, at_ms: int, body: str) -> None:
        with self._lock:
            if all(r[0] != receipt_id for r in self._receipts):
                self._receipts.append((receipt_id, user_id, at_ms, body))

    def data_key(self, user_id: str) -> DataKey | None:
        with self._lock:
            return self._keys.get(user_id)

    def add_data_key(self, user_id: str, key: DataKey) -> DataKey:
        with self._lock:
            return self._keys.setdefault(user_id, key)

    def drop_data_key(self, user_id: str) -> bool:
        with self._lock:
            return self._keys.pop(user_id, None) is not None

    def data_keys(self) -> list[tuple[str, DataKey]]:
        with self._lock:
            return sorted(self._keys.items(), key=lambda kv: kv[0])

    def rewrap_data_key(self, user_id: str, key: DataKey) -> None:
        with self._lock:
            if user_id in self._keys and self._keys[user_id].key_id == key.key_id:
                self._keys[user_id] = key

    def receipts(self, user_id: str) -> list[str]:
        with self._lock:
            mine = sorted((at, rid, body) for rid, uid, at, body in self._receipts
                          if uid == user_id)
        return [body for _, _, body in mine]

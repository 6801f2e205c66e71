"""`ChangeSet`: everything one write changes for one user, as data.

Every writer (extraction, a verbatim add, update and delete, the backfill, the nightly
job, doctor repairs, the LangGraph store) describes its write as a change set and hands
it to the committer (core/committer.py), the only code that writes the event log or the
vector store. Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from memray.models import DeletionReceipt, DerivedChange, MemoryEvent, MemoryRecord
from memray.store.base import StoredMemory, Vector
from memray.store.events import StoreOp, Tombstone
from memray.store.rows import to_ms


@dataclass
class ChangeSet:
    """One user's write. `events` is what the caller reports (NOOPs and DELETEs
    included); the history keeps only the ADDs and UPDATEs of memories that survive
    the change set. Deleting a memory purges its history too.

    `clear_turns`: logged turns (outbox seqs of the turn log) this write processed;
    `marks`: (job, key) checkpoints of a batch job, committed with the write;
    `delete_user`: every row and every logged turn of the user goes.
    `kind`: what a deletion in this change set is called on its receipt; `derived`: the
    merge summaries the cascade deleted or rebuilt; `receipt`: set by the committer when
    the change set deleted something. `fresh`: ids minted for this write, which no stored
    row can have, so their first apply is a plain insert (a replay still replaces).
    """

    user_id: str
    events: list[MemoryEvent] = field(default_factory=list)
    upserts: dict[str, StoredMemory] = field(default_factory=dict)
    deletes: dict[str, MemoryRecord] = field(default_factory=dict)
    tombstones: list[Tombstone] = field(default_factory=list)
    clear_turns: list[int] = field(default_factory=list)
    marks: list[tuple[str, str]] = field(default_factory=list)
    delete_user: bool = False
    kind: Literal["delete", "forget"] = "delete"
    derived: list[DerivedChange] = field(default_factory=list)
    receipt: DeletionReceipt | None = None
    fresh: set[str] = field(default_factory=set)

    # -- building ----------------------------------------------------------------------
    def put(self, new: MemoryRecord, vector: Vector, previous: MemoryRecord | None,
            at: datetime, reason: str = "", *, fresh: bool = False) -> None:
        """Write `new` (an ADD, or an UPDATE of `previous`) with its vector. `fresh`: its id
        was minted for this write (`new_id`), never a stable id a job may write again."""
        self.upserts[new.id] = StoredMemory(new, vector)
        if fresh:
            self.fresh.add(new.id)
        self.events.append(MemoryEvent(op="ADD" if previous is None else "UPDATE",
                                       memory_id=new.id, user_id=self.user_id, memory=new,
                                       previous=previous, at=at, reason=reason))

    def restore(self, record: MemoryRecord, vector: Vector) -> None:
        """Write a row the history already holds as it is (a repair): no new event."""
        self.upserts[record.id] = StoredMemory(record, vector)

    def delete(self, record: MemoryRecord, at: datetime, reason: str = "", *,
               tombstone: bool = True) -> None:
        """Delete `record` (and any planned write of it); with `tombstone`, an older copy
        of its content (a backfill of old logs) never comes back."""
        self.deletes[record.id] = record
        self.upserts.pop(record.id, None)
        if tombstone:
            self.tombstones.append(Tombstone("hash", record.content_hash, to_ms(at)))
        self.events.append(MemoryEvent(op="DELETE", memory_id=record.id,
                                       user_id=self.user_id, previous=record, at=at,
                                       reason=reason))

    def noop(self, record: MemoryRecord, at: datetime, reason: str) -> None:
        self.events.append(MemoryEvent(op="NOOP", memory_id=record.id, user_id=self.user_id,
                                       memory=record, at=at, reason=reason))

    def forget_user(self, at: datetime) -> None:
        """Every memory, logged turn and history event of the user goes, and nothing
        older than `at` comes back."""
        self.delete_user = True
        self.tombstones.append(Tombstone("all", "*", to_ms(at)))

    # -- reading -----------------------------------------------------------------------
    @property
    def empty(self) -> bool:
        """True when committing would change nothing (NOOP events only)."""
        return not (self.upserts or self.deletes or self.delete_user or self.tombstones
                    or self.clear_turns or self.marks)

    def planned(self, memory_id: str) -> StoredMemory | None:
        """The row this change set writes for `memory_id`, if any."""
        return self.upserts.get(memory_id)

    def store_ops(self) -> list[StoreOp]:
        """The store changes, in the order they must be applied."""
        uid = self.user_id
        if self.delete_user:
            return [StoreOp("delete_user", uid)]
        ops = []
        if self.upserts:
            ops.append(StoreOp("replace", uid, rows=tuple(self.upserts.values())))
        if self.deletes:
            ops.append(StoreOp("delete", uid, ids=tuple(self.deletes)))
        return ops

    def logged_events(self) -> list[MemoryEvent]:
        """The events kept in the history (deleted memories keep none)."""
        if self.delete_user:
            return []
        return [e for e in self.events
                if e.op in ("ADD", "UPDATE") and e.memory_id not in self.deletes]

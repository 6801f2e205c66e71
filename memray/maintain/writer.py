"""Committing a user's maintenance plan: one event-log transaction per user (events,
store ops, version), then the outbox applies it. A crash before the commit changes
nothing (the next run plans the same); a crash after it is finished by the replay on the
next open: the merged memory is written before the originals are deleted, and both ops
are idempotent, so a merge is never half-done for good and never done twice."""

from __future__ import annotations

from collections import Counter

from memray.core.engine import Engine
from memray.core.resolve import LIVE_STATUSES
from memray.maintain.plan import UserPlan
from memray.models import MemoryEvent, utcnow
from memray.store.base import StoredMemory, Vector, Where
from memray.store.events import StoreOp


def commit(engine: Engine, plan: UserPlan, vectors: dict[str, Vector], version: int,
           counts: Counter[str]) -> bool:
    """False (nothing written) when the user changed since the plan was made."""
    if plan.empty:
        return True
    uid, now = plan.user_id, utcnow()
    merged_vectors = engine.embedder.embed([m.merged.index_text for m in plan.merges])
    with engine.user_lock(uid):
        if engine.events.version(uid) != version:
            counts["users_changed_meanwhile"] += 1
            return False
        rows = [StoredMemory(new, vectors[new.id]) for _, new, _ in plan.updates]
        rows += [StoredMemory(m.merged, v) for m, v in zip(plan.merges, merged_vectors,
                                                            strict=True)]
        gone = tuple(r.id for m in plan.merges for r in m.originals)
        # As for every delete (Memory.delete, a forget): a merged original keeps no
        # history (the log purges before it appends), so its content is not left there.
        events = [MemoryEvent(op="UPDATE", memory_id=new.id, user_id=uid, memory=new,
                              previous=old, at=now, reason=why)
                  for old, new, why in plan.updates if new.id not in gone]
        events += [MemoryEvent(op="ADD", memory_id=m.merged.id, user_id=uid, memory=m.merged,
                               at=now, reason=f"merged {len(m.originals)} memories")
                   for m in plan.merges]
        ops = [StoreOp("replace", uid, rows=tuple(rows))]
        if gone:
            ops.append(StoreOp("delete", uid, ids=gone))
        engine.applier.write(uid, events, ops, purge_ids=gone)
    counts.update(plan.counts)
    return True


def live_rows(engine: Engine, uid: str) -> list[StoredMemory]:
    return engine.store.rows(uid, Where(statuses=LIVE_STATUSES))

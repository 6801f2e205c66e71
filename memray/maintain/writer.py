"""Committing a user's maintenance plan: one change set per user, committed by the
committer (one event-log transaction: events, tombstones, store ops, version), then the
outbox applies it. A crash before the commit changes nothing (the next run plans the
same); a crash after it is finished by the replay on the next open: the merged memory and
its originals' new status are idempotent writes, so a merge is never half-done for good
and never done twice.

A merge keeps its originals (status `merged`, metadata `merged_into`: never recalled,
still reached by a delete or a forget, which rebuilds the summary without them; see
core/deletions.py) and writes a tombstone of each, so a later import of the same turns
does not bring them back beside the summary."""

from __future__ import annotations

from collections import Counter

from memray.core.changes import ChangeSet
from memray.core.engine import Engine
from memray.core.resolve import LIVE_STATUSES
from memray.core.summary import MERGED_INTO
from memray.embed.base import Matrix
from memray.maintain.plan import UserPlan
from memray.models import MemoryStatus, utcnow
from memray.store.base import StoredMemory, Vector, Where
from memray.store.events import Tombstone
from memray.store.rows import to_ms


def commit(engine: Engine, plan: UserPlan, vectors: dict[str, Vector], version: int,
           counts: Counter[str]) -> bool:
    """False (nothing written) when the user changed since the plan was made."""
    if plan.empty:
        return True
    merged_vectors = engine.embedder.embed([m.merged.index_text for m in plan.merges])
    with engine.committer.locked(plan.user_id):
        if engine.committer.version(plan.user_id) != version:
            counts["users_changed_meanwhile"] += 1
            return False
        engine.committer.commit(_changes(plan, vectors, merged_vectors))
    counts.update(plan.counts)
    return True


def _changes(plan: UserPlan, vectors: dict[str, Vector],
             merged_vectors: Matrix) -> ChangeSet:
    now, changes = utcnow(), ChangeSet(plan.user_id)
    kept = {r.id for m in plan.merges for r in m.originals}
    for old, new, why in plan.updates:
        if new.id not in kept:
            changes.put(new, vectors[new.id], old, now, why)
    for merge, vector in zip(plan.merges, merged_vectors, strict=True):
        changes.put(merge.merged, vector, None, now, f"merged {len(merge.originals)} memories")
        for record in merge.originals:
            member = record.model_copy(update={
                "status": MemoryStatus.MERGED, "updated_at": max(now, record.updated_at),
                "metadata": {**record.metadata, MERGED_INTO: merge.merged.id}})
            changes.put(member, vectors[record.id], record, now, "merged")
            changes.tombstones.append(Tombstone("hash", record.content_hash, to_ms(now)))
    return changes


def live_rows(engine: Engine, uid: str) -> list[StoredMemory]:
    return engine.store.rows(uid, Where(statuses=LIVE_STATUSES))

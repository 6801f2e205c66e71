"""What one night of maintenance does to one user's memories, as a plan (nothing is
written here). Every step is a pure function of the memories and `now`, so re-running a
night after a crash plans the same changes (the merged memory's id is fixed by what it
merges), and a plan is committed in one event-log transaction.

1. expire: a live memory whose `expires_at` has passed -> status expired;
2. retire: a candidate not confirmed within `candidate_days` -> expired;
3. decay: importance = base * 0.5 ** (days since last confirmed / tier half-life), with
   `base` kept in metadata["base_importance"] (so decaying twice in a night is a no-op);
4. merge: active memories under `merge_below` importance are clustered by cosine
   (agglomerative, average linkage); each cluster of two or more becomes one summary
   memory with metadata["merged_from"]; the originals are kept as `merged` (see
   maintain/writer.py). A summary is not merged again.

A memory whose metadata has `PINNED` true (an item an application keeps by key, such as
the LangGraph store's) is expired when its `expires_at` passes, never decayed or merged:
its application decides when it goes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from memray.core.ids import stable_id
from memray.core.summary import MERGED_FROM, SUMMARY_CHARS, rule_summary
from memray.models import MemoryRecord, MemorySource, MemoryStatus, MemoryType, content_hash
from memray.store.base import StoredMemory
from memray.store.rows import to_ms

# Days for importance to halve; None: never decays (who the user is, what they must avoid).
HALF_LIFE_DAYS: dict[MemoryType, float | None] = {
    MemoryType.IDENTITY: None, MemoryType.CONSTRAINT: None,
    MemoryType.PREFERENCE: 180.0, MemoryType.FACT: 90.0, MemoryType.BEHAVIOR: 90.0,
    MemoryType.SUMMARY: 90.0, MemoryType.TASK_STATE: 30.0, MemoryType.MESSAGE: 30.0,
}
_LIVE = (MemoryStatus.ACTIVE, MemoryStatus.CANDIDATE)
PINNED = "memray_pinned"

Summarizer = Callable[[Sequence[str], int], str]


@dataclass(frozen=True)
class MaintenanceSettings:
    candidate_days: int = 30
    merge_below: float = 0.3
    merge_similarity: float = 0.75
    merge_max_chars: int = SUMMARY_CHARS


@dataclass
class Merge:
    originals: list[MemoryRecord]
    merged: MemoryRecord  # its content still to be embedded by the writer


@dataclass
class UserPlan:
    user_id: str
    updates: list[tuple[MemoryRecord, MemoryRecord, str]] = field(default_factory=list)
    merges: list[Merge] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def empty(self) -> bool:
        return not (self.updates or self.merges)


def plan_user(user_id: str, rows: Sequence[StoredMemory], now: datetime,
              settings: MaintenanceSettings, summarize: Summarizer = rule_summary) -> UserPlan:
    plan = UserPlan(user_id)
    current: dict[str, StoredMemory] = {}
    for row in rows:
        rec = _lifecycle(row.record, now, settings, plan)
        current[rec.id] = StoredMemory(rec, row.vector)
    low = [r for r in current.values() if r.record.status == MemoryStatus.ACTIVE
           and r.record.importance < settings.merge_below
           and r.record.metadata.get(PINNED) is not True
           and MERGED_FROM not in r.record.metadata]  # a summary is never merged again
    for cluster in _clusters(low, settings.merge_similarity):
        originals = sorted((r.record for r in cluster), key=lambda r: r.id)
        merged = _merged(user_id, originals, now, settings, summarize)
        plan.merges.append(Merge(originals, merged))
        plan.counts["merged_clusters"] += 1
        plan.counts["merged_originals"] += len(originals)
    return plan


def _lifecycle(rec: MemoryRecord, now: datetime, s: MaintenanceSettings,
               plan: UserPlan) -> MemoryRecord:
    new, reason = rec, ""
    # `valid_to` keeps as_of reads right: an active fact held until it expired; a candidate
    # was never confirmed, so it never held (an empty interval).
    if rec.status in _LIVE and rec.expires_at is not None and rec.expires_at <= now:
        until = rec.expires_at if rec.status == MemoryStatus.ACTIVE else rec.valid_since
        new, reason = rec.model_copy(update={"status": MemoryStatus.EXPIRED,
                                             "valid_to": until}), "expired"
    elif (rec.status == MemoryStatus.CANDIDATE
          and rec.last_confirmed_at < now - timedelta(days=s.candidate_days)):
        new, reason = rec.model_copy(update={"status": MemoryStatus.EXPIRED,
                                             "valid_to": rec.valid_since}), "retired"
    elif rec.status == MemoryStatus.ACTIVE and rec.metadata.get(PINNED) is not True:
        new, reason = _decayed(rec, now), "decayed"
    if new is rec:
        return rec
    new = new.model_copy(update={"updated_at": max(now, rec.updated_at)})
    plan.updates.append((rec, new, reason))
    plan.counts[reason] += 1
    return new


def _decayed(rec: MemoryRecord, now: datetime) -> MemoryRecord:
    half_life = HALF_LIFE_DAYS.get(rec.type)
    if half_life is None:
        return rec
    base = float(rec.metadata.get("base_importance", rec.importance))
    days = max((now - rec.last_confirmed_at).total_seconds() / 86400, 0.0)
    value = round(base * 0.5 ** (days / half_life), 4)
    if abs(value - rec.importance) < 0.01:  # not worth a write
        return rec
    return rec.model_copy(update={"importance": value,
                                  "metadata": {**rec.metadata, "base_importance": base}})


def _clusters(rows: list[StoredMemory], similarity: float) -> list[list[StoredMemory]]:
    if len(rows) < 2:
        return []
    from sklearn.cluster import AgglomerativeClustering

    matrix = np.stack([r.vector for r in rows])
    labels = AgglomerativeClustering(n_clusters=None, metric="cosine", linkage="average",
                                     distance_threshold=1.0 - similarity).fit_predict(matrix)
    groups: dict[int, list[StoredMemory]] = {}
    for row, label in zip(rows, labels, strict=True):
        groups.setdefault(int(label), []).append(row)
    return [g for g in groups.values() if len(g) >= 2]


def _merged(user_id: str, originals: list[MemoryRecord], now: datetime, s: MaintenanceSettings,
            summarize: Summarizer) -> MemoryRecord:
    ordered = sorted(originals, key=lambda r: (r.created_at, r.id))
    content = summarize([r.content for r in ordered], s.merge_max_chars)
    kinds = Counter(r.type for r in ordered).most_common()
    first = ordered[0]
    return MemoryRecord(
        id=stable_id(to_ms(first.created_at), user_id, "merge", *sorted(r.id for r in ordered)),
        user_id=user_id, agent_id=first.agent_id, type=kinds[0][0],
        content=content, importance=max(r.importance for r in ordered),
        confidence=min(r.confidence for r in ordered), status=MemoryStatus.ACTIVE,
        source=MemorySource.INFERRED,
        source_turn_ids=tuple(dict.fromkeys(t for r in ordered for t in r.source_turn_ids)),
        source_excerpt=content[:200], created_at=first.created_at, updated_at=now,
        valid_from=min(r.valid_since for r in ordered),
        last_confirmed_at=max(r.last_confirmed_at for r in ordered), consent=2,
        embedding_model=first.embedding_model, content_hash=content_hash(content),
        # The base keeps decay continuous: the summary decays like its strongest original.
        metadata={MERGED_FROM: sorted(r.id for r in ordered),
                  "base_importance": max(float(r.metadata.get("base_importance",
                                                              r.importance))
                                         for r in ordered)})

"""Bringing a target collection (new model) in line with the source (the live one), one
user at a time, by difference: a record missing or different in the target is
re-embedded and written, a record the source no longer has is deleted from the target.
The same diff serves the first copy, the catch-up of writes made during it, a resumed
run after a crash, and a rollback (the kept old collection only needs the changes)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memray.embed.base import Embedder
from memray.models import MemoryRecord
from memray.store.base import StoredMemory, VectorStore, Where


def same(a: MemoryRecord, b: MemoryRecord) -> bool:
    """Equal but for the model that embedded them."""
    return a.model_copy(update={"embedding_model": b.embedding_model}) == b


def diff(source: Sequence[MemoryRecord],
         target: Sequence[MemoryRecord]) -> tuple[list[MemoryRecord], list[str]]:
    have = {r.id: r for r in target}
    want = {r.id for r in source}
    copy = [r for r in source if r.id not in have or not same(r, have[r.id])]
    return copy, sorted(i for i in have if i not in want)


@dataclass
class Syncer:
    source: VectorStore
    target: VectorStore
    embedder: Embedder  # the target's model

    def plan_user(self, uid: str) -> tuple[list[MemoryRecord], list[str]]:
        return diff(self.source.query(uid, Where()), self.target.query(uid, Where()))

    def write(self, records: Sequence[MemoryRecord], vectors: np.ndarray) -> None:
        model = self.target.model
        self.target.replace([StoredMemory(r.model_copy(update={"embedding_model": model}), v)
                             for r, v in zip(records, vectors, strict=True)])

    def delete_stale(self, uid: str, ids: Sequence[str]) -> int:
        """Delete the target's rows of `uid` that the source no longer has."""
        return self.target.delete(uid, ids) if ids else 0

    def sync_user(self, uid: str, counts: Counter[str]) -> None:
        """Re-embed here (the catch-up: few records)."""
        copy, gone = self.plan_user(uid)
        if copy:
            self.write(copy, self.embedder.embed([r.index_text for r in copy]))
        self.delete_stale(uid, gone)
        counts["caught_up_copied"] += len(copy)
        counts["caught_up_deleted"] += len(gone)

    def users(self) -> list[str]:
        return sorted(set(self.source.user_ids()) | set(self.target.user_ids()))

    def count_mismatches(self, users: list[str] | None = None) -> list[str]:
        return [u for u in (self.users() if users is None else users)
                if self.source.count(u) != self.target.count(u)]


def recall_agreement(source: VectorStore, source_embedder: Embedder, target: VectorStore,
                     target_embedder: Embedder, sample: Sequence[MemoryRecord],
                     k: int = 5) -> tuple[float, float]:
    """(self-recall, overlap@k) over the sample: the share of memories that the new
    collection recalls first when searched with their own content (a wrong vector or id
    fails this), and the mean overlap of old and new top-k (how much the neighbourhoods
    of the two models agree; information, not a gate)."""
    if not sample:
        return 1.0, 1.0
    texts = [r.index_text for r in sample]
    old_q, new_q = source_embedder.embed(texts), target_embedder.embed(texts)
    hits = overlap = 0.0
    for r, oq, nq in zip(sample, old_q, new_q, strict=True):
        new = target.search(r.user_id, nq, k, Where())
        old = source.search(r.user_id, oq, k, Where())
        if new and new[0][0].content_hash == r.content_hash:
            hits += 1
        old_ids, new_ids = {x.id for x, _ in old}, {x.id for x, _ in new}
        overlap += len(old_ids & new_ids) / max(len(old_ids | new_ids), 1)
    return hits / len(sample), overlap / len(sample)

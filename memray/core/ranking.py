"""Composite ranking of recalled memories: similarity, importance and recency by type."""

from __future__ import annotations

import math
from datetime import datetime

from memray.config import RecallConfig
from memray.models import MemoryRecord, SearchHit


def recency(record: MemoryRecord, now: datetime, half_lives: dict[str, float | None]) -> float:
    """1.0 for fresh (or never-decaying) memories, halving every half-life since last confirmed."""
    half_life = half_lives.get(record.type.value)
    if half_life is None or half_life <= 0:
        return 1.0
    age_days = max((now - record.last_confirmed_at).total_seconds(), 0.0) / 86_400
    return math.pow(0.5, age_days / half_life)


def rank(
    candidates: list[tuple[MemoryRecord, float]], cfg: RecallConfig, *, now: datetime,
    threshold: float, cap: int, intent_ids: frozenset[str] = frozenset(),
    keyword: dict[str, float] | None = None,
) -> list[SearchHit]:
    """Drop candidates below `threshold` similarity, score the rest, best `cap` first.

    score = (w_sim * similarity + w_imp * importance + w_rec * recency + w_intent * match)
    / (sum of weights), so it lies in -1..1 like the similarity. Memories in `intent_ids`
    (the kind of memory the query asks about) pass the threshold and have match = 1.
    `keyword`: BM25 scores (0..1) by memory id, weighted by w_lexical (the threshold still
    applies to the similarity). Ties keep the store's order.
    """
    keyword = keyword or {}
    w_lex = cfg.w_lexical if keyword else 0.0
    total = cfg.w_similarity + cfg.w_importance + cfg.w_recency + cfg.w_intent + w_lex
    hits = []
    for record, sim in candidates:
        match = record.id in intent_ids
        lex = keyword.get(record.id, 0.0)
        if sim < threshold and not match:
            continue
        rec = recency(record, now, cfg.half_life_days)
        score = (cfg.w_similarity * sim + cfg.w_importance * record.importance
                 + cfg.w_recency * rec + cfg.w_intent * match + w_lex * lex) / total
        hits.append(SearchHit(memory=record, score=round(score, 6), similarity=round(sim, 6)))
    hits.sort(key=lambda h: h.score, reverse=True)
    return hits[:cap]

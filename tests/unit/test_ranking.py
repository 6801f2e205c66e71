from __future__ import annotations

from datetime import timedelta

import pytest

from memray.config import RecallConfig
from memray.core.prompt import prompt_section
from memray.core.ranking import rank, recency
from memray.models import MemoryRecord, MemoryType, utcnow


def rec(content: str, *, type: MemoryType = MemoryType.FACT, importance: float = 0.5,
        age_days: float = 0) -> MemoryRecord:
    when = utcnow() - timedelta(days=age_days)
    return MemoryRecord(id=content, user_id="u", content=content, type=type,
                        importance=importance, created_at=when, updated_at=when,
                        last_confirmed_at=when, embedding_model="m", content_hash="h")


def test_recency_halves_each_half_life_and_identity_never_decays() -> None:
    cfg = RecallConfig()
    now = utcnow()
    assert recency(rec("p", type=MemoryType.PREFERENCE, age_days=90), now,
                   cfg.half_life_days) == pytest.approx(0.5, abs=1e-3)
    assert recency(rec("t", type=MemoryType.TASK_STATE, age_days=14), now,
                   cfg.half_life_days) == pytest.approx(0.25, abs=1e-3)
    assert recency(rec("i", type=MemoryType.IDENTITY, age_days=3000), now,
                   cfg.half_life_days) == 1.0


def test_rank_drops_below_threshold_orders_by_score_and_caps() -> None:
    cfg = RecallConfig(w_similarity=0.5, w_importance=0.5, w_recency=0.0, w_intent=0.0)
    cands = [(rec("a", importance=0.0), 0.9), (rec("b", importance=1.0), 0.6),
             (rec("c"), 0.2), (rec("d", importance=0.5), 0.7)]
    hits = rank(cands, cfg, now=utcnow(), threshold=0.35, cap=2)
    assert [h.memory.content for h in hits] == ["b", "d"]
    assert hits[0].score == pytest.approx(0.8)
    assert hits[0].similarity == pytest.approx(0.6)


def test_old_preferences_lose_to_fresh_ones_at_equal_similarity() -> None:
    cfg = RecallConfig()
    cands = [(rec("old", type=MemoryType.PREFERENCE, age_days=365), 0.6),
             (rec("new", type=MemoryType.PREFERENCE), 0.6)]
    assert [h.memory.content for h in rank(cands, cfg, now=utcnow(), threshold=0, cap=5)] == [
        "new", "old"]


def test_prompt_section_marks_memories_as_possibly_stale_with_dates() -> None:
    assert prompt_section([]) == ""
    cfg = RecallConfig()
    hits = rank([(rec("likes\n tea"), 0.9)], cfg, now=utcnow(), threshold=0, cap=5)
    text = prompt_section(hits)
    assert "may be out of date" in text
    assert text.splitlines()[-1] == f"- ({utcnow().date().isoformat()}) likes tea"

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from memray.config import RecallConfig
from memray.core import ranking
from memray.core.intent import memory_topics, query_topics, slot_of
from memray.core.prompt import prompt_section
from memray.core.ranking import (
    Evidence,
    background,
    content_terms,
    decide,
    rank,
    recency,
    unreadable,
)
from memray.embed.cache import CachedEmbedder
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
    cfg = RecallConfig(w_similarity=0.5, w_importance=0.5, w_recency=0.0, w_intent=0.0,
                       w_episode=0.0)
    cands = [(rec("a", importance=0.0), 0.9), (rec("b", importance=1.0), 0.6),
             (rec("c"), 0.2), (rec("d", importance=0.5), 0.7)]
    hits = rank(cands, cfg, now=utcnow(), threshold=0.35, cap=2)
    assert [h.memory.content for h in hits] == ["b", "d"]
    assert hits[0].score == pytest.approx(0.8)
    assert hits[0].similarity == pytest.approx(0.6)


def test_episode_weight_lifts_the_turns_of_the_best_matching_session() -> None:
    def turn(content: str, session: str | None) -> MemoryRecord:
        return rec(content).model_copy(update={"session_id": session})

    cands = [(turn("hit", "s1"), 0.8), (turn("other", "s2"), 0.55),
             (turn("sibling", "s1"), 0.5), (turn("fact", None), 0.52)]
    flat = RecallConfig(w_importance=0, w_recency=0, w_intent=0, w_episode=0)
    assert [h.memory.content for h in rank(cands, flat, now=utcnow(), threshold=-1, cap=4)] \
        == ["hit", "other", "fact", "sibling"]
    two_stage = flat.model_copy(update={"w_episode": 0.5})
    hits = rank(cands, two_stage, now=utcnow(), threshold=-1, cap=4)
    assert [h.memory.content for h in hits] == ["hit", "sibling", "other", "fact"]
    sibling = next(h for h in hits if h.memory.content == "sibling")
    assert sibling.score == pytest.approx((0.7 * 0.5 + 0.5 * 0.8) / 1.2)
    assert sibling.similarity == pytest.approx(0.5)  # the score moves, the similarity not


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


# -- the relevance decision -------------------------------------------------------------
def _decide(cands: list[tuple[MemoryRecord, float]], evidence: Evidence,
            **knobs: float) -> list[str]:
    cfg = RecallConfig(**{"threshold": 0.35, "intent_min_similarity": 0.0,
                          "keyword_min": 0.5, "relative_margin": 0.2, **knobs})
    return [r.content for r, _ in decide(cands, cfg, evidence)]


def test_similarity_topic_or_keywords_make_a_memory_relevant() -> None:
    cands = [(rec("close"), 0.6), (rec("topical"), 0.45), (rec("unrelated"), 0.2),
             (rec("my dentist is Dr Lee"), 0.0), (rec("I like jazz"), 0.3)]
    evidence = Evidence(topic_ids=frozenset({"topical"}),
                        keyword={"my dentist is Dr Lee": 0.9, "I like jazz": 1.0},
                        query_terms=content_terms("Is my dentist open on Friday? I'd like to go"))
    # A keyword match stands even far below the best; "like" names no subject.
    assert _decide(cands, evidence) == ["close", "topical", "my dentist is Dr Lee"]


def test_the_floor_relative_to_the_best_drops_weak_topic_matches_but_never_the_best() -> None:
    cands = [(rec("best"), 0.3), (rec("weak"), 0.05), (rec("none"), 0.2)]
    evidence = Evidence(topic_ids=frozenset({"best", "weak"}))
    assert _decide(cands, evidence) == ["best"]  # below the threshold, yet the best match
    assert _decide(cands, evidence, relative_margin=0.3) == ["best", "weak"]
    assert _decide(cands, evidence, intent_min_similarity=0.1, relative_margin=0.3) == ["best"]
    assert _decide(cands, Evidence()) == []  # no evidence at all: nothing, not the best


def test_similarity_is_no_evidence_for_a_query_the_model_cannot_read() -> None:
    cands = [(rec("我老婆怀孕了"), 0.98), (rec("我不吃猪肉"), -0.2)]
    unread = Evidence(readable=False, topic_ids=frozenset({"我不吃猪肉"}))
    assert _decide(cands, unread) == ["我不吃猪肉"]  # and no floor on its similarity
    assert _decide(cands, Evidence(topic_ids=frozenset({"我不吃猪肉"}))) == ["我老婆怀孕了"]


def test_background_tells_the_queries_minilm_reads_from_those_it_does_not(
        embedder: CachedEmbedder) -> None:
    cfg = RecallConfig()
    for query in ("what should I cook tonight?", "When am I free this week?"):
        assert background(embedder, embedder.embed([query])[0]) < cfg.background_max
    for query in ("晚饭做什么菜？", "给我讲个笑话", "我叫什么名字？"):
        assert background(embedder, embedder.embed([query])[0]) >= cfg.background_max


def test_similarity_is_no_evidence_for_a_memory_the_model_cannot_read() -> None:
    # an English question, a Chinese memory of its topic the model read as noise
    cands = [(rec("I drive an old Toyota"), 0.45), (rec("我对花生过敏"), -0.05)]
    topic = frozenset({"我对花生过敏"})
    assert _decide(cands, Evidence(topic_ids=topic)) == ["I drive an old Toyota"]
    judged = Evidence(topic_ids=topic, unread=frozenset({"我对花生过敏"}))
    # kept on its topic without the similarity floor, and the floor below the best read
    # one does not drop it; its similarity alone is no evidence either way
    assert _decide(cands, judged) == ["I drive an old Toyota", "我对花生过敏"]
    assert _decide([(rec("我对花生过敏"), 0.9)], Evidence(unread=frozenset({"我对花生过敏"}))) == []


def test_unreadable_tells_the_memories_minilm_reads_from_those_it_does_not(
        embedder: CachedEmbedder) -> None:
    texts = ["I'm allergic to peanuts", "My daughter plays the violin", "我对花生过敏",
             "我在腾讯做产品经理"]
    rows = np.asarray(embedder.embed(texts), dtype=np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    assert unreadable(embedder, rows, RecallConfig().background_max).tolist() == [
        False, False, True, True]
    assert unreadable(embedder, rows[:0], 0.4).tolist() == []
    # the same measure as a query's background
    assert background(embedder, rows[2]) == pytest.approx(
        float(ranking._backgrounds(embedder, rows[2:3])[0]), abs=1e-6)


def test_topics_need_the_subject_not_just_the_slot_family() -> None:
    def topics(text: str) -> frozenset[str]:
        return memory_topics(slot_of(text), text)

    assert "eat" in query_topics("晚饭做什么菜？") and "diet" in query_topics("晚饭做什么菜？")
    assert "eat" in query_topics("What should I cook tonight?")
    assert not topics("I like writing scripts in Python") & query_topics("晚饭做什么菜？")
    assert {"eat", "diet"} <= topics("I am vegetarian and never eat pork")
    assert "eat" in memory_topics("dislike:猪肉", "我不吃猪肉")
    assert "sport" in topics("我喜欢钓鱼") and "eat" not in topics("我喜欢钓鱼")
    assert not {"eat", "diet"} & topics("I'm allergic to penicillin")
    assert "pets" in topics("I'm allergic to cats")
    assert "schedule" in topics("I'm only free after 9 pm")
    assert "schedule" in query_topics("When would suit a deep-work discussion?")
    assert "place" in query_topics("Is it going to rain tomorrow?")
    assert not query_topics("What's the capital of Canada?")

"""The labelled relevance set (tests/data/relevance/): its shape, a regression gate on the
figures `search` reaches on it, and the two failures that motivated the relevance
decision, in English and Chinese."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from memray import Memory, MemoryConfig
from memray.bench import relevance
from memray.embed.cache import CachedEmbedder

DATA = Path(__file__).parents[1] / "data" / "relevance"
# The final defaults measure precision 0.81, recall 0.91, empty_ok 0.98 and a per-case F1
# of 0.92 (en) and 0.89 (zh) on cases.jsonl; the gate sits about 0.05 below.
PRECISION_FLOOR = 0.76
RECALL_FLOOR = 0.86
EMPTY_OK_FLOOR = 0.93
CASE_F1_FLOOR = 0.83


@pytest.mark.parametrize(("name", "size"), [("cases.jsonl", 150), ("holdout.jsonl", 40)])
def test_the_set_has_the_documented_shape(name: str, size: int) -> None:
    cases = relevance.load(DATA / name)
    assert "synthetic" in (DATA / "README.md").read_text(encoding="utf-8").lower()
    assert len(cases) >= size
    langs = Counter(c.lang for c in cases)
    assert langs["en"] >= size * 0.4 and langs["zh"] >= size * 0.4
    empty = sum(not c.relevant for c in cases)
    assert 0.15 <= empty / len(cases) <= 0.3
    assert {"task", "none"} <= {c.kind for c in cases} <= {"direct", "keyword", "task", "none"}
    assert all((c.kind == "none") == (not c.relevant) for c in cases)
    for c in cases:
        assert 3 <= len(c.memories) <= 12, c.id
        assert c.relevant <= {m.id for m in c.memories}, c.id
        assert {m.mode for m in c.memories} <= set(relevance.MODES), c.id
        assert c.query.strip() and all(m.text.strip() for m in c.memories), c.id
    modes = Counter(m.mode for c in cases for m in c.memories)
    assert modes["verbatim"] and modes["extracted"]
    groups = {c.group for c in cases}
    assert all(len([g for g in groups if g.startswith(lang)]) >= 4 for lang in ("en", "zh"))


def test_folds_hold_whole_users_and_both_languages() -> None:
    cases = relevance.load(DATA / "cases.jsonl")
    folds = relevance.folds(cases, 4)
    for group in {c.group for c in cases}:
        assert len({f for c, f in zip(cases, folds, strict=True) if c.group == group}) == 1
    for f in range(4):
        assert {c.lang for c, g in zip(cases, folds, strict=True) if g == f} == {"en", "zh"}


def test_search_on_the_set_stays_above_the_floors(embedder: CachedEmbedder) -> None:
    out = relevance.run(DATA / "cases.jsonl", embedder=embedder)
    assert out["problems"] == []  # every memory was stored as written
    overall = out["overall"]
    assert overall["precision"] >= PRECISION_FLOOR, overall
    assert overall["recall"] >= RECALL_FLOOR, overall
    assert overall["empty_ok"] >= EMPTY_OK_FLOOR, overall
    for lang in ("en", "zh"):
        assert out["by_lang"][lang]["case_f1"] >= CASE_F1_FLOOR, out["by_lang"][lang]


def test_an_english_question_reaches_chinese_memories_by_what_the_model_read(
        embedder: CachedEmbedder) -> None:
    """crosslang.jsonl: each question in the other language from the memories that answer
    it. MiniLM reads the English question, not the Chinese memory, so their similarity is
    noise; `judge_memories` stops it counting for or against them (measured at 0.65
    recall and 0.71 precision for English questions, 0.26 / 0.55 without)."""
    cases = relevance.load(DATA / "crosslang.jsonl")
    judged, plain = relevance.recall_config(None), relevance.recall_config(
        {"judge_memories": False})
    answers, problems = relevance.replay(cases, [judged, plain], embedder=embedder,
                                         context=False)
    assert problems == []
    on, off = (relevance.report(a)["by_lang"]["en"] for a in answers)
    assert on["recall"] >= 0.55 and on["precision"] >= 0.6, on
    assert on["recall"] >= off["recall"] + 0.2, (on, off)
    assert relevance.report(answers[0])["overall"]["empty_ok"] == 1.0


# -- the two observed failures ---------------------------------------------------------
VERBATIM = {
    "en": ("I am vegetarian and never eat pork", "what should I cook tonight?",
           ["Any ideas for this weekend's meal plan?", "Which restaurant should we book "
            "for Friday dinner?"]),
    "zh": ("我是素食者，从来不吃猪肉", "今晚做什么菜好？",
           ["帮我安排一下这周的晚餐", "周五晚上去哪家餐厅吃饭？"]),
}
LIKES = {
    "en": ("I like writing scripts in Python", "I don't eat pork", "晚饭做什么菜？",
           "What should I cook for dinner?"),
    "zh": ("我喜欢用 Python 写脚本", "我不吃猪肉", "晚饭做什么菜？", "今天午饭吃点什么？"),
}


@pytest.fixture
def mem(tmp_path: Path, embedder: CachedEmbedder) -> Iterator[Memory]:
    with Memory(MemoryConfig(data_dir=str(tmp_path / "d")), embedder=embedder) as m:
        yield m


def _round(m: Memory, text: str, session: str) -> None:
    m.add([{"role": "user", "content": text}, {"role": "assistant", "content": "OK."}],
          user_id="u", session_id=session)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_verbatim_diet_reaches_meal_questions_under_the_default_threshold(
        lang: str, mem: Memory) -> None:
    diet, ask, others = VERBATIM[lang]
    mem.add(diet, user_id="u", infer=False)
    mem.add("My laptop is a five-year-old ThinkPad" if lang == "en" else "我的电脑用了五年了",
            user_id="u", infer=False)
    hits = mem.search(ask, user_id="u")
    assert [h.memory.content for h in hits] == [diet]
    assert hits[0].similarity < 0.35 or lang == "zh"  # below the cosine floor it had to pass
    for question in others:
        assert diet in mem.context(question, user_id="u"), question


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_liking_that_is_not_food_stays_out_of_meal_answers(lang: str, mem: Memory) -> None:
    likes, food, ask_zh, ask_own = LIKES[lang]
    _round(mem, likes, "s1")
    _round(mem, food, "s2")
    slots = {r.content: r.slot for r in mem.get_all(user_id="u").items}
    assert (slots[likes] or "").startswith("like:")  # the slot the old intent took as food
    for ask in (ask_zh, ask_own):
        contents = [h.memory.content for h in mem.search(ask, user_id="u")]
        assert likes not in contents, ask
        assert food in contents, ask
    assert likes not in mem.context(ask_zh, user_id="u")
    # Asked about what it is about, it is still found.
    about = "Which programming language do I like?" if lang == "en" else "我喜欢用什么写脚本？"
    assert likes in [h.memory.content for h in mem.search(about, user_id="u")]


@pytest.mark.parametrize("hot_set", ["on", "off"])
def test_memories_of_the_topic_are_found_beyond_the_nearest_ones(
        hot_set: str, tmp_path: Path, embedder: CachedEmbedder) -> None:
    cfg = MemoryConfig.model_validate({"data_dir": str(tmp_path / "d"),
                                       "recall": {"candidate_k": 3, "hot_set": hot_set}})
    with Memory(cfg, embedder=embedder) as m:
        m.add([{"role": "user", "content": f"Tonight I should finish chapter {i} of the "
                "report I am writing"} for i in range(12)], user_id="u", infer=False)
        m.add("I am vegetarian and never eat pork", user_id="u", infer=False)
        _round(m, "I don't eat mushrooms", "s1")
        _round(m, "I like writing scripts in Python", "s2")
        contents = [h.memory.content for h in m.search("what should I cook tonight?",
                                                       user_id="u")]
        assert "I am vegetarian and never eat pork" in contents
        assert "I don't eat mushrooms" in contents
        assert "I like writing scripts in Python" not in contents

"""Questions that ask when, memories that say when (core/when.py), and the w_when bonus."""

from __future__ import annotations

import pytest

from memray.config import RecallConfig
from memray.core.ranking import rank
from memray.core.when import anchored, asks_when
from memray.models import MemoryType, utcnow
from tests.unit.test_ranking import rec


@pytest.mark.parametrize("query", [
    "When did Caroline go to the support group?", "what year did they meet?",
    "Which weekend was the hike?", "How long ago did you move?", "她什么时候搬到杭州的？",
    "你哪天去的医院", "我们是哪一年认识的"])
def test_questions_that_ask_for_a_time(query: str) -> None:
    assert asks_when(query)


@pytest.mark.parametrize("query", [
    "What did Caroline buy?", "Where does she live?", "Whenever you like, pick a film",
    "她住在哪里？", "推荐一本书"])
def test_questions_that_do_not(query: str) -> None:
    assert not asks_when(query)


@pytest.mark.parametrize("text", [
    "I went to a support group yesterday", "Last Fri I took my kids to a pottery class",
    "the roadtrip this past weekend was wild", "We met three years ago",
    "I moved here in 2019", "my exam is on June 12", "I start next month",
    "我上周搬到了杭州", "三天前我去了医院", "去年我们去了日本", "周末我去爬山了", "我5月3号生日"])
def test_memories_that_place_something_in_time(text: str) -> None:
    assert anchored(text)


@pytest.mark.parametrize("text", [
    "I love pottery", "I may go to the gym", "Sunday roast is my favourite",
    "我喜欢猫", "我住在杭州"])
def test_memories_that_do_not(text: str) -> None:
    assert not anchored(text)


def test_w_when_lifts_time_anchored_memories_only_for_when_questions() -> None:
    cfg = RecallConfig(w_when=0.3)
    cands = [(rec("talked about the trip", type=MemoryType.MESSAGE), 0.62),
             (rec("went on the trip last week", type=MemoryType.MESSAGE), 0.55)]
    asked = rank(cands, cfg, now=utcnow(), threshold=-1, cap=2,
                 when_ids=frozenset({"went on the trip last week"}))
    assert asked[0].memory.content == "went on the trip last week"
    plain = rank(cands, cfg, now=utcnow(), threshold=-1, cap=2, when_ids=None)
    assert plain[0].memory.content == "talked about the trip"
    assert all(-1 <= h.score <= 1 for h in asked)

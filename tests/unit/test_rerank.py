"""The LLM reranker's prompt and how it reads an answer (memray/bench/rerank.py)."""

from __future__ import annotations

import pytest

from memray.bench.rerank import TURN_CHARS, prompt, reorder, schema
from memray.models import MemoryType, SearchHit
from tests.unit.test_ranking import rec

HITS = [SearchHit(memory=rec(f"turn {i} " + "x" * 300, type=MemoryType.MESSAGE), score=1 - i / 10,
                  similarity=0.5) for i in range(1, 5)]


def _order(hits: list[SearchHit]) -> list[int]:
    return [HITS.index(h) + 1 for h in hits]


@pytest.mark.parametrize(("answer", "order"), [
    ('{"order": [3, 1]}', [3, 1, 2, 4]),  # named first, in its order; the rest keep recall's
    ('{"order": [2, 2, 9, 0, "1"]}', [2, 1, 3, 4]),  # repeats, out of range, not ints dropped
    ('{"order": []}', [1, 2, 3, 4]),
    ("not json", [1, 2, 3, 4]),
    ("[4, 3]", [1, 2, 3, 4]),  # a list, not the object asked for
])
def test_an_answer_reorders_the_hits_it_names(answer: str, order: list[int]) -> None:
    assert _order(reorder(answer, HITS)) == order


def test_the_prompt_numbers_the_turns_and_cuts_long_ones() -> None:
    user = prompt("What does Melanie paint?", HITS)[1]["content"]
    assert user.startswith("Question: What does Melanie paint?")
    assert "[1] turn 1 " in user and "[4] turn 4 " in user
    assert max(len(line) for line in user.splitlines()) <= TURN_CHARS + 4
    assert schema(4)["properties"]["order"]["items"]["maximum"] == 4

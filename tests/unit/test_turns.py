"""Neighbouring turns: which stored turns are next to which (core/turns.py), how the hot
set brings them in as candidates, and how ranking lets a turn share its neighbour's
similarity (recall.w_neighbour)."""

from __future__ import annotations

import numpy as np
import pytest

from memray.config import RecallConfig
from memray.core.hotset import HotSet
from memray.core.ranking import rank
from memray.core.records import new_record
from memray.core.turns import adjacency
from memray.models import MemoryRecord, MemoryType, utcnow
from memray.store.base import StoredMemory, Where


def turn(content: str, session: str | None = "s1", reply_to: str = "",
         type: MemoryType = MemoryType.MESSAGE, user: str = "u") -> MemoryRecord:
    return new_record(user_id=user, content=content, embedding_model="m", at=utcnow(),
                      type=type, session_id=session, reply_to=reply_to)


def names(records: list[MemoryRecord], links: list[tuple[int, ...]]) -> dict[str, set[str]]:
    return {records[i].content: {records[j].content for j in linked}
            for i, linked in enumerate(links)}


def test_consecutive_turns_of_a_session_are_neighbours_in_stored_order() -> None:
    a, b, other, c = turn("a"), turn("b"), turn("x", session="s2"), turn("c")
    fact = turn("a fact", type=MemoryType.FACT)
    loose = turn("no session", session=None)
    records = [c, fact, other, a, loose, b]  # any row order: ids give the stored order
    assert names(records, adjacency(records)) == {
        "a": {"b"}, "b": {"a", "c"}, "c": {"b"}, "x": set(), "a fact": set(),
        "no session": set()}


def test_a_turn_and_the_turn_it_answers_are_neighbours() -> None:
    # Two passes, as a conversation of two speakers is stored: each speaker's turns in
    # one add, answering the other's; only reply_to tells which answers which.
    long = "Mel: I adopted a dog last   week, " + "a very good boy " * 30
    cut = " ".join(long.split())[:300]
    mel = [turn(long), turn("Mel: His name is Bolt.", reply_to="Caro: What's his name?")]
    caro = [turn("Caro: Oh nice, what breed?", reply_to=cut),
            turn("Caro: What's his name?", reply_to="Mel: A corgi."),
            turn("Caro: Bye!", reply_to="never said")]
    records = [*mel, *caro]
    got = names(records, adjacency(records))
    assert "Caro: Oh nice, what breed?" in got[long]
    assert "Mel: His name is Bolt." in got["Caro: What's his name?"]
    assert got["Caro: Bye!"] == {"Caro: What's his name?"}  # only its stored-order one


def test_a_turn_shares_its_best_neighbours_similarity() -> None:
    hit, beside, far = turn("hit"), turn("beside"), turn("far", session="s2")
    cands = [(hit, 0.8), (far, 0.45), (beside, 0.4)]
    links = {hit.id: (beside.id,), beside.id: (hit.id,)}
    flat = RecallConfig(w_importance=0, w_recency=0, w_intent=0, w_episode=0)
    order = [h.memory.content for h in rank(cands, flat, now=utcnow(), threshold=-1, cap=3,
                                             links=links)]
    assert order == ["hit", "far", "beside"]  # w_neighbour 0: links change nothing
    near = flat.model_copy(update={"w_neighbour": 0.5})
    hits = rank(cands, near, now=utcnow(), threshold=-1, cap=3, links=links)
    assert [h.memory.content for h in hits] == ["hit", "beside", "far"]
    by = {h.memory.content: h for h in hits}
    assert by["beside"].score == pytest.approx((0.7 * 0.4 + 0.5 * 0.8) / 1.2)
    assert by["hit"].score == pytest.approx(0.8)  # a weaker neighbour never lowers it
    assert by["far"].score == pytest.approx(0.45)


def test_the_hot_set_brings_in_the_neighbours_of_the_best_candidates() -> None:
    # Five turns of one session on axis 0..4; the query points at turn 2 only.
    rows = [turn(f"t{i}") for i in range(5)] + [turn("t9", user="u", session="s9")]
    vectors = np.eye(6, dtype=np.float32)
    stored = [StoredMemory(r, vectors[i]) for i, r in enumerate(rows)]
    hot = HotSet(dim=6)
    query = np.eye(6, dtype=np.float32)[2] + 0.1 * np.eye(6, dtype=np.float32)[5]
    where = Where()

    def got(around: int, limit: int = 2) -> dict[str, tuple[str, ...]]:
        found = hot.hybrid("u", 1, query, "zzz", limit, where, lambda: stored, around=around)
        assert found is not None
        ids = {r.id: r.content for r in rows}
        return {r.content: tuple(ids[j] for j in linked) for r, _, _, linked, _ in found}

    assert got(0) == {"t2": (), "t9": ()}
    assert got(1) == {"t2": ("t1", "t3"), "t9": (), "t1": ("t2",), "t3": ("t2",)}
    # Neighbours that the filter rejects stay out.
    where = Where(ids=tuple(r.id for r in rows if r.content != "t1"))
    assert got(1) == {"t2": ("t3",), "t9": (), "t3": ("t2",)}

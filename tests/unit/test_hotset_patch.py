"""A write to a held user patches its keyword and name indexes: the same scores as indexes
built afresh from the rows after the write, and only the new rows are read."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from memray.core import entities, hotset, lexical
from memray.core.hotset import HotSet
from memray.core.records import new_record
from memray.core.when import Span
from memray.models import MemoryType, utcnow
from memray.store.base import StoredMemory, Where
from memray.store.events import StoreOp

QUERY = "Did Melanie go camping with Pride friends near Lisbon?"


def row(text: str, i: int, turn: bool = True) -> StoredMemory:
    record = new_record(user_id="u", content=text, embedding_model="m", at=utcnow(),
                        type=MemoryType.MESSAGE if turn else MemoryType.FACT)
    return StoredMemory(record, np.eye(4, dtype=np.float32)[i % 4])


BEFORE = [row("Melanie: we went camping last week", 0),
          row("Caroline: the Pride parade was great", 1),
          row("Hey Melanie! how was the lake?", 2),
          row("my pride in the kids grows", 3),  # 'pride' in lower case: Pride is no name
          row("Anna, my sister, lives in Lisbon", 4, turn=False)]
AFTER_ADDED = [row("Melanie: camping again near Lisbon, Anna came", 5),
               row("Oliver: I'm into pottery now", 6)]


def held(rows: list[StoredMemory], version: int) -> HotSet:
    hot = HotSet(dim=4)
    assert hot.hybrid("u", version, np.ones(4, np.float32), QUERY, 10, Where(),
                      lambda: rows, names=True) is not None  # both indexes built
    return hot


def scores(hot: HotSet, version: int) -> tuple[dict[str, float], dict[str, float]]:
    entry = hot._entries["u"]
    assert entry.version == version
    contents = [r.content for r in entry.records]
    return (dict(zip(contents, entry.keyword_scores(QUERY).tolist(), strict=True)),
            dict(zip(contents, entry.named(QUERY).tolist(), strict=True)))


REPLACED = row("Caroline: the Pride parade in Lisbon was great", 1)


@pytest.mark.parametrize(("ops", "keep", "new"), [
    # 'my pride ...' deleted (Pride becomes a name), one replaced, two added
    ([StoreOp(kind="delete", user_id="u", ids=(BEFORE[3].record.id,)),
      StoreOp(kind="replace", user_id="u", ids=(BEFORE[1].record.id,),
              rows=(REPLACED, *AFTER_ADDED))],
     [BEFORE[0], BEFORE[2], BEFORE[4]], (REPLACED, *AFTER_ADDED)),
    # an add alone (a verbatim add: fresh ids, nothing goes)
    ([StoreOp(kind="replace", user_id="u", rows=tuple(AFTER_ADDED))], BEFORE, tuple(AFTER_ADDED)),
])
def test_a_patched_set_scores_as_one_built_after_the_write(
        monkeypatch: pytest.MonkeyPatch, ops: list[StoreOp], keep: list[StoredMemory],
        new: tuple[StoredMemory, ...]) -> None:
    hot = held(BEFORE, 1)
    read: list[str] = []
    named: list[str] = []
    tokens, capitalised = lexical.tokens, entities._capitalised
    monkeypatch.setattr(lexical, "tokens", lambda text: (read.append(text), tokens(text))[1])
    monkeypatch.setattr(entities, "_capitalised",
                        lambda text, **kw: (named.append(text), capitalised(text, **kw))[1])
    hot.applied("u", ops, 1, 2)
    assert sorted(read) == sorted(r.record.index_text for r in new)  # only the new rows
    assert sorted(named) == sorted(r.record.content for r in new)
    monkeypatch.undo()
    fresh = held([*keep, *new], 2)
    patched_kw, patched_named = scores(hot, 2)
    fresh_kw, fresh_named = scores(fresh, 2)
    assert patched_kw == pytest.approx(fresh_kw)
    assert patched_named == fresh_named
    patched_names, fresh_names = hot._entries["u"]._names, fresh._entries["u"]._names
    assert patched_names is not None and fresh_names is not None
    assert dict(patched_names._lower) == dict(fresh_names._lower)  # no zeros of gone words
    assert patched_named["Hey Melanie! how was the lake?"] == 0  # addresses her
    if REPLACED in new:  # 'my pride' went: Pride is a name now
        assert patched_named[REPLACED.record.content] > 0


def test_type_and_slot_masks_are_patched_as_built_afresh() -> None:
    hot = HotSet(dim=4)
    keys = [Where(types=(MemoryType.FACT.value,)), Where(types=(MemoryType.MESSAGE.value,))]
    for where in keys:  # both masks built on the held entry
        assert hot.search("u", 1, np.ones(4, np.float32), 2, where, lambda: BEFORE) is not None
    fact = row("I live in Porto", 7, turn=False)
    hot.applied("u", [StoreOp(kind="delete", user_id="u", ids=(BEFORE[1].record.id,)),
                      StoreOp(kind="replace", user_id="u", rows=(fact, AFTER_ADDED[0]))], 1, 2)
    entry = hot._entries["u"]
    assert len(entry._narrowed) == 2  # carried over, not dropped
    for where in keys:
        key = (where.types, where.slots, where.slot_prefixes)
        want = [r.type.value in where.types for r in entry.records]
        assert entry._narrowed[key].tolist() == want


def test_type_and_slot_asks_follow_the_write() -> None:
    hot = HotSet(dim=4)
    facts = Where(types=(MemoryType.FACT.value,))
    q = np.ones(4, np.float32)

    def found(version: int, where: Where) -> list[str]:
        hits = hot.search("u", version, q, 10, where, lambda: BEFORE)
        assert hits is not None
        return sorted(r.content for r, _ in hits)

    assert found(1, facts) == ["Anna, my sister, lives in Lisbon"]
    assert found(1, Where(slots=("city",))) == []
    fact = row("I live in Porto", 7, turn=False)
    fact = StoredMemory(fact.record.model_copy(update={"slot": "city"}), fact.vector)
    hot.applied("u", [StoreOp(kind="delete", user_id="u", ids=(BEFORE[4].record.id,)),
                      StoreOp(kind="replace", user_id="u", rows=(fact,))], 1, 2)
    assert found(2, facts) == ["I live in Porto"]  # the asks' rows were patched, not kept
    assert found(2, Where(slots=("city",))) == ["I live in Porto"]
    assert found(2, Where(types=(MemoryType.MESSAGE.value,))) == sorted(
        r.record.content for r in BEFORE[:4])


def _on(text: str, i: int, day: date) -> StoredMemory:
    at = datetime.combine(day, time(12), tzinfo=UTC)
    record = new_record(user_id="u", content=text, embedding_model="m", at=utcnow(),
                        type=MemoryType.MESSAGE).model_copy(update={"occurred_at": at})
    return StoredMemory(record, np.eye(4, dtype=np.float32)[i % 4])


def test_what_was_said_in_a_span_follows_the_write() -> None:
    hot = HotSet(dim=4)
    q, june, july = np.ones(4, np.float32), date(2024, 6, 14), date(2024, 7, 2)
    rows = [_on("ran by the river", 0, june), _on("cooked chili", 1, june),
            _on("watched a film", 2, july)]
    week = [Span(date(2024, 6, 10), date(2024, 6, 16))]

    def said(version: int, spans: list[Span], where: Where | None = None) -> list[str]:
        hits = hot.said_in("u", version, q, spans, UTC, 10, where or Where())
        assert hits is not None
        return sorted(r.content for r, _ in hits)

    assert hot.said_in("u", 1, q, week, UTC, 10, Where()) is None  # never loads a set
    assert hot.search("u", 1, q, 1, Where(), lambda: rows) is not None
    assert said(1, week) == ["cooked chili", "ran by the river"]
    assert said(1, [Span(june, june, frozenset({7}))]) == ["watched a film"]  # July, any year
    assert said(1, [Span(june, june, frozenset({6}), days=(11, 20))]) == [
        "cooked chili", "ran by the river"]  # mid-June, any year
    assert said(1, [Span(june, june, frozenset({6, 7}), days=(21, 31))]) == []  # late June/July
    assert said(1, week, Where(ids=(rows[0].record.id,))) == ["ran by the river"]
    late = _on("hiked the ridge", 3, date(2024, 6, 15))
    hot.applied("u", [StoreOp(kind="delete", user_id="u", ids=(rows[1].record.id,)),
                      StoreOp(kind="replace", user_id="u", rows=(late,))], 1, 2)
    entry = hot._entries["u"]
    assert entry._said is not None  # patched, not dropped
    assert entry._said.tolist() == hotset._said(entry.records).tolist()
    assert said(2, week) == ["hiked the ridge", "ran by the river"]


def test_the_days_said_are_read_in_the_zone_asked() -> None:
    # said at 20:00 UTC on Friday 14 June: Saturday the 15th at 04:00 in Beijing
    late = _on("watched a film", 0, date(2024, 6, 14))
    late = StoredMemory(late.record.model_copy(update={"occurred_at": datetime(
        2024, 6, 14, 20, tzinfo=UTC)}), late.vector)
    hot = HotSet(dim=4)
    q, friday = np.ones(4, np.float32), [Span(date(2024, 6, 14), date(2024, 6, 14))]
    assert hot.search("u", 1, q, 1, Where(), lambda: [late]) is not None
    beijing = ZoneInfo("Asia/Shanghai")
    assert len(hot.said_in("u", 1, q, friday, UTC, 10, Where()) or []) == 1
    assert hot.said_in("u", 1, q, friday, beijing, 10, Where()) == []
    saturday = [Span(date(2024, 6, 15), date(2024, 6, 15))]
    assert len(hot.said_in("u", 1, q, saturday, beijing, 10, Where()) or []) == 1


def test_a_day_of_any_year_is_read_in_the_zone_of_its_own_date() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    said = np.array([int(datetime(2023, 7, 4, 0, 30, tzinfo=berlin).timestamp()),
                     int(datetime(2023, 7, 3, 23, 30, tzinfo=berlin).timestamp()),
                     int(datetime(2021, 1, 4, 0, 30, tzinfo=berlin).timestamp())])
    july_4th = Span(date.min, date.min, frozenset({7}), days=(4, 4))
    assert hotset._inside(said, july_4th, berlin).tolist() == [True, False, False]
    january_4th = Span(date.min, date.min, frozenset({1}), days=(4, 4))
    assert hotset._inside(said, january_4th, berlin).tolist() == [False, False, True]
    assert hotset._inside(said[:0], july_4th, berlin).tolist() == []


def test_the_vectors_of_candidates_follow_the_write() -> None:
    hot = HotSet(dim=4)
    ids = [r.record.id for r in BEFORE]
    assert hot.vectors("u", 1, ids) is None  # never loads a set
    assert hot.search("u", 1, np.ones(4, np.float32), 1, Where(), lambda: BEFORE) is not None
    held = hot.vectors("u", 1, [ids[2], "no-such-id", ids[0]])
    assert held is not None
    assert held[0] == [ids[2], ids[0]]  # in the order asked, unknown ids left out
    assert held[1].tolist() == [np.eye(4)[2].tolist(), np.eye(4)[0].tolist()]
    hot.applied("u", [StoreOp(kind="delete", user_id="u", ids=(ids[0],)),
                      StoreOp(kind="replace", user_id="u", rows=(AFTER_ADDED[0],))], 1, 2)
    assert hot.vectors("u", 1, ids) is None  # that version is gone
    after = hot.vectors("u", 2, [ids[0], ids[2], AFTER_ADDED[0].record.id])
    assert after is not None
    assert after[0] == [ids[2], AFTER_ADDED[0].record.id]
    assert after[1].tolist() == [np.eye(4)[2].tolist(), np.eye(4)[1].tolist()]

from __future__ import annotations

import math

import pytest

from memray.errors import InvalidInputError
from memray.store.base import Where
from memray.store.filters import build_filter, quote


@pytest.mark.parametrize(("raw", "literal"), [
    ("plain", '"plain"'),
    ('u" or user_id != "', '"u\\" or user_id != \\""'),
    ("a\\", '"a\\\\"'),
    ("line\nbreak\r\ttab", '"line\\nbreak\\r\\ttab"'),
    ("中文", '"中文"'),
])
def test_quote_escapes_everything_that_could_end_the_literal(raw: str, literal: str) -> None:
    assert quote(raw) == literal


def test_quoted_literal_has_no_unescaped_quote_inside() -> None:
    hostile = '\\" or 1==1 or "\\\\"'
    body = quote(hostile)[1:-1]
    i = 0
    while i < len(body):
        if body[i] == "\\":
            i += 2
            continue
        assert body[i] != '"'
        i += 1


def test_nul_and_non_strings_are_refused() -> None:
    with pytest.raises(InvalidInputError):
        quote("a\x00b")
    with pytest.raises(InvalidInputError):
        quote(5)  # type: ignore[arg-type]


def test_build_filter_always_scopes_the_user_first() -> None:
    expr = build_filter("alice", Where(ids=("1", "2"), statuses=("active",),
                                       alive_at_ms=1000, min_importance=0.5))
    assert expr == ('user_id == "alice" and id in ["1", "2"] and status in ["active"] and '
                    "(expires_at == 0 or expires_at > 1000) and importance >= 0.5")
    assert build_filter('x" or "', Where()) == 'user_id == "x\\" or \\""'
    assert build_filter("u", Where(slots=("city",), slot_prefixes=("like:",))) == (
        'user_id == "u" and (slot in ["city"] or slot like "like:%")')
    with pytest.raises(InvalidInputError):
        build_filter("u", Where(slot_prefixes=("50%",)))


@pytest.mark.parametrize("bad", [math.nan, math.inf, True, "1"])
def test_numbers_must_be_finite_numbers(bad: object) -> None:
    with pytest.raises(InvalidInputError):
        build_filter("u", Where(min_importance=bad))  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [(math.nan, 1), (0, "1"), (True, 5)])
def test_said_ranges_must_be_finite_numbers(bad: tuple[object, object]) -> None:
    with pytest.raises(InvalidInputError):
        build_filter("u", Where(said_within_ms=(bad,)))  # type: ignore[arg-type]


def test_said_is_the_message_time_where_there_is_one_else_the_storing() -> None:
    # `exists`, parenthesised: Milvus 2.3 reads `exists a and b` as `exists (a and b)`, and
    # a comparison with a missing key is negated differently by milvus-lite and Milvus 2.3
    expr = build_filter("u", Where(said_within_ms=((1, 2), (5, 9))))
    assert expr == (
        'user_id == "u" and (((exists payload["occurred_at"]) and '
        '((payload["occurred_at"] >= 1 and payload["occurred_at"] < 2) or '
        '(payload["occurred_at"] >= 5 and payload["occurred_at"] < 9))) or '
        '((not exists payload["occurred_at"]) and '
        "((created_at >= 1 and created_at < 2) or (created_at >= 5 and created_at < 9))))")


def test_the_window_is_one_range_per_stretch_of_time() -> None:
    from datetime import UTC, date, datetime

    from memray.core.recall import _ranges_ms
    from memray.core.when import Span

    now = datetime(2025, 7, 20, 12, tzinfo=UTC)
    may = Span(date(2025, 5, 1), date(2025, 5, 31))
    june = Span(date(2025, 6, 1), date(2025, 6, 30))
    ranges = _ranges_ms([may] * 300 + [june, june], now)  # "in May in May ...", May + June
    start = int(datetime(2025, 5, 1, tzinfo=UTC).timestamp() * 1000)
    end = int(datetime(2025, 7, 1, tzinfo=UTC).timestamp() * 1000)
    assert ranges == ((start, end),)

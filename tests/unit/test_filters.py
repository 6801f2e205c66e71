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

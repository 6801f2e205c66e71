"""The phrase-by-phrase date bench (memray/bench/dates.py) and the blind set it scores."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from memray.bench.dates import Phrase, load, main, report, score
from memray.core.when import Span

BLIND = Path(__file__).resolve().parents[1] / "data" / "dates" / "phrases_blind.jsonl"
SAID = date(2024, 5, 9)  # a Thursday


def _phrase(kind: str, text: str, expect: tuple[str, str] | None) -> Phrase:
    span = None if expect is None else Span(date.fromisoformat(expect[0]),
                                            date.fromisoformat(expect[1]))
    return Phrase(kind, "en", SAID, text, span)


def test_a_time_read_right_and_alone() -> None:
    s = score(_phrase("question", "what did I do yesterday?", ("2024-05-08", "2024-05-08")))
    assert (s.right, s.clean) == (True, True)


def test_a_time_read_too_wide_is_not_right() -> None:
    # last month holds last Tuesday, but a month is no answer to a day
    s = score(_phrase("question", "what did I do last month?", ("2024-04-30", "2024-04-30")))
    assert (s.right, s.clean) == (False, False)


def test_a_second_wrong_time_is_right_but_not_alone() -> None:
    s = score(_phrase("memory", "Yesterday I booked flights for next month",
                      ("2024-05-08", "2024-05-08")))
    assert (s.right, s.clean) == (True, False)


def test_no_time_expected_and_none_read() -> None:
    assert score(_phrase("memory", "I love the summer", None)).right
    assert not score(_phrase("memory", "Last week I moved", None)).right


def test_a_memory_about_the_day_it_was_said_needs_no_expression() -> None:
    assert score(_phrase("memory", "I just lost my passport", ("2024-05-09", "2024-05-09"))).right
    assert not score(_phrase("question", "did I lose my passport?",
                             ("2024-05-09", "2024-05-09"))).right


def test_the_report_counts_by_kind_and_language(tmp_path: Path) -> None:
    rows = [{"kind": "question", "lang": "en", "now": "2024-05-09",
             "text": "what did I do yesterday?", "expect": ["2024-05-08", "2024-05-08"]},
            {"kind": "memory", "lang": "zh", "now": "2024-05-09", "text": "我喜欢猫",
             "expect": None},
            {"kind": "memory", "lang": "zh", "now": "2024-05-09", "text": "上周我搬家了",
             "expect": ["2024-01-01", "2024-01-01"]}]
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows))
    out = report(load(path))
    assert out["all"] == {"n": 3, "read right": 2 / 3, "nothing else": 2 / 3}
    assert out["memory zh"]["read right"] == 0.5
    assert main(["--data", str(path), "--misses"]) == 0


def test_a_bad_kind_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"kind": "fact", "lang": "en", "now": "2024-05-09", "text": "x", '
                    '"expect": null}\n')
    with pytest.raises(ValueError, match=r"p.jsonl:1: kind"):
        load(path)


@pytest.mark.parametrize(("name", "floor"), [("phrases_blind", 0.98), ("phrases_blind2", 0.94),
                                            ("phrases_blind3", 0.88), ("phrases_blind4", 0.96)])
def test_the_blind_sets_stay_read(name: str, floor: float) -> None:
    """160 phrases each, written blind (tests/data/dates/README.md); what is read today
    must stay read: a change that loses phrases fails here."""
    out = report(load(BLIND.with_name(f"{name}.jsonl")))["all"]
    assert out["n"] == 160
    assert out["read right"] >= floor and out["nothing else"] >= floor, out

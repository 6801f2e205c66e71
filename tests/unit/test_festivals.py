"""Holidays and festivals as days (core/festivals.py) and as what questions and memories
are about (core/when.py)."""

from __future__ import annotations

from datetime import date

import pytest

from memray.core import festivals
from memray.core.when import asked, happened
from tests.unit.test_when import _days


@pytest.mark.parametrize(("year", "sunday"), [
    (2000, date(2000, 4, 23)), (2019, date(2019, 4, 21)), (2024, date(2024, 3, 31)),
    (2025, date(2025, 4, 20)), (2038, date(2038, 4, 25))])
def test_easter(year: int, sunday: date) -> None:
    assert festivals.easter(year) == sunday


@pytest.mark.parametrize(("name", "year", "days"), [
    ("春节", 2025, (date(2025, 1, 28), date(2025, 2, 4))),  # 除夕 to 初七
    ("大年初一", 2020, (date(2020, 1, 25), date(2020, 1, 25))),
    ("大年初一", 2024, (date(2024, 2, 10), date(2024, 2, 10))),
    ("除夕", 2023, (date(2023, 1, 21), date(2023, 1, 21))),
    ("元宵节", 2025, (date(2025, 2, 12), date(2025, 2, 12))),
    ("中秋节", 2024, (date(2024, 9, 17), date(2024, 9, 17))),
    ("端午节", 2023, (date(2023, 6, 22), date(2023, 6, 22))),
    ("thanksgiving", 2024, (date(2024, 11, 28), date(2024, 12, 1))),
    ("new year", 2025, (date(2024, 12, 31), date(2025, 1, 1))),
    ("good friday", 2025, (date(2025, 4, 18), date(2025, 4, 18))),
    ("easter weekend", 2025, (date(2025, 4, 18), date(2025, 4, 21))),
    ("国庆节", 2024, (date(2024, 10, 1), date(2024, 10, 7))),
    ("memorial day", 2025, (date(2025, 5, 24), date(2025, 5, 26))),  # the last Monday, 31 days
    ("memorial day", 2021, (date(2021, 5, 29), date(2021, 5, 31))),  # ... on the 31st
    ("labor day", 2024, (date(2024, 8, 31), date(2024, 9, 2))),
    ("labor day", 2025, (date(2025, 8, 30), date(2025, 9, 1))),  # on the 1st
    ("fourth of july", 2025, (date(2025, 7, 4), date(2025, 7, 4))),
    ("hogmanay", 2024, (date(2024, 12, 31), date(2024, 12, 31))),
    # 七夕 and 重阳 from lunardate and holidays, checked against lunar-python
    ("七夕", 2022, (date(2022, 8, 4), date(2022, 8, 4))),
    ("七夕", 2024, (date(2024, 8, 10), date(2024, 8, 10))),
    ("重阳节", 2025, (date(2025, 10, 29), date(2025, 10, 29))),
    ("mother's day", 2024, (date(2024, 5, 12), date(2024, 5, 12))),  # the 2nd Sunday of May
    ("母亲节", 2026, (date(2026, 5, 10), date(2026, 5, 10))),
    ("father's day", 2025, (date(2025, 6, 15), date(2025, 6, 15))),  # the 3rd Sunday of June
    ("father's day", 2024, (date(2024, 6, 16), date(2024, 6, 16))),
])
def test_the_days_a_festival_holds(name: str, year: int, days: tuple[date, date]) -> None:
    assert festivals.when(name, year) == days


def test_a_lunisolar_festival_outside_the_table_holds_no_days() -> None:
    assert festivals.when("春节", festivals.FIRST_YEAR - 1) is None
    # only the year it names is left
    assert _days(asked("1980年春节我在哪", date(2025, 3, 1))) == [("1980-01-01", "1980-12-31")]


@pytest.mark.parametrize(("query", "at", "days"), [
    ("what did I do at Christmas?", date(2025, 1, 5), ("2024-12-24", "2024-12-26")),
    ("what are we doing for Christmas?", date(2024, 12, 1), ("2024-12-24", "2024-12-26")),
    ("what did I get last Christmas?", date(2024, 12, 28), ("2024-12-24", "2024-12-26")),
    ("what did I get last Christmas?", date(2024, 12, 20), ("2023-12-24", "2023-12-26")),
    ("what did I do at christmas 2022", date(2025, 3, 1), ("2022-12-24", "2022-12-26")),
    ("What did we do over the Easter weekend?", date(2025, 5, 8), ("2025-04-18", "2025-04-21")),
    ("where was I on New Year's Eve", date(2025, 3, 1), ("2024-12-31", "2024-12-31")),
    ("去年春节我去哪了", date(2025, 3, 12), ("2024-02-09", "2024-02-16")),  # not all of 2024
    ("春节我干了什么", date(2025, 3, 12), ("2025-01-28", "2025-02-04")),
    ("元宵节我吃了什么", date(2025, 3, 12), ("2025-02-12", "2025-02-12")),
    ("去年冬至我吃了什么", date(2025, 3, 12), ("2024-12-21", "2024-12-21")),
    ("中秋节打算去哪", date(2025, 3, 12), ("2025-10-06", "2025-10-06")),  # a plan: the next
    ("2023年春节我在哪", date(2025, 3, 12), ("2023-01-21", "2023-01-28")),  # not all 2023
    ("what did we do on NYE?", date(2025, 3, 12), ("2024-12-31", "2024-12-31")),
    ("what did I get Mom for Mothers Day?", date(2025, 6, 1), ("2025-05-11", "2025-05-11")),
    ("what prank did I pull on April Fools?", date(2025, 6, 1), ("2025-04-01", "2025-04-01")),
    ("where was I on St. Patrick's Day?", date(2025, 6, 1), ("2025-03-17", "2025-03-17")),
    ("去年七夕我们去哪了", date(2025, 3, 12), ("2024-08-10", "2024-08-10")),
    ("教师节我送了什么", date(2025, 3, 12), ("2024-09-10", "2024-09-10")),
    ("618大促我买了什么", date(2025, 7, 1), ("2025-06-18", "2025-06-18")),
])
def test_a_festival_in_a_question_is_the_one_it_means(query: str, at: date,
                                                      days: tuple[str, str]) -> None:
    assert _days(asked(query, at)) == [days]


def test_a_festival_in_a_memory_is_the_one_it_tells_of() -> None:
    said = date(2024, 12, 27)
    assert _days(happened("I spent Christmas at my parents'", said))[1:] == [
        ("2024-12-24", "2024-12-26")]
    assert _days(happened("I'm flying home for New Year", said))[1:] == [
        ("2024-12-31", "2025-01-01")]


@pytest.mark.parametrize("text", ["我吃了元宵", "这件事让人很难过年轻人不懂", "我在五一班",
                                  "新年快乐", "Easterly winds", "the Christmassy lights",
                                  "What did we do on Independence Day?", "Labour Day plans?",
                                  "I watched Bill Nye", "我住在618房间", "花了520块",
                                  "房号618"])
def test_words_that_are_no_festival(text: str) -> None:
    assert asked(text, date(2025, 3, 12)) == []

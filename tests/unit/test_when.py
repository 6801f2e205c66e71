"""Questions that ask when, memories that say when (core/when.py), and the w_when bonus."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from memray.config import RecallConfig
from memray.core import when
from memray.core.ranking import rank
from memray.core.when import (
    Span,
    about,
    anchored,
    asked,
    asks_when,
    happened,
    meets,
    named_dates,
    today,
)
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


@pytest.mark.parametrize(("weight", "ids", "plain_top", "lifted"), [
    ("w_when", "when_ids", "talked about the trip", "went on the trip last week"),
    ("w_date", "date_ids", "camping in June was rainy", "we went camping last week")])
def test_a_time_bonus_lifts_its_memories_only_for_the_questions_it_serves(
        weight: str, ids: str, plain_top: str, lifted: str) -> None:
    # w_when: a question that asks when; w_date: a question that names a date
    cfg = RecallConfig(**{weight: 0.3})
    cands = [(rec(plain_top, type=MemoryType.MESSAGE), 0.62),
             (rec(lifted, type=MemoryType.MESSAGE), 0.55)]
    asked = rank(cands, cfg, now=utcnow(), threshold=-1, cap=2, **{ids: frozenset({lifted})})
    assert asked[0].memory.content == lifted
    plain = rank(cands, cfg, now=utcnow(), threshold=-1, cap=2, **{ids: None})
    assert plain[0].memory.content == plain_top
    assert all(-1 <= h.score <= 1 for h in asked)


AT = date(2023, 7, 20)  # a Thursday


def _days(spans: list[Span]) -> list[tuple[str, str]]:
    return [(s.lo.isoformat(), s.hi.isoformat()) for s in spans]


@pytest.mark.parametrize(("text", "days"), [
    ("Yesterday I went camping", ("2023-07-19", "2023-07-19")),
    ("We went camping last week", ("2023-07-10", "2023-07-16")),
    ("two weeks ago we painted", ("2023-07-03", "2023-07-09")),
    ("last weekend was fun", ("2023-07-15", "2023-07-16")),
    ("this past weekend was fun", ("2023-07-15", "2023-07-16")),
    ("last month I quit", ("2023-06-01", "2023-06-30")),
    ("we met last summer", ("2022-06-01", "2022-08-31")),
    ("last Friday I ran", ("2023-07-14", "2023-07-14")),
    ("I'm going next month", ("2023-08-01", "2023-08-31")),
    ("a few days later", ("2023-07-23", "2023-07-23")),
    ("In 2022 I moved", ("2022-01-01", "2022-12-31")),
    ("I started in June", ("2023-06-01", "2023-06-30")),  # the speaker's year
    ("昨天我们去了杭州", ("2023-07-19", "2023-07-19")),
    ("上周末我去爬山了", ("2023-07-15", "2023-07-16")),
    ("三天前我去了医院", ("2023-07-17", "2023-07-17")),
    ("两个月前我换了工作", ("2023-05-01", "2023-05-31")),
    ("去年我们去了日本", ("2022-01-01", "2022-12-31")),
    ("去年夏天我们去了青岛", ("2022-06-01", "2022-08-31")),
    ("今年春天我学了游泳", ("2023-03-01", "2023-05-31")),
    ("去年冬天特别冷", ("2022-12-01", "2023-02-28")),
    ("下个月我去上海", ("2023-08-01", "2023-08-31")),
    ("上周六我们去了公园", ("2023-07-15", "2023-07-15")),  # that day, not the whole week
    ("下星期三我去北京", ("2023-07-26", "2023-07-26")),
    ("这周日我们去看电影", ("2023-07-23", "2023-07-23")),
    ("本周我很忙", ("2023-07-17", "2023-07-23")),
    ("上周一起去了公园", ("2023-07-10", "2023-07-16")),  # 一起 is "together", not Monday
    ("上周一直在下雨", ("2023-07-10", "2023-07-16")),
    ("上周天气很好", ("2023-07-10", "2023-07-16")),
    ("本周日程很满", ("2023-07-17", "2023-07-23")),
    ("上周日我们去了海边", ("2023-07-16", "2023-07-16")),
    ("on the 5th of May I ran", ("2023-05-05", "2023-05-05")),  # the speaker's year
    ("I moved in mid-July", ("2023-07-11", "2023-07-20")),
    ("the end of February was cold", ("2023-02-21", "2023-02-28")),
    ("early June 2022 we went to Lisbon", ("2022-06-01", "2022-06-10")),
    ("We had a barbecue on July 4th", ("2023-07-04", "2023-07-04")),
    ("2022年6月中旬我们搬家了", ("2022-06-11", "2022-06-20")),
    ("5月初我去了北京", ("2023-05-01", "2023-05-10")),
])
def test_a_memory_is_about_the_day_it_was_said_and_the_days_it_counts_to(
        text: str, days: tuple[str, str]) -> None:
    spans = happened(text, AT)
    assert _days(spans[:1]) == [("2023-07-20", "2023-07-20")]
    assert _days(spans[1:]) == [days]


@pytest.mark.parametrize(("said", "text", "days"), [
    (date(2023, 7, 23), "this weekend was lovely", ("2023-07-22", "2023-07-23")),  # Sunday
    (date(2023, 7, 23), "last weekend we hiked", ("2023-07-15", "2023-07-16")),
    (date(2023, 7, 23), "上周末我去爬山了", ("2023-07-15", "2023-07-16")),
    (date(2023, 7, 22), "next weekend we fly", ("2023-07-29", "2023-07-30")),  # Saturday
    (date(2023, 7, 22), "this weekend we stay in", ("2023-07-22", "2023-07-23")),
    (date(2023, 7, 19), "this weekend we hike", ("2023-07-22", "2023-07-23")),  # Wednesday
])
def test_this_weekend_is_the_one_that_holds_the_day(said: date, text: str,
                                                   days: tuple[str, str]) -> None:
    assert _days(happened(text, said)[1:]) == [days]


def test_a_memory_that_counts_to_no_day_is_about_the_day_it_was_said() -> None:
    assert _days(happened("I love pottery and I may go", AT)) == [("2023-07-20", "2023-07-20")]


@pytest.mark.parametrize(("query", "days"), [
    ("What setback did Melanie face in October 2023?", ("2023-10-01", "2023-10-31")),
    ("What did she show on October 13, 2023?", ("2023-10-13", "2023-10-13")),
    ("What did Gina find on 1 February, 2023?", ("2023-02-01", "2023-02-01")),
    ("What state did Joanna visit in summer 2021?", ("2021-06-01", "2021-08-31")),
    ("What happened in 2022?", ("2022-01-01", "2022-12-31")),
    ("Was the first half of September 2022 good?", ("2022-09-01", "2022-09-15")),
    ("2023年5月3日我们做了什么", ("2023-05-03", "2023-05-03")),
    ("2023年5月她去了哪里", ("2023-05-01", "2023-05-31")),
    ("What did she do on the 5th of May, 2023?", ("2023-05-05", "2023-05-05")),
    ("Where was he on the 21st of March 2022?", ("2022-03-21", "2022-03-21")),
])
def test_the_dates_a_question_names(query: str, days: tuple[str, str]) -> None:
    assert _days(named_dates(query)) == [days]


def test_a_month_without_a_year_is_that_month_of_any_year() -> None:
    june = named_dates("When did Melanie go camping in June?")
    assert [s.months for s in june] == [frozenset({6})]
    assert meets(june, happened("we camped last week", date(2021, 7, 3)))  # June 21-27
    assert not meets(june, happened("we camped last week", AT))  # July 10-16
    assert [s.months for s in named_dates("她五月去了哪里")] == [frozenset({5})]


@pytest.mark.parametrize(("query", "month", "days"), [
    ("What did I do in mid-July?", 7, (11, 20)),
    ("where were we at the end of June", 6, (21, 31)),
    ("Early March was busy, wasn't it?", 3, (1, 10)),
    ("What happened on July 4th?", 7, (4, 4)),
    ("What did she do on the 5th of May?", 5, (5, 5)),
    ("what did we eat on 3 May", 5, (3, 3)),
    ("6月底我去了哪里", 6, (21, 31)),
    ("三月上旬发生了什么", 3, (1, 10)),
    ("十月中旬我在哪", 10, (11, 20)),
    ("7月4号我们干了什么", 7, (4, 4)),
    ("6月中下旬我在哪", 6, (11, 31)),
    ("What did I do on May 5th?", 5, (5, 5)),
    ("what happened on May 5", 5, (5, 5)),
    ("Where was I on Oct. 3?", 10, (3, 3)),
])
def test_part_of_a_month_without_a_year_is_those_days_of_any_year(
        query: str, month: int, days: tuple[int, int]) -> None:
    (span,) = named_dates(query)
    assert (span.months, span.days) == (frozenset({month}), days)


@pytest.mark.parametrize("text", [
    "June 31 is no day", "I may 5 times", "6月初三是端午", "5月中午很热", "6月中国队赢了",
    "the meeting is at March 3:30", "We march 5 miles a day", "they will march 10 km",
    "the august 5 members", "May 5 of us come?", "too late may I add",
    "the end of may be near", "5月中考", "6月中美会谈", "7月中暑了", "6月初中毕业",
    "we moved midjuly", "October 13,2023 was a Friday", "July 4, 1776"])
def test_what_is_no_part_of_a_month(text: str) -> None:
    assert all(s.days == (1, 31) for s in named_dates(text))


def test_part_of_a_month_of_any_year_meets_those_days_only() -> None:
    mid_july = named_dates("What did I do in mid-July?")
    assert meets(mid_july, happened("we moved house today", date(2021, 7, 15)))
    assert not meets(mid_july, happened("we moved house today", date(2021, 7, 25)))
    assert meets(mid_july, happened("in July it was hot", date(2021, 7, 25)))  # whole month
    assert meets(mid_july, named_dates("in July"))
    assert not meets(mid_july, named_dates("on July 4th"))
    end_of_june = named_dates("the end of June")[0]
    assert end_of_june.width() == 10 and not end_of_june.over_by(date(2023, 6, 30))
    assert end_of_june.over_by(date(2023, 6, 20)) and end_of_june.over_by(AT)


def test_part_of_a_month_of_any_year_in_epoch_seconds_skips_the_years_without_it() -> None:
    day_31 = Span(AT, AT, frozenset({2, 3}), days=(29, 31))
    got = [(datetime.fromtimestamp(a, UTC).date(), datetime.fromtimestamp(b, UTC).date())
           for a, b in day_31.bounds(UTC, range(2023, 2025))]
    assert got == [(date(2023, 3, 29), date(2023, 4, 1)), (date(2024, 2, 29), date(2024, 3, 1)),
                   (date(2024, 3, 29), date(2024, 4, 1))]


@pytest.mark.parametrize("query", [
    "What may happen next?", "When did she go to the beach?", "Did they march on?",
    "她三个月前做了什么"])
def test_questions_that_name_no_date(query: str) -> None:
    assert named_dates(query) == []


@pytest.mark.parametrize(("query", "days"), [  # asked on AT, Thursday 20 July 2023
    ("What did I do last week?", [("2023-07-10", "2023-07-16")]),
    ("what did I eat yesterday", [("2023-07-19", "2023-07-19")]),
    ("What did I say two weeks ago?", [("2023-07-03", "2023-07-09")]),
    ("Anything planned for next month?", [("2023-08-01", "2023-08-31")]),
    ("上周我做了什么", [("2023-07-10", "2023-07-16")]),
    ("上个月我说过什么", [("2023-06-01", "2023-06-30")]),
    ("她三个月前做了什么", [("2023-04-01", "2023-04-30")]),
    ("去年我们去了哪里", [("2022-01-01", "2022-12-31")]),
    ("What did I do last week, on July 12, 2023?",
     [("2023-07-12", "2023-07-12"), ("2023-07-10", "2023-07-16")]),
])
def test_the_days_a_question_asks_about_count_from_when_it_is_asked(
        query: str, days: list[tuple[str, str]]) -> None:
    assert _days(asked(query, AT)) == days


@pytest.mark.parametrize("query", [
    "Where did I run this morning?", "What did I eat today?", "今天早上我吃了什么？",
    "Who did I meet this afternoon?"])
def test_a_question_about_what_happened_earlier_today_asks_about_today(query: str) -> None:
    assert _days(asked(query, AT)) == [("2023-07-20", "2023-07-20")]


@pytest.mark.parametrize("query", [
    "What should I cook tonight?", "Any plans today?", "我今天该吃什么", "What do I like?",
    "When did she go to the beach?", "What am I doing this evening?", "今晚要做什么菜？"])
def test_a_question_about_the_present_or_no_time_asks_about_no_day(query: str) -> None:
    assert asked(query, AT) == []


@pytest.mark.parametrize("query", [  # the characters of a time inside other words
    "晚上月亮好看吗", "之前天天跑步的是谁", "过去年轻的时候我喜欢什么", "日本月饼好吃吗",
    "等一下周末再说吧", "说明天气会怎样的那条", "楼下周边有什么店"])
def test_chinese_words_that_hold_a_time_name_none(query: str) -> None:
    assert asked(query, AT) == []


@pytest.mark.parametrize("text", ["晚上月亮很圆", "之前天天跑步", "过去年轻的时候爱玩",
                                  "日本月饼很好吃", "楼下周边很安静", "说明天气不错"])
def test_chinese_words_that_hold_a_time_place_nothing_in_time(text: str) -> None:
    assert not anchored(text)


@pytest.mark.parametrize(("query", "days"), [  # asked on AT, Thursday 20 July 2023
    # seasons and weekends
    ("去年夏天我们去了哪儿", ("2022-06-01", "2022-08-31")),
    ("what are we doing this coming weekend", ("2023-07-22", "2023-07-23")),
    ("what did we do this past weekend", ("2023-07-15", "2023-07-16")),
    ("今年冬天我去哪里滑雪", ("2023-12-01", "2024-02-29")),
    # two back or ahead
    ("上上周我做了什么", ("2023-07-03", "2023-07-09")),
    ("上上个月我去了哪里", ("2023-05-01", "2023-05-31")),
    ("下下周有什么安排", ("2023-07-31", "2023-08-06")),
    ("大前天我去哪了", ("2023-07-17", "2023-07-17")),
    ("后天有什么安排", ("2023-07-22", "2023-07-22")),
    ("大后天我要做什么", ("2023-07-23", "2023-07-23")),
    ("what did I do the week before last", ("2023-07-03", "2023-07-09")),
    ("where did we go the weekend before last", ("2023-07-08", "2023-07-09")),
    # a third of a month
    ("上个月底我去了哪", ("2023-06-21", "2023-06-30")),
    ("这个月初我买了什么", ("2023-07-01", "2023-07-10")),
    ("下个月中有什么安排", ("2023-08-11", "2023-08-20")),
    ("上个月末", ("2023-06-21", "2023-06-30")),
    ("what did I do at the end of last month", ("2023-06-21", "2023-06-30")),
    ("early next month", ("2023-08-01", "2023-08-10")),
    ("mid-last month, what did I read", ("2023-06-11", "2023-06-20")),
])
def test_one_stretch_of_days_counted_from_the_day_asked(query: str,
                                                       days: tuple[str, str]) -> None:
    assert _days(asked(query, AT)) == [days]


@pytest.mark.parametrize(("query", "lo"), [  # counted back to AT, Thursday 20 July 2023
    ("What did I do in the past week?", "2023-07-14"),  # seven days, today the last
    ("anything I ate over the last 3 days", "2023-07-18"),
    ("what have I been up to these past few days", "2023-07-18"),
    ("who did I meet in the last two weeks", "2023-07-07"),
    ("what did I buy in the last month", "2023-06-21"),  # the day after 20 June
    ("last 10 days, what did I cook", "2023-07-11"),
    ("最近三天我做了什么", "2023-07-18"),
    ("过去一周我吃了什么", "2023-07-14"),
    ("前几天我去了哪里", "2023-07-18"),
    ("我前几天去了医院", "2023-07-18"),
    ("这两天我在忙什么", "2023-07-19"),
    ("近两个月我读了什么书", "2023-05-21"),
    ("最近一个星期我跑步了吗", "2023-07-14"),
    ("最近十几天我做了什么", "2023-07-06"),  # ten-odd: fifteen
    ("the past year", "2022-07-21"),
    ("what did I do earlier this week", "2023-07-17"),  # from Monday
    ("earlier this month, what did I buy", "2023-07-01"),
    ("最近半个月我做了什么", "2023-07-06"),  # fifteen days
])
def test_a_period_counted_back_runs_to_the_day_asked_and_is_over(query: str, lo: str) -> None:
    (span,) = asked(query, AT)
    assert (span.lo.isoformat(), span.hi) == (lo, AT)
    assert span.over_by(AT)  # it looks at what is over: the window is opened for it
    assert not span.over_by(span.lo)


@pytest.mark.parametrize(("query", "day"), [  # asked on AT, Thursday 20 July 2023
    ("what did I do on Monday?", "2023-07-17"),
    ("where was I on Sunday", "2023-07-16"),
    ("What did I eat on Thursday", "2023-07-13"),  # the day asked is "today"
    ("周一我干了什么", "2023-07-17"),
    ("星期天我去哪了", "2023-07-16"),
])
def test_a_weekday_alone_in_a_question_about_the_past_is_the_last_one(query: str,
                                                                      day: str) -> None:
    assert _days(asked(query, AT)) == [(day, day)]


def test_a_weekday_alone_in_what_a_memory_tells_of_the_past_is_the_last_one() -> None:
    said = date(2023, 7, 20)  # a Thursday
    assert _days(happened("I went climbing on Tuesday", said))[1:] == [
        ("2023-07-18", "2023-07-18")]
    assert _days(happened("周六我去爬山了", said))[1:] == [("2023-07-15", "2023-07-15")]
    assert _days(happened("I went to a gig last Tuesday", said))[1:] == [
        ("2023-07-18", "2023-07-18")]  # once: "last Tuesday" is not read again alone
    assert _days(happened("I'm going climbing on Tuesday", said))[1:] == [
        ("2023-07-25", "2023-07-25")]  # a plan: the next one
    assert _days(happened("周六我要去爬山", said))[1:] == [("2023-07-22", "2023-07-22")]
    for habit in ("I swim on Mondays", "周末我一般在家", "Sunday school was fun",
                  "I love a Sunday roast"):
        assert len(happened(habit, said)) == 1, habit  # only the day it was said


@pytest.mark.parametrize(("query", "day"), [  # asked on AT, Thursday 20 July 2023
    ("what do I have on Monday?", "2023-07-24"), ("周一我要干什么", "2023-07-24"),
    ("周六我要去爬山了", "2023-07-22"), ("周五别忘了开会", "2023-07-21"),
    ("周三前我要交报告了", "2023-07-26"), ("What am I doing on Friday?", "2023-07-21"),
    ("What did I say I'd do on Friday?", "2023-07-21"),  # a plan told earlier
    ("what happened on Monday?", "2023-07-17"),  # a regular past form after its subject
    # after "for" in a plan too (not "tickets for Friday's concert", bought before it)
    ("what did I plan for Saturday?", "2023-07-22"),
    ("remind me what I planned for Saturday", "2023-07-22"),
])
def test_a_weekday_alone_in_a_plan_is_the_next_one(query: str, day: str) -> None:
    assert _days(asked(query, AT)) == [(day, day)]


@pytest.mark.parametrize("query", [
    "what did I do on Mondays", "每周一我做了什么", "星期一起我做了什么",
    "除了周一，我每天都健身", "四周一片漆黑，我们迷路了", "每逢周一我都去跑步了",
    "My flight got moved to Friday",
    "I got tickets for Friday's concert",
    "What was the name of the Sunday school my kids went to?", "周末我一般干什么"])
def test_a_weekday_in_a_habit_or_a_name_is_no_day(query: str) -> None:
    assert asked(query, AT) == []


@pytest.mark.parametrize(("query", "days"), [  # asked on AT, Thursday 20 July 2023
    # a weekday inside a time already placed adds no day of its own
    ("what did I do last week on Friday?", [("2023-07-10", "2023-07-16")]),
    ("上周的周五我做了什么", [("2023-07-10", "2023-07-16")]),
    ("the Friday before last, what did I do", [("2023-07-07", "2023-07-07")]),
    ("I went to the gym yesterday; on Friday I'm flying to Rome", [("2023-07-19", "2023-07-19")]),
])
def test_a_weekday_inside_a_placed_time(query: str, days: list[tuple[str, str]]) -> None:
    assert _days(asked(query, AT)) == days


@pytest.mark.parametrize("query", [
    "what did I do the last week of June", "what happened on the last day of the trip",
    "the past year of my life", "我学钢琴将近三年了", "之前三天都在下雨", "目前三天的安排",
    "然后天气怎么样", "考试前一天我熬夜了", "出发前两天我收拾了行李", "怀孕前三个月",
    "我的前三个月工资", "这一天终于来了", "what did I do the previous week"])
def test_no_period_counted_back(query: str) -> None:
    assert asked(query, AT) == []


@pytest.mark.parametrize("text", [
    "Humans have farmed for the past 10000 years", "最近99999999天", "4500 years ago",
    "99999999 days ago", "in the past 3000 years"])
def test_a_time_no_calendar_holds_is_no_error(text: str) -> None:
    assert asked(text, AT) == []
    assert happened(text, AT) == [Span(AT, AT)]  # only the day it was said


def test_a_question_is_asked_on_its_day_in_its_own_zone() -> None:
    beijing = datetime(2023, 7, 21, 7, 0, tzinfo=timezone(timedelta(hours=8)))  # 20th UTC
    assert today(beijing) == date(2023, 7, 21)
    assert _days(asked("what did I do yesterday", beijing)) == [("2023-07-20", "2023-07-20")]
    assert today(beijing.astimezone(UTC)) == AT


def test_a_span_is_over_once_its_last_day_has_passed() -> None:
    week = Span(date(2023, 7, 10), date(2023, 7, 16))
    assert week.over_by(date(2023, 7, 17)) and not week.over_by(date(2023, 7, 16))
    june = Span(AT, AT, frozenset({6}))  # June of any year
    assert june.over_by(AT) and not june.over_by(date(2023, 6, 2))


def test_a_span_in_epoch_seconds_runs_from_its_first_midnight_to_the_next_after_it() -> None:
    beijing = timezone(timedelta(hours=8))
    week = Span(date(2023, 7, 10), date(2023, 7, 16))
    ((lo, hi),) = week.bounds(beijing, range(0))
    assert datetime.fromtimestamp(lo, beijing) == datetime(2023, 7, 10, tzinfo=beijing)
    assert datetime.fromtimestamp(hi, beijing) == datetime(2023, 7, 17, tzinfo=beijing)
    february = Span(AT, AT, frozenset({2, 6}))  # February and June of any year
    got = [(datetime.fromtimestamp(a, UTC).date(), datetime.fromtimestamp(b, UTC).date())
           for a, b in february.bounds(UTC, range(2023, 2025))]
    assert got == [(date(2023, 2, 1), date(2023, 3, 1)), (date(2023, 6, 1), date(2023, 7, 1)),
                   (date(2024, 2, 1), date(2024, 3, 1)), (date(2024, 6, 1), date(2024, 7, 1))]


def test_a_memory_about_a_wider_time_is_not_about_the_day_asked() -> None:
    yesterday = asked("what did I do yesterday", AT)
    assert about(yesterday, happened("I ran by the river", date(2023, 7, 19)))
    assert about(yesterday, happened("今天我去游泳了", date(2023, 7, 19)))
    this_year = happened("this year I want to learn the cello", date(2023, 3, 1))
    assert meets(yesterday, this_year[1:]) and not about(yesterday, this_year)
    assert about(asked("what did I do last month", AT),
                 happened("last week I painted the fence", date(2023, 6, 20)))


def test_a_memorys_days_are_read_once_per_text_and_day_and_given_as_a_fresh_list() -> None:
    said = date(2023, 7, 19)
    first = happened("yesterday we went to the lake", said)
    first.append(Span(AT, AT))  # the caller's list is its own
    again = happened("yesterday we went to the lake", datetime(2023, 7, 19, 22, tzinfo=UTC))
    assert _days(again) == [("2023-07-19", "2023-07-19"), ("2023-07-18", "2023-07-18")]
    assert _days(happened("yesterday we went to the lake", AT))[1] == ("2023-07-19",
                                                                        "2023-07-19")


@pytest.mark.parametrize(("text", "said", "days"), [
    ("the baby is due in mid-Jan", date(2024, 12, 1), ("2025-01-11", "2025-01-20")),
    ("he hasn't done his homework since October", date(2025, 1, 15),
     ("2024-10-01", "2024-10-31")),
    ("like you suggested back in October", date(2025, 1, 12), ("2024-10-01", "2024-10-31")),
    ("Greta wants to host the next one in January", date(2024, 12, 8),
     ("2025-01-01", "2025-01-31")),
    ("we went to Japan in August", date(2024, 6, 15), ("2023-08-01", "2023-08-31")),
    ("I will finish it by the end of June", date(2024, 12, 10), ("2025-06-21", "2025-06-30")),
    ("Mum called: her operation is booked for the 19th of August", date(2024, 7, 27),
     ("2024-08-19", "2024-08-19")),
    # no tense either way: the year it was said
    ("we moved to Berlin in February", date(2024, 11, 20), ("2024-02-01", "2024-02-29")),
    ("Our Lisbon trip is in November", date(2024, 3, 5), ("2024-11-01", "2024-11-30")),
    ("In June it rained a lot", date(2024, 12, 20), ("2024-06-01", "2024-06-30")),
    ("宝宝预产期是一月中旬", date(2024, 11, 20), ("2024-01-11", "2024-01-20")),
    ("十月我们去了北京", date(2024, 2, 1), ("2023-10-01", "2023-10-31")),
    ("我们打算一月中旬去哈尔滨", date(2024, 11, 20), ("2025-01-11", "2025-01-20")),
    ("the conference in March 2023 was long", date(2024, 12, 1), ("2023-03-01", "2023-03-31")),
])
def test_a_month_a_memory_names_without_a_year_is_of_the_year_said_unless_its_tense_moves_it(
        text: str, said: date, days: tuple[str, str]) -> None:
    assert _days(happened(text, said)[1:]) == [days]


@pytest.mark.parametrize(("text", "said", "days"), [
    # halves, fortnights and a few, counted back or on
    ("half a year ago I changed jobs", date(2024, 3, 20), ("2023-09-01", "2023-09-30")),
    ("a year and a half ago we married", date(2024, 3, 20), ("2022-09-01", "2022-09-30")),
    ("I started the job a fortnight ago", date(2024, 3, 20), ("2024-03-04", "2024-03-10")),
    ("flying to Seoul two weeks from today", date(2026, 4, 14), ("2026-04-27", "2026-05-03")),
    ("半年前我换了工作", date(2024, 3, 20), ("2023-09-01", "2023-09-30")),
    ("一年半前我们结婚了", date(2024, 3, 20), ("2022-09-01", "2022-09-30")),
    ("几天前我丢了钥匙", date(2024, 3, 20), ("2024-03-17", "2024-03-17")),
    # parts of a year: written, counted, or by the tense of their clause
    ("mid-2023 we moved", date(2024, 3, 20), ("2023-05-01", "2023-08-31")),
    ("in the first half of 2023 I was in Paris", date(2024, 3, 20), ("2023-01-01", "2023-06-30")),
    ("by the end of next year I will retire", date(2024, 3, 20), ("2025-12-01", "2025-12-31")),
    ("at the start of the year I joined a gym", date(2024, 3, 20), ("2024-01-01", "2024-04-30")),
    ("去年底我买了车", date(2024, 3, 20), ("2023-12-01", "2023-12-31")),
    ("我去年年中换了工作", date(2026, 1, 9), ("2025-05-01", "2025-08-31")),
    ("2023年底我们搬家了", date(2024, 3, 20), ("2023-12-01", "2023-12-31")),
    ("年底我升职了", date(2024, 1, 9), ("2023-12-01", "2023-12-31")),  # past, still to come
    ("上半年我很忙", date(2024, 3, 20), ("2024-01-01", "2024-06-30")),
    ("Q3 2024 was rough", date(2025, 1, 1), ("2024-07-01", "2024-09-30")),
    ("上个季度我见了几个客户", date(2024, 4, 10), ("2024-01-01", "2024-03-31")),
    # a season, a month, a part of a month, a day of the month, named alone
    ("over the winter I learned to ski", date(2024, 3, 20), ("2023-12-01", "2024-02-29")),
    ("这个冬天我去滑雪了", date(2023, 12, 31), ("2023-12-01", "2024-02-29")),
    ("我2023年的春天在上海工作", date(2025, 7, 24), ("2023-03-01", "2023-05-31")),
    ("I spent a lot on gifts last December", date(2025, 1, 2), ("2024-12-01", "2024-12-31")),
    ("At the end of the month I'm visiting my grandparents", date(2024, 9, 9),
     ("2024-09-21", "2024-09-30")),
    ("月初我交了房租", date(2025, 8, 2), ("2025-08-01", "2025-08-10")),
    ("这个月上旬我去了医院", date(2025, 8, 20), ("2025-08-01", "2025-08-10")),
    ("6月中我们去了北京", date(2024, 3, 20), ("2023-06-11", "2023-06-20")),
    ("I'm having knee surgery on the 25th", date(2026, 3, 17), ("2026-03-25", "2026-03-25")),
    ("I lost my wallet on the 28th", date(2023, 2, 14), ("2023-01-28", "2023-01-28")),
    ("我28号去看了牙医", date(2025, 8, 2), ("2025-07-28", "2025-07-28")),
    # weeks and weekends
    ("The week after next I'm going to a concert", date(2025, 11, 5),
     ("2025-11-17", "2025-11-23")),
    ("我周末去滑雪了", date(2024, 1, 9), ("2024-01-06", "2024-01-07")),
    # festivals: the year said after it, the tense, the nearest when neither
    ("On Thanksgiving last year I cooked for twelve", date(2025, 7, 10),
     ("2024-11-28", "2024-12-01")),  # Thursday to Sunday
    ("on Valentine's Day he proposed", date(2024, 3, 20), ("2024-02-14", "2024-02-14")),
    ("除夕那天我在家陪爸妈看春晚", date(2026, 2, 20), ("2026-02-16", "2026-02-16")),
    ("双十一我又买了一堆东西", date(2025, 11, 11), ("2025-11-11", "2025-11-11")),
    ("年前我回了趟家", date(2024, 3, 20), ("2024-01-20", "2024-02-09")),
    ("年前我要把项目做完", date(2024, 12, 10), ("2025-01-08", "2025-01-28")),
])
def test_more_ways_a_memory_says_when(text: str, said: date, days: tuple[str, str]) -> None:
    assert _days(happened(text, said)[1:]) == [days]


@pytest.mark.parametrize(("query", "days"), [  # asked on AT, Thursday 20 July 2023
    ("what did I do in early 2023?", ("2023-01-01", "2023-04-30")),
    ("What were my goals for the second half of the year?", ("2023-07-01", "2023-12-31")),
    ("年初我做了什么？", ("2023-01-01", "2023-04-30")),
    ("年前我做了什么？", ("2023-01-01", "2023-01-21")),
    ("Who did I meet up with on the 2nd?", ("2023-07-02", "2023-07-02")),
    ("What did I do on Christmas Day last year?", ("2022-12-25", "2022-12-25")),
    ("what did I do over the weekend?", ("2023-07-15", "2023-07-16")),
    ("上个季度我见了几个客户？", ("2023-04-01", "2023-06-30")),
])
def test_more_ways_a_question_asks_about_a_time(query: str, days: tuple[str, str]) -> None:
    assert _days(asked(query, AT)) == [days]


@pytest.mark.parametrize("text", [
    "三年前我搬到了杭州", "今年中国经济很好", "一年中最冷的时候", "大年初一我拜年了",
    "每年年底我都很忙", "我在五一广场那边打工", "坐3号线去公司", "腊月底我们回家了",
    "this may help", "I need a dentist on Monday", "多年前我去过", "新年前我们聚了一次",
])
def test_words_that_look_like_the_new_forms_are_no_such_time(text: str) -> None:
    said = date(2024, 3, 20)
    spans = happened(text, said)[1:]
    wrong = {"三年前我搬到了杭州": [("2021-01-01", "2021-12-31")],  # a counted year, not 年前
             "大年初一我拜年了": [("2024-02-10", "2024-02-10")],  # a festival, not 年初
             "今年中国经济很好": [("2024-01-01", "2024-12-31")]}  # this year, not 年中
    assert _days(spans) == wrong.get(text, [])


def _texts_with_times() -> list[str]:
    """Every turn and question of the repository's date sets and the LoCoMo dev split."""
    data = Path(__file__).resolve().parents[1] / "data"
    samples = [s for f in sorted((data / "dates").glob("*.json"))
               for s in json.loads(f.read_text())]
    samples += json.loads((data / "locomo" / "locomo_dev.json").read_text())
    texts = [q["question"] for s in samples for q in s.get("qa", [])]
    for sample in samples:
        convo = sample["conversation"]
        texts += [turn["text"] for key, turns in convo.items()
                  if key.startswith("session_") and isinstance(turns, list) for turn in turns]
    return texts


def test_the_gates_that_skip_patterns_change_no_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = _texts_with_times()
    said = date(2024, 3, 13)

    def read() -> list[tuple[list[Span], list[Span]]]:
        when._happened_on.cache_clear()
        when._year_parts.cache_clear()
        when._fixed_in_month.cache_clear()
        return [(happened(t, said), asked(t, said)) for t in texts]

    gated = read()
    assert len(texts) > 2000 and sum(len(h) > 1 or bool(a) for h, a in gated) > 300
    monkeypatch.setattr(when, "_GATES", {})
    assert read() == gated


@pytest.mark.parametrize(("text", "said", "days"), [
    # English inside Chinese, chat spellings, weekday abbreviations that are no words
    ("我yesterday去了趟超市", date(2024, 5, 9), ("2024-05-08", "2024-05-08")),
    ("我们last month搬到了上海", date(2024, 5, 9), ("2024-04-01", "2024-04-30")),
    ("yday I finally fixed the bike", date(2024, 5, 9), ("2024-05-08", "2024-05-08")),
    ("dentist tmrw at 9, ugh", date(2024, 5, 9), ("2024-05-10", "2024-05-10")),
    ("I ran 10k on Tues", date(2024, 5, 9), ("2024-05-07", "2024-05-07")),
    # a month of a year counted from the day said, a day or a third of it
    ("去年十月我去了趟成都", date(2024, 5, 9), ("2023-10-01", "2023-10-31")),
    ("明年2月我们要搬家", date(2024, 5, 9), ("2025-02-01", "2025-02-28")),
    ("前年8月15号我们结婚了", date(2024, 5, 9), ("2022-08-15", "2022-08-15")),
    ("今年三月底我换了工作", date(2024, 5, 9), ("2024-03-21", "2024-03-31")),
    # the nth weekday or weekend of a month
    ("we went camping the second weekend of April", date(2024, 5, 9),
     ("2024-04-13", "2024-04-14")),
    ("The recital is on the last Friday in June", date(2024, 5, 9), ("2024-06-28", "2024-06-28")),
    ("the first Monday of March 2023 was my first day", date(2024, 5, 9),
     ("2023-03-06", "2023-03-06")),
    ("四月的第二个周六我们去爬山了", date(2024, 5, 9), ("2024-04-13", "2024-04-13")),
    ("6月最后一个周末我要去青岛", date(2024, 5, 9), ("2024-06-29", "2024-06-30")),
    # this year, the year before last's season, soon
    ("我今年开始学吉他", date(2024, 5, 9), ("2024-01-01", "2024-12-31")),
    ("前年冬天我们去了哈尔滨", date(2024, 5, 9), ("2022-12-01", "2023-02-28")),
    ("过几天我要去上海出差", date(2024, 5, 9), ("2024-05-10", "2024-05-16")),
    # festivals by other names
    ("We flew to Taipei for Lunar New Year", date(2024, 3, 1), ("2024-02-09", "2024-02-16")),
    ("I got a new TV on Black Friday", date(2023, 12, 5), ("2023-11-24", "2023-11-24")),
    ("十一假期我们去了西安", date(2024, 10, 20), ("2024-10-01", "2024-10-07")),
])
def test_still_more_ways_a_memory_says_when(text: str, said: date,
                                            days: tuple[str, str]) -> None:
    assert _days(happened(text, said)[1:]) == [days]


@pytest.mark.parametrize("text", [
    "我们一共十一个人", "第十一期间隔很长", "熬过两天就好了", "他度过几天假",
    "Thu Nguyen is my coach", "the first Monday of every month is payday",
    "我在学习Friday这个单词",
])
def test_what_only_looks_like_those_forms_is_no_time(text: str) -> None:
    assert _days(happened(text, date(2024, 5, 9))[1:]) == []


@pytest.mark.parametrize(("text", "days"), [
    # a regular past after a name or a noun tells of the past
    ("Mom called me on Monday", [("2024-05-06", "2024-05-06")]),
    ("my sister married Tom on Saturday", [("2024-05-04", "2024-05-04")]),
    # a present passive, a question, a noun that looks like a past form: not past
    ("I need to get my flu shot in October", [("2024-10-01", "2024-10-31")]),
    ("The conference is held in September", [("2024-09-01", "2024-09-30")]),
    ("Only two weeks left before our trip in August", [("2024-08-01", "2024-08-31")]),
    # an arrangement is about the time arranged
    ("I registered for the marathon in October", [("2024-10-01", "2024-10-31")]),
    ("I signed up for the race on the 25th", [("2024-05-25", "2024-05-25")]),
    ("我们约了25号见面", [("2024-05-25", "2024-05-25")]),
    ("25号过来吃饭吧", [("2024-05-25", "2024-05-25")]),
    # quarters: "the last quarter of 2023", Q3 last year
    ("the last quarter of 2023 was slow", [("2023-10-01", "2023-12-31")]),
    ("revenue grew in Q3 last year", [("2023-07-01", "2023-09-30")]),
    ("we raised our targets for Q4", [("2024-10-01", "2024-12-31")]),
])
def test_the_tense_and_the_forms_a_review_found_misread(text: str,
                                                        days: list[tuple[str, str]]) -> None:
    assert _days(happened(text, date(2024, 5, 9))[1:]) == days


@pytest.mark.parametrize("text", [
    "如今年轻人都不愿意结婚", "至今年薪没涨", "成年前我一直住在乡下", "恐龙一亿年前就灭绝了",
    "在青少年中，近视很普遍", "这些年中我学会了很多", "学年末考试很难", "我们在一起马上半年了",
    "加上半年的奖金一共十万", "我在北京住过两天", "这个药不过两天就见效", "I live on the 3rd floor",
    "by the 4th round he was tired", "我是3号选手", "我们去了9号公路", "an Audi Q3 is nice",
    "I got Q2 wrong on the exam", "We scored 20 points in the last quarter of the game",
    "我们住在四季度假酒店", "DDL前两天我才开始写论文", "we did one last march around the field",
])
def test_what_a_review_found_read_as_a_time_is_none(text: str) -> None:
    assert _days(happened(text, date(2024, 11, 1))[1:]) == []


@pytest.mark.parametrize(("text", "days"), [  # said on Thursday 9 May 2024
    # a time said as a thing's date is its schedule, still to come
    ("My dentist appointment is on Friday", [("2024-05-10", "2024-05-10")]),
    ("the meeting's Tuesday at 3", [("2024-05-14", "2024-05-14")]),
    ("my flight is the 14th", [("2024-05-14", "2024-05-14")]),
    ("my flight's the 3rd, so I need to pack", [("2024-06-03", "2024-06-03")]),
    ("The exam is in March", [("2025-03-01", "2025-03-31")]),
    ("周五有个会", [("2024-05-10", "2024-05-10")]),
    ("3号有个面试", [("2024-06-03", "2024-06-03")]),
    # a day of the month after "was" at the end of a clause is a day gone by
    ("it was the 14th, a Sunday", [("2024-04-14", "2024-04-14")]),
    # and what tells of the past still does
    ("the meeting was on Friday", [("2024-05-03", "2024-05-03")]),
    ("I was born in March", [("2024-03-01", "2024-03-31")]),
])
def test_a_schedule_said_in_the_present(text: str, days: list[tuple[str, str]]) -> None:
    assert _days(happened(text, date(2024, 5, 9))[1:]) == days


@pytest.mark.parametrize("text", [
    "It's Friday, finally", "today is Monday", "I was the 2nd in line",
    "he was the 3rd to arrive", "she is on vacation", "that's in the fridge",
])
def test_a_present_tense_that_schedules_nothing(text: str) -> None:
    assert _days(happened(text, date(2024, 5, 9))[1:]) == []


@pytest.mark.parametrize(("text", "said", "days"), [
    # a day of a month counted from this one
    ("Tax docs are due on the 3rd of next month", date(2023, 2, 6), ("2023-03-03", "2023-03-03")),
    ("下个月15号之前要把材料交齐", date(2024, 2, 27), ("2024-03-15", "2024-03-15")),
    ("上月20日交的房租", date(2024, 12, 1), ("2024-11-20", "2024-11-20")),
    # a deadline is ahead; a weekday before its date only confirms it
    ("Rent's due on the 1st", date(2022, 2, 25), ("2022-03-01", "2022-03-01")),
    ("The party is Friday the 13th", date(2024, 12, 2), ("2024-12-13", "2024-12-13")),
    ("Thursday before last I had lunch with Sam", date(2025, 10, 21),
     ("2025-10-09", "2025-10-09")),
    # a year in Chinese numerals; a range whose second end names its month again
    ("二〇二一年十二月辞的职", date(2022, 3, 10), ("2021-12-01", "2021-12-31")),
    ("8月5日到8月9日我要去云南", date(2022, 7, 22), ("2022-08-05", "2022-08-09")),
    ("12月28日到1月3日在老家", date(2022, 12, 1), ("2022-12-28", "2023-01-03")),
    ("we're in Rome March 28 to April 2", date(2024, 1, 10), ("2024-03-28", "2024-04-02")),
    # halves of a month
    ("the second half of last month was busy", date(2026, 7, 12), ("2026-06-16", "2026-06-30")),
    ("8月上半月我要出差", date(2026, 7, 12), ("2026-08-01", "2026-08-15")),
    ("下个月下半月去旅游", date(2026, 7, 12), ("2026-08-16", "2026-08-31")),
    # decades
    ("I grew up in Ohio in the 90s", date(2026, 5, 9), ("1990-01-01", "1999-12-31")),
    ("back in the '70s my dad drove a truck", date(2026, 5, 9), ("1970-01-01", "1979-12-31")),
    ("the 20s were a blur", date(2026, 5, 9), ("2020-01-01", "2029-12-31")),
    ("we lived in Shanghai in the nineties", date(2026, 5, 9), ("1990-01-01", "1999-12-31")),
    ("上世纪80年代我爸下海了", date(2026, 5, 9), ("1980-01-01", "1989-12-31")),
    ("2010年代我在北京", date(2026, 5, 9), ("2010-01-01", "2019-12-31")),
])
def test_days_of_counted_months_deadlines_and_ranges(text: str, said: date,
                                                     days: tuple[str, str]) -> None:
    assert _days(happened(text, said)[1:]) == [days]


def test_a_question_about_a_day_of_next_month() -> None:
    assert _days(asked("下个月5号我有什么事吗", date(2024, 12, 1))) == [
        ("2025-01-05", "2025-01-05")]
    assert _days(asked("what did I do on the 3rd of last month?", date(2024, 12, 4))) == [
        ("2024-11-03", "2024-11-03")]


@pytest.mark.parametrize(("text", "days"), [  # said on Wednesday 15 May 2024
    # a possessive is no "is": the past stays past
    ("I met Tom at Joe's on Monday", [("2024-05-13", "2024-05-13")]),
    ("We had dinner at Mom's on Sunday", [("2024-05-12", "2024-05-12")]),
    ("I went to Trader Joe's in March and bought wine", [("2024-03-01", "2024-03-31")]),
    # nor an ordinal before a noun, nor a schedule in a clause that tells of the past
    ("My daughter is in the 3rd grade and she had a test on Monday",
     [("2024-05-13", "2024-05-13")]),
    ("The meeting room we used on Monday is on the 2nd floor", [("2024-05-13", "2024-05-13")]),
    ("周六有个朋友来找我了", [("2024-05-11", "2024-05-11")]),
    ("3号有个包裹寄到了", [("2024-05-03", "2024-05-03")]),
    ("我周三请假了，在家休息", [("2024-05-08", "2024-05-08")]),
    # "until" may be over, and a deadline told in the past is
    ("I was in Paris until the 10th", [("2024-05-10", "2024-05-10")]),
    ("The rent was due on the 1st and I paid it late", [("2024-05-01", "2024-05-01")]),
    # the weekday of "Friday the 13th" picks the month
    ("The party is on Friday the 13th", [("2024-09-13", "2024-09-13")]),
    ("we met on Monday the 6th", [("2024-05-06", "2024-05-06")]),
    ("My favourite day is Sunday", []),
    # an age or a temperature is no decade
    ("in her 30s she moved to Lyon", []),
    ("it was in the 40s this morning, so cold", []),
])
def test_what_a_review_of_the_schedule_forms_found(text: str,
                                                   days: list[tuple[str, str]]) -> None:
    assert _days(happened(text, date(2024, 5, 15))[1:]) == days


@pytest.mark.parametrize(("text", "days"), [  # said on Sunday 15 December 2024
    # one rule for what lies ahead, for a month alone as for a day alone: a plan, or a
    # deadline ("due", "until", 到期) in a clause that tells no past
    ("I was in Lyon until October 5th", [("2024-10-05", "2024-10-05")]),
    ("We stayed with my parents until the 10th", [("2024-12-10", "2024-12-10")]),
    ("I'm in Lyon until January 5th", [("2025-01-05", "2025-01-05")]),
    ("I'm away till the 10th", [("2025-01-10", "2025-01-10")]),
    ("The library books are due on the 3rd", [("2025-01-03", "2025-01-03")]),
    ("The essay was due on the 3rd", [("2024-12-03", "2024-12-03")]),
    ("房租5号到期", [("2025-01-05", "2025-01-05")]),
    ("房租5号到期了", [("2024-12-05", "2024-12-05")]),
])
def test_a_deadline_lies_ahead_unless_told_in_the_past(text: str,
                                                       days: list[tuple[str, str]]) -> None:
    assert _days(happened(text, date(2024, 12, 15))[1:]) == days


@pytest.mark.parametrize("said", [date(9999, 12, 31), date(1, 1, 1)])
def test_a_time_at_the_calendars_edge_is_no_error(said: date) -> None:
    for text in ("过几天再说", "十一期间", "周末我去了", "明年春节", "Q4 next year"):
        assert happened(text, said)[0] == Span(said, said)
        assert isinstance(asked(text, said), list)


@pytest.mark.parametrize(("text", "days"), [
    ("the movers come the day after tomorrow", [("2024-05-11", "2024-05-11")]),
    ("we'll be in rome mid october", [("2024-10-11", "2024-10-20")]),
    ("her recital is on sept 14", [("2024-09-14", "2024-09-14")]),
    ("around this time last year I was job hunting", [("2023-04-24", "2023-05-24")]),
    ("去年的这个时候我还在读研", [("2023-04-24", "2023-05-24")]),
    ("昨儿我去了趟医院", [("2024-05-08", "2024-05-08")]),
    ("明儿我要早起", [("2024-05-10", "2024-05-10")]),
    ("前些日子我换了份工作", [("2024-05-03", "2024-05-09")]),  # seven days, today the last
    ("I'm staying with my aunt for the summer", [("2024-06-01", "2024-08-31")]),
    # a whole year that holds what else is said is no more than that
    ("Halloween at my brother's this year, he's going all out", [("2024-10-31", "2024-10-31")]),
    ("今年三月我去了日本", [("2024-03-01", "2024-03-31")]),
])
def test_forms_a_second_blind_set_showed_unread(text: str, days: list[tuple[str, str]]) -> None:
    assert _days(happened(text, date(2024, 5, 9))[1:]) == days


@pytest.mark.parametrize("text", [
    "《后天》这部电影我看了三遍", "我最喜欢的歌是《明天会更好》", "这些年我学会了很多",
    "the march of the penguins is a good film",
])
def test_a_title_or_a_word_is_no_time(text: str) -> None:
    assert _days(happened(text, date(2024, 5, 9))[1:]) == []


@pytest.mark.parametrize(("text", "said", "days"), [
    ("we're away from the 12th to the 16th of next month", date(2024, 5, 9),
     [("2024-06-12", "2024-06-16")]),
    ("I was in Lisbon March 3-7", date(2024, 5, 9), [("2024-03-03", "2024-03-07")]),
    ("from June 10th to 14th, 2023 we were in Oslo", date(2024, 5, 9),
     [("2023-06-10", "2023-06-14")]),
    ("下个月12号到16号我在杭州出差", date(2024, 5, 9), [("2024-06-12", "2024-06-16")]),
    ("2023年5月1日至5日我们去了云南", date(2024, 5, 9), [("2023-05-01", "2023-05-05")]),
    ("我20号到25号要去出差", date(2024, 5, 9), [("2024-05-20", "2024-05-25")]),
])
def test_a_range_of_days_is_read_whole(text: str, said: date,
                                       days: list[tuple[str, str]]) -> None:
    assert _days(happened(text, said)[1:]) == days


@pytest.mark.parametrize("text", [
    "三到五日内完成", "坐1-2号线去公司", "we march 3-7 miles a day", "the score was 3-7",
    "from the 28th to the 2nd",
])
def test_what_is_no_range_of_days(text: str) -> None:
    assert _days(happened(text, date(2024, 5, 9))[1:]) == []


@pytest.mark.parametrize(("text", "days"), [  # said on Wednesday 15 May 2024
    ("I moved on 2024/3/5", [("2024-03-05", "2024-03-05")]),
    ("we moved in 2024.03.05", [("2024-03-05", "2024-03-05")]),
    ("I moved on 2024-3-5", [("2024-03-05", "2024-03-05")]),
    ("my visa expired 15.03.2024", [("2024-03-15", "2024-03-15")]),  # day first after a dot
    ("the lease ran out 04.03.2024", [("2024-03-04", "2024-03-04")]),
    ("I signed it on 3/4/2024", [("2024-03-04", "2024-03-04")]),  # month first after a slash
    ("I signed it on 15/3/2024", [("2024-03-15", "2024-03-15")]),  # unless that is no date
    ("it was due 3/15/24", [("2024-03-15", "2024-03-15")]),
    ("we met on 3/4", [("2024-03-04", "2024-03-04")]),
    ("I got back on 15/3", [("2024-03-15", "2024-03-15")]),
    ("我在4/20去了医院", [("2024-04-20", "2024-04-20")]),
    # no date: a fraction, a score, a version, an address, a time, 24/7
    ("I ate 3/4 of the cake", []),
    ("I'd rate it 4/5", []),
    ("三分之一，也就是1/3的人都去了", []),
    ("we upgraded to version 1.2.3", []),
    ("my router is at 192.168.1.1", []),
    ("the shop is open 24/7", []),
    ("we won 2-1 at 3:15", []),
    ("the build 1.5.24 broke", []),
])
def test_dates_in_figures(text: str, days: list[tuple[str, str]]) -> None:
    assert _days(happened(text, date(2024, 5, 15))[1:]) == days


def test_a_date_in_figures_in_a_question() -> None:
    assert _days(asked("what did I do on 2023/7/14?", date(2024, 5, 15))) == [
        ("2023-07-14", "2023-07-14")]
    (span,) = asked("what did I do on 7/14?", date(2024, 5, 15))
    assert span.months == frozenset({7}) and span.days == (14, 14)


@pytest.mark.parametrize(("text", "said", "days"), [
    # counted forward, counted weekdays, a week from a day
    ("I'll be in Seoul in three days", date(2026, 3, 6), [("2026-03-09", "2026-03-09")]),
    ("in 3 days we hiked 40 miles", date(2026, 3, 6), []),  # how long, in the past
    ("the baby is 3 months old", date(2026, 3, 6), []),
    ("started the new job two Mondays ago", date(2025, 9, 5), [("2025-08-25", "2025-08-25")]),
    ("my sister's party is a week from Friday", date(2024, 5, 21),
     [("2024-05-31", "2024-05-31")]),
    ("we fly out two weeks from tomorrow", date(2024, 5, 21), [("2024-06-05", "2024-06-05")]),
    ("三个礼拜前把车卖了", date(2025, 2, 22), [("2025-01-27", "2025-02-02")]),
    # the very day a year back, beside "this time last year" (a month around it)
    ("去年的今天我们刚领证", date(2026, 5, 20), [("2025-05-20", "2025-05-20")]),
    ("a year ago today I got married", date(2026, 5, 20), [("2025-05-20", "2025-05-20")]),
    ("this time last year I was in Rome", date(2026, 5, 20), [("2025-05-05", "2025-06-04")]),
    # two figures of a year after an apostrophe, not a decade
    ("we closed on the house Mar 5th '24", date(2025, 3, 18), [("2024-03-05", "2024-03-05")]),
    ("I was born in '92", date(2025, 8, 22), [("1992-01-01", "1992-12-31")]),
    ("back in the '70s we had no phones", date(2025, 8, 22), [("1970-01-01", "1979-12-31")]),
    # a month in lower case after late / mid / the end of; not the verb
    ("the end of march was rough", date(2025, 10, 21), [("2025-03-21", "2025-03-31")]),
    ("too late may I add", date(2025, 10, 21), []),
    # a dotted day in Chinese where a clause starts, before Chinese that is no measure
    ("在3.15那天投诉了", date(2023, 6, 15), [("2023-03-15", "2023-03-15")]),
    ("涨了3.5个点", date(2023, 6, 15), []),
    ("版本2.1发布了", date(2023, 6, 15), []),
    ("花了5.20元", date(2023, 6, 15), []),
    ("清明回老家扫墓", date(2026, 3, 20), [("2026-04-05", "2026-04-05")]),
    ("看了清明上河图", date(2026, 3, 20), []),
])
def test_counted_days_short_years_and_dotted_days(text: str, said: date,
                                                  days: list[tuple[str, str]]) -> None:
    assert _days(happened(text, said)[1:]) == days


def test_counted_weekdays_and_a_lower_case_month_in_a_question() -> None:
    assert _days(asked("what did i do two saturdays ago", date(2024, 11, 15))) == [
        ("2024-11-02", "2024-11-02")]
    (span,) = asked("what was i doing in late august?", date(2025, 10, 21))
    assert span.months == frozenset({8}) and span.days == (21, 31)


def test_a_date_in_figures_said_as_a_schedule_lies_ahead() -> None:
    said = date(2022, 11, 5)
    assert _days(happened("my flight to Lisbon is on 3/15!!", said)[1:]) == [
        ("2023-03-15", "2023-03-15")]
    assert _days(happened("my flight to Lisbon was on 3/15", said)[1:]) == [
        ("2022-03-15", "2022-03-15")]


def test_a_decade_in_a_question_counts_from_the_day_asked() -> None:
    # asked as of 2015, "the 20s" is the 1920s; asked today, the 2020s
    assert _days(asked("what did I do in the 20s?", date(2015, 6, 1))) == [
        ("1920-01-01", "1929-12-31")]
    assert _days(asked("what did I do in the 20s?", date(2026, 6, 1))) == [
        ("2020-01-01", "2029-12-31")]


@pytest.mark.parametrize("text", [  # said on Wednesday 15 May 2024: no time in any
    # "in <n> <unit>" as a span of time, not a day ahead
    "I haven't seen her in a year", "This is my first vacation in two years",
    "the worst storm in 10 years", "I usually finish a book in a week", "10 times in a week",
    "You can learn Python in a week",
    # decimals, prices, rates, versions and times of day in Chinese
    "9.9包邮", "汇率是7.2左右", "评分 9.2 很高", "股价从3.5涨到4.2了", "要等1.5小时",
    "Python 3.12发布了", "今天 3.30 开会", "8.30见",
    # fractions in recipes, discounts and Chinese
    "add 1 and 1/2 cups flour", "Add 1/2 cup of sugar and 1/4 tsp salt", "reduced by 1/3",
    "up to 1/2 off", "went from 2/3 to 3/4 full", "3/4时间都在睡觉", "1/3以上的人",
    # a possessive, a price, names
    "My mother's day started at 5am", "my father's day job", "花了520买了个包",
    "李清明是我同事", "她目光清明", "王重阳",
])
def test_what_a_review_of_the_new_forms_found_is_no_time(text: str) -> None:
    assert happened(text, date(2024, 5, 15))[1:] == []


@pytest.mark.parametrize(("text", "days"), [  # said on Wednesday 15 May 2024
    ("born 5/12/87", [("1987-05-12", "1987-05-12")]),  # two figures: the century of '87
    ("我们3.15那天去的", [("2024-03-15", "2024-03-15")]),
    ("I'm in Lyon until January", [("2025-01-01", "2025-01-31")]),
    ("from 5/1 to 5/3 I was away", [("2024-05-01", "2024-05-01"), ("2024-05-03", "2024-05-03")]),
])
def test_what_a_review_of_the_new_forms_found_unread(text: str,
                                                     days: list[tuple[str, str]]) -> None:
    assert _days(happened(text, date(2024, 5, 15))[1:]) == days


@pytest.mark.parametrize(("said", "days"), [
    (date(2024, 6, 3), ("2024-06-15", "2024-06-16")),  # a Monday: a week after the coming one
    (date(2026, 7, 1), ("2026-07-11", "2026-07-12")),  # a Wednesday
    (date(2026, 7, 4), ("2026-07-18", "2026-07-19")),  # a Saturday: after next weekend's
])
def test_the_weekend_after_next_is_a_week_after_the_next_to_begin(
        said: date, days: tuple[str, str]) -> None:
    assert _days(asked("what's on the weekend after next?", said)) == [days]


@pytest.mark.parametrize(("text", "days"), [  # said on Wednesday 15 May 2024
    # an apostrophe year after a day of May was an IndexError that no guard caught
    ("May 5th '24 was fun", [("2024-05-05", "2024-05-05")]),
    ("I'm here until May 5 '24", [("2024-05-05", "2024-05-05")]),
    ("we went hiking two sats ago", [("2024-05-04", "2024-05-04")]),  # short names too
    ("zero Saturdays ago", []),
    ("0 Saturdays ago", []),
])
def test_what_a_review_of_the_code_found(text: str, days: list[tuple[str, str]]) -> None:
    assert _days(happened(text, date(2024, 5, 15))[1:]) == days

"""Time in questions and memories: does a question ask when something happened, and does a
memory say when it did?

A "when did ..." question is answered by the turn that places the event in time ("I went
to a support group yesterday", "上周我们搬到了杭州"), not by a later turn that only talks
about it. Recall gives such time-anchored memories a bonus for questions that ask for a
time (`recall.w_when`); the message time kept with a memory turns the relative expression
into a date for whoever reads it.
"""

from __future__ import annotations

import re

_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day|mon|tue|wed|thu|fri|sat|sun"
_MONTH = (r"january|february|march|april|may|june|july|august|september|october|november|"
          r"december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_UNIT = r"days?|weeks?|weekends?|months?|years?|nights?|mornings?|evenings?|afternoons?"
_NUMBER = r"\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple of|several"

_EN_ANCHOR = re.compile(
    rf"\b(?:yesterday|today|tonight|this (?:morning|afternoon|evening|past)|"
    rf"(?:last|this|next|past|previous) (?:{_UNIT}|{_WEEKDAY}|{_MONTH}|summer|winter|spring|"
    rf"autumn|fall|christmas|time)|"
    rf"(?:{_NUMBER}) (?:{_UNIT}) (?:ago|back|before|earlier|later)|"
    rf"the other day|the day before|(?:earlier|later) (?:this|that) (?:{_UNIT})|"
    rf"(?:on|in|since|during|by) (?:the )?(?:{_WEEKDAY}|{_MONTH})|"
    rf"(?:{_MONTH}) \d{{1,2}}|\d{{1,2}} (?:{_MONTH})|(?:in|since|of) (?:19|20)\d\d)\b",
    re.IGNORECASE)
_ZH_ANCHOR = re.compile(
    r"昨天|昨晚|前天|今天|今早|今晚|刚才|上午|下午|明天|后天|"
    r"(?:上|这|本|下)(?:个)?(?:周|星期|礼拜|月)(?:末|[一二三四五六日天])?|"
    r"(?:去|今|前|明)年|"
    r"[\d一二两三四五六七八九十几]+(?:天|周|个星期|个月|年)(?:前|以前|之前|后|以后)|"
    r"(?:周|星期|礼拜)[一二三四五六日天末]|[\d一二三四五六七八九十]+月(?:[\d一二三四五六七八九十]+[日号])?|"
    r"(?:19|20)\d\d年")

_EN_WHEN = re.compile(
    r"\bwhen\b|\bwhat (?:year|month|day|date|time|week|weekend)\b|\bwhich (?:year|month|day|"
    r"date|week|weekend)\b|\bhow long ago\b|\bwhat time of (?:year|day)\b", re.IGNORECASE)
_ZH_WHEN = re.compile(r"什么时候|啥时候|何时|哪天|哪一天|哪年|哪一年|哪个月|几月|几号|"
                      r"多久以前|多久前|什么时间|哪个时候")


def asks_when(query: str) -> bool:
    """Whether `query` asks for the time of something (en, zh)."""
    return bool(_EN_WHEN.search(query) or _ZH_WHEN.search(query))


def anchored(text: str) -> bool:
    """Whether `text` places something in time: a relative expression ("yesterday",
    "last weekend", "two weeks ago", "上周", "三天前") or a date ("in 2022", "May 3")."""
    return bool(_EN_ANCHOR.search(text) or _ZH_ANCHOR.search(text))

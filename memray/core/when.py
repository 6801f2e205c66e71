"""Time in questions and memories: does a question ask when something happened, and does a
memory say when it did?

A "when did ..." question is answered by the turn that places the event in time ("I went
to a support group yesterday", "上周我们搬到了杭州"), not by a later turn that only talks
about it. Recall gives such time-anchored memories a bonus for questions that ask for a
time (`recall.w_when`); the message time kept with a memory turns the relative expression
into a date for whoever reads it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from datetime import time as clock_time
from functools import partial

from memray.core import festivals
from memray.hanzi import simplified

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
    rf"(?:{_MONTH}) \d{{1,2}}|\d{{1,2}} (?:{_MONTH})|\d{{1,2}}(?:st|nd|rd|th)? of (?:{_MONTH})|"
    rf"(?:in|since|of) (?:19|20)\d\d)\b",
    re.IGNORECASE)
# Chinese time words not inside other words: 过去年轻, 之前天天, 说明天气, 晚上月亮,
# 日本月饼, 一下周末 and 楼下周边 name no time.
_QU = "(?<![过回出进失])去"
_JIN = "(?<![如现当至古迄])今"  # not 如今年轻人, 至今年薪
_QIAN = "(?<![之以从提])前"
_MING = "(?<![说聪光文证表声透开发阐标简])明"
_SHANG = "(?<![晚早马路身楼网线桌天地爬赶跟])上"
_XIA = "(?<![一楼地天乡底以如留剩眼])下"
_BEN = "(?<![日书课账版资基根笔剧成样文])本"
_HOU = "(?<![然以之最落先背午])后"  # 然后天气: "then the weather"
_ZH_ANCHOR = re.compile(
    rf"昨天|昨晚|{_QIAN}天|今天|今早|今晚|刚才|上午|下午|{_MING}天|{_HOU}天|"
    rf"(?:{_SHANG}|这|{_BEN}|{_XIA})(?:个)?(?:周|星期|礼拜|月)(?:末|[一二三四五六日天])?|"
    rf"(?:{_QU}|今|{_QIAN}|{_MING})年|"
    r"[\d一二两三四五六七八九十几]{1,6}(?:天|周|个星期|个月|年)(?:前|以前|之前|后|以后)|"
    r"(?:周|星期|礼拜)[一二三四五六日天末]|[\d一二三四五六七八九十]{1,3}月(?:[\d一二三四五六七八九十]{1,3}[日号])?|"
    r"(?:19|20)\d\d年")

_EN_WHEN = re.compile(
    r"\bwhen\b|\bwhat (?:year|month|day|date|time|week|weekend)\b|\bwhich (?:year|month|day|"
    r"date|week|weekend)\b|\bhow long ago\b|\bwhat time of (?:year|day)\b", re.IGNORECASE)
_ZH_WHEN = re.compile(r"什么时候|啥时候|何时|哪天|哪一天|哪年|哪一年|哪个月|几月|几号|"
                      r"多久以前|多久前|什么时间|哪个时候")


def asks_when(query: str) -> bool:
    """Whether `query` asks for the time of something (en, zh)."""
    return bool(_EN_WHEN.search(query) or _ZH_WHEN.search(simplified(query)))


def anchored(text: str) -> bool:
    """Whether `text` places something in time: a relative expression ("yesterday",
    "last weekend", "two weeks ago", "上周", "三天前") or a date ("in 2022", "May 3")."""
    return bool(_EN_ANCHOR.search(text) or _ZH_ANCHOR.search(simplified(text)))


# -- dates: what a question names, what a memory's time expressions resolve to ------------

_MONTHS = {name: i for i, names in enumerate(
    (("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
     ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
     ("october", "oct"), ("november", "nov"), ("december", "dec")), 1) for name in names}
_SEASONS = {"spring": (3, 5), "summer": (6, 8), "autumn": (9, 11), "fall": (9, 11),
            "winter": (12, 14)}  # winter runs into the next year's February
_YEAR = r"(?:19|20)\d\d"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_MON = rf"({_MONTH})\.?"
_ZH_NUM = "〇零一二两三四五六七八九十"

_DATES_EN = re.compile(
    rf"\b{_MON} {_DAY},? ({_YEAR})\b|"  # October 13, 2023
    rf"\b{_DAY} {_MON},? ({_YEAR})\b|"  # 13 October 2023
    rf"\b({_YEAR})-(\d\d)-(\d\d)\b|"  # 2023-10-13
    rf"\b{_MON},? ({_YEAR})\b|"  # October 2023
    rf"\b(spring|summer|autumn|fall|winter),? (?:of )?({_YEAR})\b|"  # summer 2021
    rf"\b(?:in|during|since|of|by) ({_YEAR})\b|"  # in 2023
    rf"\b(?:in|during|since|by|on|around|until|till) (?:the )?(?:{_DAY} )?{_MON}\b"
    rf"(?![ ,]*\d)|"
    rf"\bthe {_DAY} of {_MON}(?:,? ({_YEAR}))?\b",  # the 5th of May(, 2023)
    re.IGNORECASE)
# 6月初 / 上旬 (days 1-10), 6月中 / 中旬 (11-20), 6月底 / 末 / 下旬 (21 to the end), 中下旬,
# 上中旬; not 6月初三 (a day) or 6月初中毕业, and 中 only before a pronoun, 的 or no word
# (6月中我们去了…; 6月中考, 6月中美会谈, 7月中暑, 6月中午 are no third)
_ZH_THIRD = (r"上半月|下半月|上中旬|中下旬|上旬|中旬|下旬|初(?![一二三四五六七八九十中])|底|末|"
             r"中(?![\u3400-\u9fff])|中(?=[的我你他她咱])")
_DATES_ZH = re.compile(
    rf"({_YEAR})年(?!的?[春夏秋冬][天季])(?:([\d{_ZH_NUM}]{{1,3}})月(?:([\d{_ZH_NUM}]{{1,3}})[日号]|({_ZH_THIRD}))?)?|"
    rf"([\d{_ZH_NUM}]{{1,3}})月(?:([\d{_ZH_NUM}]{{1,3}})[日号]|({_ZH_THIRD}))?")
# Dates in figures: the year first (2024/3/5, 2024.03.05, 2024-3-5), the year last
# (15.03.2027, 3/15/2025, 3/15/25: two figures only after slashes), no year ("on 3/15",
# 3/15去医院): not a version (v1.2.3), an address (192.168.1.1), a time or a score
_NOT_IN_FIGURES = r"(?<![\dA-Za-z./:-])"
_NUMERIC_DATES = re.compile(
    rf"{_NOT_IN_FIGURES}({_YEAR})([/.-])(\d{{1,2}})\2(\d{{1,2}})(?![\dA-Za-z/]|[.:-]\d)|"
    rf"{_NOT_IN_FIGURES}(\d{{1,2}})([/.-])(\d{{1,2}})\6({_YEAR}|\d\d)(?![\dA-Za-z/]|[.:-]\d)|"
    rf"{_NOT_IN_FIGURES}(\d{{1,2}})[/.](\d{{1,2}})(?![\dA-Za-z/]|[.:-]\d)")
# Where a day and a month without a year are a date, not a fraction or a score ("3/4 of
# the cake", "rated 4/5", 1/3的人): after a word that leads to a day ("on 3/15"; a common
# fraction, 1/2 to 3/4, only after on / until / since / due: not "reduced by 1/3"), after
# and / to / - only where a date in figures comes just before ("from 5/1 to 5/3"; not "1
# and 1/2 cups"), or in Chinese before a word that follows a day (3/15那天, 4/20去了医院;
# not 3/4时间, 7.2左右, 9.9包邮, 3.5以上) and not after a Latin word ("Python 3.12发布了")
_BEFORE_FIGURES = re.compile(r"\b(?:on|by|until|till|til|thru|through|from|since|before|after|"
                             r"due|starting)\s*$", re.IGNORECASE)
_BEFORE_FRACTION = re.compile(r"\b(?:on|until|till|til|thru|through|since|due|starting)\s*$",
                              re.IGNORECASE)
_AFTER_FIGURES_OF_A_DATE = re.compile(r"\d{1,2}/\d{1,2}\s*(?:and|to|-|through|thru)\s*$",
                                      re.IGNORECASE)
_NOT_AFTER_FIGURES_EN = re.compile(r"\s*(?:of|off|way|full|cups?|tsp|tbsp|in\b|inch|lbs?|oz|"
                                   r"kg|miles?|km|hours?|hrs?|mins?|minutes?|%|pounds?)",
                                   re.IGNORECASE)
_LATIN_BEFORE = re.compile(r"[A-Za-z\d]\s*$")
_AFTER_FIGURES_ZH = re.compile(r" ?(?:那天|当天|那日|号|上午|下午|晚上|早上|中午|凌晨|去|回|出发|"
                               r"放假|开始|之前|之后|的时候|要|买|我|我们|他|她|和|跟)")
# A year in two figures after an apostrophe: "born in '92", "since '19", "Mar 5th '24"
# (not the decade "the '70s")
_SHORT_YEAR_EN = re.compile(
    rf"\b(?:{_MON} {_DAY},? |(?:in|during|since|of|by|from|until|till) )['\u2019](\d\d)\b"
    r"(?!['\u2019]?s\b)", re.IGNORECASE)
# What every English date names: a number or a month (a prefix of its name)
_MAY_NAME_A_DATE = re.compile(r"\d|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)",
                              re.IGNORECASE)
# "mid-July", "early June 2023", "the end of June"; "July 4th", "on May 5" (no year)
_MONTH_PART_NAMED_EN = re.compile(
    rf"\b(?:(?:the )?(beginning|start|middle|end|first half|1st half|second half|2nd half) "
    rf"of |(early|mid|late)[- ]){_MON}"
    rf"(?:,? ({_YEAR}))?\b|"
    rf"\b{_MON} {_DAY}\b(?![ ,]*\d)(?![:.]?\d)", re.IGNORECASE)


@dataclass(frozen=True)
class Span:
    """Days from `lo` to `hi`, both included; with `months` instead (a month named without
    its year: "in June"), those months of any year, and of them only the days of the month
    `days` holds ("mid-July": 11-20, "July 4th": 4-4; 31 stands for the month's last).
    `back`: counted back to the day it was said or asked ("the past week", 最近三天), so it
    looks at what is over."""

    lo: date
    hi: date
    months: frozenset[int] = frozenset()
    back: bool = False
    days: tuple[int, int] = (1, 31)

    def meets(self, other: Span) -> bool:
        if self.months or other.months:
            if self.months and other.months:
                return bool(self.months & other.months) and (
                    self.days[0] <= other.days[1] and other.days[0] <= self.days[1])
            yearly, span = (self, other) if self.months else (other, self)
            return yearly._meets_dates(span)
        return self.lo <= other.hi and other.lo <= self.hi

    def _meets_dates(self, span: Span) -> bool:
        """Whether a month of any year (this span) holds a day of the dated `span`."""
        if self.days == (1, 31):
            return bool(self.months & span.month_set())
        if (span.hi - span.lo).days >= 366 * 8:  # 8 years hold every day of every month
            return True
        return any(lo <= span.hi and span.lo <= hi
                   for lo, hi in self._in_years(range(span.lo.year, span.hi.year + 1)))

    def _in_years(self, years: range) -> list[tuple[date, date]]:
        """This span's days in each of `years` (a month of any year only)."""
        out = []
        for y in years:
            for m in sorted(self.months):
                last = _month_span(y, m).hi.day
                if self.days[0] <= last:
                    out.append((date(y, m, self.days[0]), date(y, m, min(self.days[1], last))))
        return out

    def width(self) -> int:
        """Days between the first and the last (31 a month of any year)."""
        if self.months:
            return min(31, self.days[1] - self.days[0] + 1) * len(self.months) - 1
        return (self.hi - self.lo).days

    def over_by(self, day: date) -> bool:
        """Whether the span ended before `day` (a month of any year: unless it holds it;
        a span counted back to `day`: it looks at what is over)."""
        if self.months:
            return not (day.month in self.months and self.days[0] <= day.day <= self.days[1])
        return self.hi < day or (self.back and self.lo < day)

    def bounds(self, zone: tzinfo, years: range) -> list[tuple[float, float]]:
        """The span as epoch seconds, each range from the start of its first day to the
        start of the day after its last, days read in `zone`; a month of any year, that
        month (its `days`) in each of `years`."""
        if not self.months:
            return [(_midnight(self.lo, zone), _midnight(self.hi + timedelta(days=1), zone))]
        return [(_midnight(lo, zone), _midnight(hi + timedelta(days=1), zone))
                for lo, hi in self._in_years(years)]

    def month_set(self) -> frozenset[int]:
        """The calendar months the span touches (all twelve from a year on)."""
        if (self.hi - self.lo).days >= 365:
            return frozenset(range(1, 13))
        out, y, m = set(), self.lo.year, self.lo.month
        while (y, m) <= (self.hi.year, self.hi.month):
            out.add(m)
            y, m = (y + 1, 1) if m == 12 else (y, m + 1)
        return frozenset(out)


def _midnight(day: date, zone: tzinfo) -> float:
    return datetime.combine(day, clock_time(), zone).timestamp()


def named_dates(text: str, said: date | None = None, *,
                feasts: list[festivals.Named] | None = None,
                asked_on: date | None = None) -> list[Span]:
    """The dates `text` names outright: "October 13, 2023", "in 2023", "summer 2021",
    "2023年5月", "in June" (no year: for a text said on `said`, see `_year_of`; else of
    any year). A decade or a year without its century ("the 20s", "in '21") is the latest
    begun by `said`, else by `asked_on` (a question's day: the search's `as_of`), else by
    today. A relative expression ("last week") needs a moment to count from: see
    `happened`.
    The year of a festival (2023年春节) is that festival's, not the whole year (unless
    the festival's table does not reach that year)."""
    text = simplified(text)
    taken = [f.span for f in (festivals.named(text) if feasts is None else feasts)
             if f.year is None or festivals.when(f.name, f.year)]
    out: list[Span] = []
    taken += [m.span() for m in _fixed_in_month(text)]  # read with the day: `_relative`
    year = _year_of(text, said)
    for m in _year_parts(text):  # "the end of 2023", 2023年底; not also all of 2023
        if _written_year(m) and (span := _year_part(m, said, year=year)):
            out.append(span)
        taken.append(m.span())
    now = said or asked_on
    _read_into(out, taken, _NUMERIC_DATES, text, lambda m: _numeric_date(m, year, now))
    _read_into(out, taken, _SHORT_YEAR_EN, text, lambda m: _short_year(m, now))
    if _MAY_NAME_A_DATE.search(text):  # most texts hold no digit and no month: ~40 us less
        for m in _find(_MONTH_PART_NAMED_EN, text):
            if not _inside_any(m, taken) and (span := _en_month_day(m, year)):
                out.append(span)
                taken.append(m.span())
        out += [span for m in _DATES_EN.finditer(text)
                if not _inside_any(m, taken) and (span := _en_date(m, year))]
    # before 1990年代 reads as the year 1990
    _read_into(out, taken, _DECADE, text, lambda m: _decade(m, now))
    out += [span for m in _find(_DATES_ZH, text)
            if not _inside_any(m, taken) and (span := _zh_date(m, year))]
    return out


def _read_into(out: list[Span], taken: list[tuple[int, int]], pattern: re.Pattern[str],
               text: str, read: Callable[[re.Match[str]], Span | None]) -> None:
    """What `read` makes of each match of `pattern`, into `out`; where it read a time,
    that stretch of `text` is `taken` for the patterns after."""
    for m in _find(pattern, text):
        if span := read(m):
            out.append(span)
            taken.append(m.span())


def _decade(m: re.Match[str], said: date | None) -> Span | None:
    """"the 1990s", "the 90s", "the nineties", 九十年代, 上世纪80年代: ten years. Without
    its century, the latest such decade begun by the day said (today for a question);
    "in the 40s" in a text about temperature is no decade."""
    century, tens4, tens2, word, zh_century, tens_zh, tens_hanzi = m.groups()
    if century or zh_century:
        start = int(century or zh_century) * 100 + int(tens4 or tens_zh) * 10
    else:
        if _TEMPERATURE.search(m.string):
            return None
        tens = (int(tens2 or tens_zh) if (tens2 or tens_zh)
                else _DECADE_WORDS.get((word or "").lower()) or _zh_int(tens_hanzi or ""))
        if tens is None:
            return None
        if "世纪" in m.group():  # 上世纪: the 1900s
            start = 1900 + tens * 10
        else:
            now = (said or date.today()).year
            start = 2000 + tens * 10 if 2000 + tens * 10 <= now else 1900 + tens * 10
    return Span(date(start, 1, 1), date(start + 9, 12, 31))


_DECADE = re.compile(
    r"\bthe (?:(19|20)(\d)0s|['\u2019]?(\d)0['\u2019]?s|(twenties|thirties|forties|fifties|"
    r"sixties|seventies|eighties|nineties))\b|"
    r"(?:上个?世纪|(19|20))?(?:(\d)0|([一二三四五六七八九])十)年代", re.IGNORECASE)
_DECADE_WORDS = {w: i for i, w in enumerate(
    ("", "", "twenties", "thirties", "forties", "fifties", "sixties", "seventies", "eighties",
     "nineties")) if w}
# Where "the 40s" is a temperature
_TEMPERATURE = re.compile(r"\b(?:degrees?|temps?|temperatures?|weather|hot|cold|warm|cool|"
                          r"highs?|lows?|fahrenheit|celsius)\b|°|度|气温|温度", re.IGNORECASE)


def _written_year(m: re.Match[str]) -> bool:
    """Whether a part of a year names its year ("early 2024", 2023年底, Q3 2024)."""
    relative = m.re in (_QUARTER_EN, _QUARTER_ZH) and m.group(1)
    return not relative and bool(_part_of(m)[3])


# Between a Chinese character and a Latin letter, where English words start and end in a
# text that mixes the two (我last week去了IKEA, 我们Q4的目标): Python's \b sees none, 我
# being a word character too. Not between a digit and Chinese: 2023年, 3号 are dates. The
# mark is no space, so no Chinese clause seems to start there (DDL前两天 is no period).
_MIXED = re.compile(r"(?<=[\u3400-\u9fff])(?=[A-Za-z])|(?<=[A-Za-z])(?=[\u3400-\u9fff])|"
                    r"(?<=[A-Za-z]\d)(?=[\u3400-\u9fff])")
_LATIN = re.compile(r"[A-Za-z]")


def _spaced(text: str) -> str:
    """`text` with a mark (·) wherever a Chinese character meets a Latin letter, and in
    place of what a title holds: 《后天》, 《明天会更好》 are a film and a song; Chinese in
    Simplified characters (memray/hanzi.py)."""
    text = simplified(text)
    if "《" in text:
        text = _TITLE.sub(lambda m: "《" + "\u00b7" * (len(m.group()) - 2) + "》", text)
    if "〇" in text or "零" in text:  # 二〇二一年 is 2021年, one character each
        text = _ZH_YEAR_DIGITS.sub(lambda m: m.group().translate(_TO_DIGIT), text)
    if _CJK.search(text) and _LATIN.search(text):
        return _MIXED.sub("\u00b7", text)
    return text


_TITLE = re.compile(r"《[^《》]{1,60}》")
_ZH_YEAR_DIGITS = re.compile(r"[一二][〇零一二三四五六七八九]{3}(?=年)")
_TO_DIGIT = str.maketrans("〇零一二三四五六七八九", "00123456789")


def _narrowest(spans: list[Span]) -> list[Span]:
    """`spans` less a whole year that holds another of them: "Thanksgiving at our place
    this year" is about Thanksgiving, and a question about May meets what it says of May
    only."""
    def whole_year(s: Span) -> bool:
        return not s.months and s.lo == date(s.lo.year, 1, 1) and s.hi == date(s.lo.year, 12, 31)

    return [y for y in spans if not (whole_year(y) and any(
        s is not y and not s.months and s != y and y.lo <= s.lo and s.hi <= y.hi
        for s in spans))]


def _inside_any(m: re.Match[str], taken: list[tuple[int, int]]) -> bool:
    """Whether `m` overlaps one of the `taken` stretches of its text."""
    return any(a < m.end() and m.start() < b for a, b in taken)


def happened(text: str, at: datetime | date) -> list[Span]:
    """The days a memory said at `at` is about: that day, the days its relative
    expressions count back or forward to ("yesterday", "two weeks ago", "last month",
    "上周", "三天前"), the dates it names, and in what tells of the past, the last such
    weekday before `at` for a weekday alone ("I went climbing on Thursday")."""
    return list(_happened_on(text, _day_of(at)))


# A memory's days depend only on its text and the day it was said, and every dated search
# reads them for each candidate (~0.1 ms each): the same memories come back search after
# search. 16k entries of everyday length hold a few MB (tens at the 2,000-character cap).
@functools.lru_cache(maxsize=16_384)
def _happened_on(text: str, day: date) -> tuple[Span, ...]:
    text = _spaced(text)
    try:
        feasts = festivals.named(text)
        placed = _narrowest(_relative(text, day, feasts) + named_dates(text, day, feasts=feasts)
                            + _festivals(text, day, feasts))
        return (Span(day, day), *placed, *([] if placed else _weekdays(text, day)))
    except (OverflowError, ValueError):  # said at the calendar's edge: a text is no error
        return (Span(day, day),)


def asked(question: str, at: datetime | date) -> list[Span]:
    """The days a question asked at `at` is about: the dates it names, and the days its
    relative expressions count to from `at` ("what did I do last week", "yesterday",
    "上个月我说了什么", "三天前"). Unlike `happened`, not the day it is asked: a question
    about the present ("what should I cook tonight") asks about no day in particular.
    A weekday alone is the last one before the day asked in a question about the past
    ("what did I do on Monday?", 周一我干了什么) and the next one in any other English one
    ("what do I have on Monday?")."""
    day, question = _day_of(at), _spaced(question)
    try:
        feasts = festivals.named(question)
        placed = _narrowest(named_dates(question, feasts=feasts, asked_on=day)
                            + _relative(question, day, feasts) + _festivals(question, day, feasts))
        # "last week on Friday", "Monday, March 3": the weekday is in a time already placed
        return placed or _weekdays(question, day, ahead=True) or _earlier_today(question, day)
    except (OverflowError, ValueError):  # asked at the calendar's edge
        return []


# Today, in a question: "where did I run this morning?", 今天早上我吃了什么
_TODAY = re.compile(r"\b(?:today|this (?:morning|afternoon|evening)|tonight)\b|今天|今早|今晚",
                    re.IGNORECASE)


def _earlier_today(question: str, day: date) -> list[Span]:
    """The day asked, for a question about what happened earlier that day (a clause with
    "today", "this morning", 今天 that tells of the past; not "what should I cook
    tonight?")."""
    if not _TODAY.search(question):
        return []
    clauses = _CLAUSE.split(question)
    return [Span(day, day)] if any(_TODAY.search(c) and _tells_past(c) for c in clauses) else []


def _festivals(text: str, day: date, feasts: list[festivals.Named]) -> list[Span]:
    """The festivals `text` names (core/festivals.py) as the days they held or will hold:
    last / 去年 and next / 明年 as said; alone, in what tells of the past the latest one
    begun by `day`, in a plan the next one not over ("at Christmas", 春节), in neither the
    nearest (除夕那天我在家陪爸妈, said four days after it)."""
    past = bool(feasts) and _tells_past(text)
    out = []
    for name, step, by_year, year, _ in feasts:
        if year is not None:
            out += [Span(*days)] if (days := festivals.when(name, year)) else []
            continue
        held = {y: Span(*days) for y in range(day.year - 2, day.year + 3)
                if (days := festivals.when(name, y))}
        if step == 0 or (by_year and step is not None):
            found = [held[y]] if (y := day.year + (step or 0)) in held else []
        elif step == -1 or (step is None and past):
            found = [s for s in held.values() if (s.hi < day if step else s.lo <= day)][-1:]
        elif step is None and not _tells_plan(text):
            found = sorted(held.values(), key=lambda s: _apart(s, day))[:1]
        else:
            found = [s for s in held.values() if (s.lo > day if step else s.hi >= day)][:1]
        out += found
    return out


def _apart(span: Span, day: date) -> int:
    """Days between `day` and the nearest day of `span` (0 inside it)."""
    return max((span.lo - day).days, (day - span.hi).days, 0)


def _weekdays(text: str, day: date, *, ahead: bool = False) -> list[Span]:
    """Each weekday named alone in a clause that tells of the past, the last one before
    `day` ("I went climbing on Thursday"); in one that tells of a plan, the next one after
    it ("on Friday I'm flying to Rome"); a weekend alone likewise ("over the weekend",
    我周末去滑雪了). A clause with neither names no day ("I have yoga on Monday" may be a
    habit), unless `ahead` (an English question: "what do I have on Monday?" asks of
    the next); a habit never does ("I usually swim on Monday", 周末我一般在家)."""
    if not (_weekdays_alone(text, plan=True) or _find(_WEEKEND_ALONE, text)):  # most name none
        return []
    out = []
    for clause in _CLAUSE.split(text):
        past = _tells_past(clause)
        told = past or _tells_plan(clause)
        # Chinese tells of the past without 了 too (我周三跟谁开的会): no next one there
        asks_ahead = ahead and not _HABIT.search(text) and not _CJK.search(clause)
        if _HABIT.search(clause) or not (told or asks_ahead):
            continue
        for weekday in _weekdays_alone(clause, plan=not past):
            d = _weekday_from(day, -1 if past else 1, weekday)
            out.append(Span(d, d))
        if _WEEKEND_ALONE.search(clause):  # the last one begun before `day`, or this one
            saturday = day + timedelta(days=5 - day.weekday())
            if past and saturday >= day:
                saturday -= timedelta(weeks=1)
            out.append(Span(saturday, saturday + timedelta(days=1)))
    return out


# Every time expression of a clause asks this of it again (a list of 500 dates: 500 times)
@functools.lru_cache(maxsize=1024)
def _holds(pattern: re.Pattern[str], text: str) -> bool:
    return pattern.search(text) is not None


def _tells_plan(text: str) -> bool:
    return _holds(_PLAN, text) or (_holds(_SCHEDULED, text) and not _holds(_PAST, text))


def _tells_ahead(clause: str) -> bool:
    """A plan, or a deadline not told in the past: "the rent is due on the 1st", "I'm in
    Lyon until January" (ahead), but "I was in Lyon until October 5th" (over)."""
    return _tells_plan(clause) or (_holds(_DEADLINE, clause) and not _tells_past(clause))


@functools.lru_cache(maxsize=1024)
def _tells_past(text: str) -> bool:
    """A past form and no mark of a plan, a wish or a reminder (要, 别, "I'll", "plan");
    "have got", a present passive or question ("is held", "is it closed?") and an
    arrangement ("I booked flights for August", 约了25号) tell no past."""
    if _tells_plan(text) or _ARRANGED.search(text):
        return False
    return bool(_PAST.search(_NOT_PAST.sub(" ", text)))


def _weekdays_alone(text: str, *, plan: bool = False) -> list[int]:
    """The weekdays `text` names without last/next/this (full English names only: "sun",
    "sat" and "wed" are words too), not as a habit ("on Mondays", 每周一). After "for"
    only in a `plan` ("what I planned for Saturday", "a table for Friday"): in the past,
    "tickets for Friday's concert" were bought before it."""
    not_before = _NOT_A_DAY_BEFORE_PLAN if plan else _NOT_A_DAY_BEFORE
    out = [_WEEKDAYS[m.group(1).lower()] for m in _WEEKDAY_EN.finditer(text)
           if not_before.search(text, max(0, m.start() - 8), m.start()) is None]
    return out + [_zh_weekday(m.group(1)) for m in _find(_WEEKDAY_ZH, text)]


def _zh_weekday(name: str) -> int:
    """Monday 0 to Sunday 6 from 一 ... 六, 日 or 天 (both Sunday)."""
    return min("一二三四五六日天".index(name), 6)


def _day_of(at: datetime | date) -> date:
    """The calendar day of `at` in its own zone (callers put question and memory times in
    one zone: `recall.timezone`), or `at` itself."""
    return at.date() if isinstance(at, datetime) else at


def today(at: datetime) -> date:
    """The day a question asked at `at` is asked on, in `at`'s zone."""
    return _day_of(at)


def about(asked: list[Span], said: list[Span]) -> bool:
    """Whether a memory is about a day a question asks about and about no wider a time:
    "this year" meets yesterday, but says nothing of what happened then."""
    return any(a.meets(s) and s.width() <= a.width() for a in asked for s in said)


def _relative(text: str, day: date, feasts: list[festivals.Named]) -> list[Span]:
    """The days the relative expressions of `text` count to from `day`; a period counted
    back ("the past two weeks") and a festival (去年春节) are read first, and what they
    hold ("weeks", 去年) is no more."""
    back = [*_find(_BACK_EN, text), *_find(_BACK_ZH, text)]
    earlier = _find(_EARLIER_EN, text)
    halves = _find(_HALF_EN, text)
    fixed = _fixed_in_month(text)
    ranged = [m.span() for m in fixed if m.re in (_RANGE_EN, _RANGE_ZH)]  # not its ends too
    parts = [m for m in (*_find(_MONTH_PART_EN, text), *_find(_MONTH_PART_ZH, text))
             if not _inside_any(m, ranged)]
    nths = [m for m in (*_find(_NTH_EN, text), *_find(_NTH_ZH, text))
            if not _inside_any(m, ranged)]
    years = _year_parts(text)
    soon = _find(_SOON_ZH, text)
    this_time = _find(_THIS_TIME, text)
    counted = [*_find(_WEEKDAYS_AGO_EN, text), *_find(_WEEKS_FROM_EN, text)]
    counted_spans = [c.span() for c in counted]
    counted += [m for m in _find(_IN_EN, text) if not _inside_any(m, counted_spans)]
    out = [span for m in back if (span := _safely(_back, m, day))]
    out += [span for m in counted if (span := _safely(_COUNTED_EN[m.re], m, day))]
    out += [span for m in fixed if (span := _safely(_YEAR_MONTH_OR_NTH[m.re], m, day))]
    out += [span for m in soon if (span := _safely(_soon, m, day))]
    out += [span for m in this_time if (span := _safely(_this_time_last_year, m, day))]
    out += [span for m in earlier if (span := _safely(_earlier, m, day))]
    out += [span for m in halves if (span := _safely(_half, m, day))]
    out += [span for m in parts if (span := _safely(_month_part, m, day))]
    out += [span for m in nths if (span := _safely(_nth, m, day))]
    year = _year_of(text, day)
    out += [span for m in years if not _written_year(m)
            and (span := _safely(partial(_year_part, year=year), m, day))]
    seasons = _find(_SEASON_ALONE, text)
    out += [span for m in seasons if (span := _safely(_season_alone, m, day))]
    # 去年春节 is last year's spring festival, not last year
    taken = ([m.span() for m in (*back, *earlier, *halves, *parts, *nths, *years, *seasons,
                                 *fixed, *soon, *this_time, *counted)]
             + [f.span for f in feasts])
    for pattern, read in ((_RELATIVE_EN, _en_relative), (_RELATIVE_ZH, _zh_relative),
                          (_BEFORE_LAST_EN, _before_last)):
        out += [span for m in _find(pattern, text)
                if not _inside_any(m, taken) and (span := _safely(read, m, day))]
    return out


@functools.lru_cache(maxsize=64)  # named_dates and _relative both read a text's
def _fixed_in_month(text: str) -> tuple[re.Match[str], ...]:
    """A month of a year counted from the day said (去年三月) and an nth weekday of a month
    ("the first weekend of May"): both need that day, so `_relative` reads them."""
    ranges = (*_find(_RANGE_EN, text), *_find(_RANGE_ZH, text))
    spans = [r.span() for r in ranges]
    days = [m for m in (*_find(_COUNTED_DAY_EN, text), *_find(_COUNTED_DAY_ZH, text))
            if not _inside_any(m, spans)]  # not a range's first day
    return (*ranges, *days, *_find(_YEAR_MONTH_ZH, text),
            *_find(_NTH_OF_MONTH_EN, text), *_find(_NTH_OF_MONTH_ZH, text))


def _safely(read: Callable[[re.Match[str], date], Span | None], m: re.Match[str],
            day: date) -> Span | None:
    """`read(m, day)`, or None for a time no calendar holds ("the past 10000 years",
    "99999999 days ago"): a text is never an error."""
    try:
        return read(m, day)
    except (OverflowError, ValueError):
        return None


def meets(asked: list[Span], said: list[Span]) -> bool:
    """Whether any day a question asks about is a day a memory is about."""
    return any(a.meets(s) for a in asked for s in said)


def _month_span(year: int, month: int) -> Span:
    first = date(year, month, 1)
    return Span(first, date(year + month // 12, month % 12 + 1, 1) - timedelta(days=1))


def _year_span(year: int) -> Span:
    return Span(date(year, 1, 1), date(year, 12, 31))


def _day(year: int, month: int, day: int) -> Span | None:
    try:
        d = date(year, month, day)
    except ValueError:
        return None
    return Span(d, d)


# thirds, then 上中旬 and 中下旬, then halves ("the first half of August", 下半月)
_THIRDS = ((1, 10), (11, 20), (21, 31), (1, 20), (11, 31), (1, 15), (16, 31))
YearOf = Callable[[int, int], "int | None"]  # (month, where it is named) -> its year


def _year_of(text: str, said: date | None) -> YearOf:
    """The year of a month `text` names without one, the text said on `said`: the year it
    was said, unless its clause tells of the past and the month is still to come then ("we
    went to Japan in August" said in June, "since October" said in January: last year's),
    or looks ahead (`_tells_ahead`) and the month is over ("I'm flying home in January"
    said in December, "the baby is due in mid-Jan": next year's). No day said (a question): None,
    any year."""
    if said is None:
        return lambda month, at: None

    def year_of(month: int, at: int) -> int:
        clause = _clause_at(text, at)
        aimed = _FOR.search(text, max(0, at - 8), at)  # "my goals for the second half"
        if month > said.month and not aimed and (_tells_past(clause) or _holds(_SINCE, clause)):
            return said.year - 1
        if month < said.month and _tells_ahead(clause):
            return said.year + 1
        return said.year
    return year_of


# What places a month named alone in the past or to come, beside _PAST and _PLAN
_SINCE = re.compile(r"\b(?:since|back in|last)\b", re.IGNORECASE)
_DEADLINE = re.compile(r"\b(?:due|until|till)\b|到期", re.IGNORECASE)
_FOR = re.compile(r"\bfor (?:the )?$", re.IGNORECASE)
_CLAUSE_OR_COLON = re.compile(r"[;,.!?\n，。；！？:：]")


def _clause_at(text: str, at: int) -> str:
    """The clause of `text` that holds position `at` (a colon ends one too: "Mum called:
    the operation is booked for August")."""
    starts = [m.end() for m in _CLAUSE_OR_COLON.finditer(text, 0, at)]
    end = _CLAUSE_OR_COLON.search(text, at)
    return text[starts[-1] if starts else 0:end.start() if end else len(text)]


def _in_month(year: int | None, month: int, days: tuple[int, int]) -> Span | None:
    """Days `days` of a month: of `year`, else of any year; None where no year has them
    (the 31st of June)."""
    if not (1 <= month <= 12 and 1 <= days[0] <= days[1] <= 31):
        return None
    if year is None:
        return (Span(date.min, date.min, frozenset({month}), days=days)
                if days[0] <= _month_span(2024, month).hi.day else None)
    last = _month_span(year, month).hi.day
    if days[0] > last:
        return None
    return Span(date(year, month, days[0]), date(year, month, min(days[1], last)))


_MONTHS_THAT_ARE_WORDS = frozenset({"may", "march", "mar", "august", "jan"})
_BEFORE_A_DAY = re.compile(r"\b(?:on|by|until|till|from|since|before|after|of)\s*$",
                           re.IGNORECASE)


def _written_as_a_month(name: str) -> bool:
    """Whether `name` can be the month as written: a name ("March", "MARCH") where it is
    also a word, any case otherwise ("oct")."""
    named = (name[:1].isupper() and name[1:].islower()) or (name.isupper() and len(name) > 3)
    return named or name.lower() not in _MONTHS_THAT_ARE_WORDS


def _reads_as_a_month(name: str, m: re.Match[str]) -> bool:
    """Whether `name` is the month, not a verb or an adjective: written as a name where it
    is also a word (not "we march 5 miles", "the august members", "too late may I add";
    "mid october", "aug 28" are months in any case), and May before a bare number only
    with "5th" or a word that leads to a date ("on May 5"; not "May 5 of us come?")."""
    if not _written_as_a_month(name):
        return False
    if name.lower() != "may" or m.group(5) is None or not m.group(6):
        return True
    ordinal = m.group(0)[-2:].lower() in ("st", "nd", "rd", "th")
    return ordinal or bool(_BEFORE_A_DAY.search(m.string, 0, m.start()))


def _en_month_day(m: re.Match[str], year: YearOf) -> Span | None:
    """A third of a named month ("mid-July", "the end of June 2023", "late august") or a
    day of one without its year ("July 4th"; not "may 5", the verb)."""
    part, early, name, named_year, day_name, day = m.groups()
    # after "late", "mid", "the end of" a word is the month in any case ("in late august"),
    # but for the verb ("too late may I add")
    if (day_name or name.lower() == "may") and not _reads_as_a_month(name or day_name, m):
        return None
    if day_name:
        month = _MONTHS[day_name.lower()]
        return _in_month(year(month, m.start()), month, (int(day), int(day)))
    third, month = _THIRDS[_PARTS[(part or early).lower()]], _MONTHS[name.lower()]
    return _in_month(int(named_year) if named_year else year(month, m.start()), month, third)


def _numeric_date(m: re.Match[str], year: YearOf, said: date | None) -> Span | None:
    """A date in figures. With the year last, the order is the one that makes a date
    (15/3/2024 is the 15th of March), else the writer's: month first after a slash (the US,
    China), day first after a dot or a hyphen (15.03.2027, 04-03-2024: most of Europe).
    Without a year only a slash (3/15, 15/3) or, in Chinese, a dot (3.15那天) is read,
    month first unless that is no date."""
    y_first, _, mm, dd, a, sep, b, y_last, na, nb = m.groups()
    if y_first:
        return _day(int(y_first), int(mm), int(dd))
    if y_last:
        if len(y_last) == 2 and sep != "/":
            return None
        month, day = _month_and_day(int(a), int(b), day_first=sep != "/")
        y = _century(int(y_last), said) if len(y_last) == 2 else int(y_last)
        return _day(y, month, day)
    if not _reads_as_figures_of_a_date(m):
        return None
    month, day = _month_and_day(int(na), int(nb), day_first=False)
    return _in_month(year(month, m.start()), month, (day, day)) if 1 <= month <= 12 else None


def _reads_as_figures_of_a_date(m: re.Match[str]) -> bool:
    """Whether figures without a year ("3/15", 3.15) are a date where they stand (only
    the few characters around them are read: a long text of figures stays linear)."""
    text, start, end = m.string, m.start(), m.end()
    window = max(0, start - 24)
    a, b = int(m.group(9)), int(m.group(10))
    zh = (_AFTER_FIGURES_ZH.match(text, end) is not None
          and _LATIN_BEFORE.search(text, window, start) is None)
    if "." in m.group():  # 3.5, 7.2: a decimal unless Chinese that follows a day follows
        return zh
    if zh:
        return True
    if _NOT_AFTER_FIGURES_EN.match(text, end):
        return False
    if _AFTER_FIGURES_OF_A_DATE.search(text, window, start):
        return True
    lead = _BEFORE_FRACTION if a < b <= 4 else _BEFORE_FIGURES
    return lead.search(text, window, start) is not None


def _century(yy: int, said: date | None) -> int:
    """A year of two figures: of this century unless that is over ten years after the day
    said ('92 is 1992)."""
    year = 2000 + yy
    return year - 100 if year > (said or date.today()).year + 10 else year


def _short_year(m: re.Match[str], said: date | None) -> Span | None:
    """'24, "Mar 5th '24": the year of `_century`."""
    name, day, yy = m.groups()
    year = _century(int(yy), said)
    if name is None:
        return _year_span(year)
    if not _written_as_a_month(name):
        return None
    return _day(year, _MONTHS[name.lower()], int(day))


def _month_and_day(a: int, b: int, *, day_first: bool) -> tuple[int, int]:
    if a > 12 or (day_first and b <= 12):
        return b, a
    return a, b


def _en_date(m: re.Match[str], year: YearOf) -> Span | None:
    g = m.groups()
    if g[0]:  # October 13, 2023
        return _day(int(g[2]), _MONTHS[g[0].lower()], int(g[1]))
    if g[3]:  # 13 October 2023
        return _day(int(g[5]), _MONTHS[g[4].lower()], int(g[3]))
    if g[6]:
        return _day(int(g[6]), int(g[7]), int(g[8]))
    if g[9]:  # October 2023
        return _month_span(int(g[10]), _MONTHS[g[9].lower()])
    if g[11]:  # summer 2021
        return _season_of(int(g[12]), g[11].lower())
    if g[13]:
        return _year_span(int(g[13]))
    # in June, on 3 May, the 5th of May(, 2023): without a year, the speaker's
    day, name, named_year = (g[16], g[17], g[18]) if g[16] else (g[14], g[15], None)
    month = _MONTHS[name.lower()]
    y = int(named_year) if named_year else year(month, m.start())
    if day:
        return _in_month(y, month, (int(day), int(day)))
    return Span(date.min, date.min, frozenset({month})) if y is None else _month_span(y, month)


_ZH_DIGITS = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"〇": 0, "两": 2}


def _zh_int(text: str) -> int | None:
    if text.isdigit():
        return int(text)
    digits = _ZH_DIGITS
    if "十" in text:
        tens, _, ones = text.partition("十")
        value = (digits.get(tens, 0) if tens else 1) * 10 + (digits.get(ones, 0) if ones else 0)
        return value if all(c in digits for c in tens + ones) else None
    return digits.get(text) if len(text) == 1 else None


def _zh_date(m: re.Match[str], year: YearOf) -> Span | None:
    y_text, month_text, day_text, part, month_only, day_only, part_only = m.groups()
    if y_text and not month_text:
        return _year_span(int(y_text))
    month = _zh_int(month_text or month_only)
    day_text = day_text or day_only
    part = part or part_only
    if month is None or not 1 <= month <= 12:
        return None
    y = int(y_text) if y_text else year(month, m.start())
    return _zh_days_of(y, month, day_text, part)


def _zh_days_of(y: int | None, month: int, day_text: str | None, part: str | None,
                ) -> Span | None:
    """A day (五号), a third (上旬, 底) or all of `month` of year `y` (None: of any year)."""
    if day_text:
        day = _zh_int(day_text)
        return None if day is None else _in_month(y, month, (day, day))
    if part:
        return _in_month(y, month, _THIRDS[_PARTS[part]])
    return Span(date.min, date.min, frozenset({month})) if y is None else _month_span(y, month)


def _zh_year_month(m: re.Match[str], day: date) -> Span | None:
    """去年三月, 明年3月5号, 今年六月底: a month of a year counted from `day`'s."""
    which, month_text, day_text, part = m.groups()
    month = _zh_int(month_text)
    if month is None or not 1 <= month <= 12:
        return None
    return _zh_days_of(day.year + _ZH_YEARS[which], month, day_text, part)


def _nth_of_month(m: re.Match[str], day: date) -> Span | None:
    """"the first weekend of May", "the last Friday in June 2024", 五月的第一个周末,
    6月最后一个周六: the year written, else as a month named alone (`_year_of`)."""
    en = m.re is _NTH_OF_MONTH_EN
    month: int | None
    if en:
        nth, what, month_text, y_text = m.groups()
        month = _MONTHS[month_text.lower()]
    else:
        y_text, month_text, nth, last, what = m.groups()
        nth, month = nth or last, _zh_int(month_text)
    if month is None or not 1 <= month <= 12:
        return None
    # its own "last" ("the last Friday in June") tells nothing of the tense
    rest = m.string[:m.start()] + " " * (m.end() - m.start()) + m.string[m.end():]
    year = int(y_text) if y_text else _year_of(rest, day)(month, m.start())
    n = -1 if nth.lower() in ("last", "最后一") else _ORDINALS[nth.lower()]
    weekend = what.lower() in ("weekend", "周末")
    weekday = 5 if weekend else (_WEEKDAYS[what.lower()] if en else
                                 _zh_weekday(what[-1]))
    found = festivals.nth_weekday(year or day.year, month, weekday, n)
    if found is None:
        return None
    return Span(found, found + timedelta(days=1 if weekend else 0))


def _step(which: str) -> int:
    """How many months or quarters last / next (上, 下) count from this one (this, 这, 本)."""
    return {"last": -1, "next": 1, "上": -1, "下": 1}.get(which.lower(), 0)


def _day_range(m: re.Match[str], day: date) -> Span | None:
    """Days `a` to `b` of one month: the month named (of its year written, else as a month
    named alone: `_year_of`), counted (next month, 下个月), else the one `_month_of` gives."""
    if m.re is _RANGE_EN:
        a1, b1, which, month1, year1, month2, a2, to_name, b2, year2 = m.groups()
        a, b, name, written = a1 or a2, b1 or b2, month1 or month2, year1 or year2
        if name and not _reads_as_a_month(name, m):
            return None
        month = _MONTHS[name.lower()] if name else None
        to_month = _MONTHS.get((to_name or "").lower())
        step = None if which is None else _step(which)
    else:
        written, which, month_text, a, to_text, b = m.groups()
        if not (month_text or which) and m.group(0).endswith("日"):  # 三到五日内: days
            return None
        month = _zh_int(month_text) if month_text else None
        to_month = _zh_int(to_text) if to_text else None
        step = None if which is None else _step(which)
    first, last = _zh_int(a), _zh_int(b)
    if to_month is not None and month is not None and to_month != month:
        return _months_range(m, day, written, (month, first), (to_month, last))
    if first is None or last is None or not 1 <= first < last <= 31:
        return None
    if month is not None:
        y = _range_year(m, day, written, month)
    else:
        counted = _shift(day, step if step is not None else _month_of(m, day, (first, last)),
                         "month").lo
        y, month = counted.year, counted.month
    lo, hi = _day(y, month, first), _day(y, month, last)
    return None if lo is None or hi is None else Span(lo.lo, hi.hi)


def _months_range(m: re.Match[str], day: date, written: str | None,
                  start: tuple[int, int | None], end: tuple[int, int | None]) -> Span | None:
    """"March 28 to April 3", 8月28日到9月3日: across the end of a month (into the next
    year where the second month comes first)."""
    (month, first), (to_month, last) = start, end
    if first is None or last is None or not 1 <= month <= 12 or not 1 <= to_month <= 12:
        return None
    y = _range_year(m, day, written, month)
    lo, hi = _day(y, month, first), _day(y + (to_month < month), to_month, last)
    return None if lo is None or hi is None or hi.lo < lo.lo else Span(lo.lo, hi.hi)


def _range_year(m: re.Match[str], day: date, written: str | None, month: int) -> int:
    """The year of a range's named first month: written out, else as a month named alone."""
    return int(written) if written else (_year_of(m.string, day)(month, m.start()) or day.year)


def _counted_day(m: re.Match[str], day: date) -> Span | None:
    """"the 3rd of next month", 下个月5号: that day of the month counted from `day`'s."""
    n, which = m.groups() if m.re is _COUNTED_DAY_EN else m.groups()[::-1]
    month = _shift(day, _step(which), "month").lo
    nth = _zh_int(n)
    return None if nth is None else _day(month.year, month.month, nth)


def _soon(m: re.Match[str], day: date) -> Span:
    """过两天, 过几天: within the next week."""
    return Span(day + timedelta(days=1), day + timedelta(days=7))


def _this_time_last_year(m: re.Match[str], day: date) -> Span:
    """"this time last year", 去年这个时候: a month around the same day a year back; "this
    day last year", 去年的今天: that day."""
    try:
        back = day.replace(year=day.year - 1)
    except ValueError:  # February 29
        back = day.replace(year=day.year - 1, day=28)
    if any(m.groups()):
        return Span(back, back)
    return Span(back - timedelta(days=15), back + timedelta(days=15))


_TOMORROW = r"tomorrow|tmrw|tmr|2moro|2morrow|tomoz"  # and their chat spellings
_COUNT = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
          "seven": 7, "eight": 8, "nine": 9, "ten": 10, "a couple of": 2, "a few": 3,
          "several": 3}
_RELATIVE_EN = re.compile(
    rf"\b(?:(yesterday|last night|yday|ystday)|(the day before yesterday)|"
    rf"((?:the )?day after (?:{_TOMORROW})|{_TOMORROW})|"
    rf"({_NUMBER}) (day|week|month|year)s? (ago|back|later|from now|from today)|"
    rf"(last|next|this past|this coming|this) (week|weekend|month|year|summer|winter|"
    rf"spring|autumn|fall|{_WEEKDAY}|{_MONTH}))\b(?! of\b)", re.IGNORECASE)  # the last week of June
# "in three days", "in a couple of weeks": ahead, where the clause tells no past ("in 3
# days we hiked 40 miles" is how long it took); not "in 3 days of rain", "in two days in a
# row", an age ("in 2 years old")
_IN_EN = re.compile(rf"\bin ({_NUMBER}) (day|week|month|year)s?\b"
                    r"(?! (?:old|of|in a row|straight|running)\b)", re.IGNORECASE)
# What makes "in two years" a span of time, not a day ahead: a negation ("I haven't seen
# her in a year"), a habit ("I usually finish a book in a week"), a superlative or a count
# ("the worst storm in 10 years", "my first vacation in two years", "10 times in a week"),
# an ability ("you can learn it in a week")
_NOT_AHEAD = re.compile(r"n['\u2019]t\b|\b(?:not|never|no|usually|always|often|every|normally|"
                        r"typically|first|only|once|twice|times|ever|best|worst|most|least|"
                        r"can|could|\w+iest|(?:long|big|hott|cold|high|low|larg|fast|great|"
                        r"warm|strong|short|small)est)\b", re.IGNORECASE)
# "two Saturdays ago": the last such day before, and the one a week before it per count
_WEEKDAYS_AGO_EN = re.compile(rf"\b({_NUMBER}) ({_WEEKDAY})s ago\b", re.IGNORECASE)
# "a week from Friday", "two weeks from tomorrow": counted from that day
_WEEKS_FROM_EN = re.compile(rf"\b({_NUMBER}) weeks? from ({_WEEKDAY}|{_TOMORROW})\b",
                            re.IGNORECASE)
# "half a year ago", "a year and a half ago", "two and a half weeks later", "a fortnight ago"
_HALF_EN = re.compile(
    rf"\b(?:half an? (day|week|month|year)|({_NUMBER}) (day|week|month|year)s? and a half|"
    rf"({_NUMBER}) and a half (day|week|month|year)s?|({_NUMBER}) (fortnight)s?) "
    rf"(ago|back|later|from now|from today)\b", re.IGNORECASE)
# "the end of last month", "early next month", "the end of the month" (its tense decides
# which), 上个月底, 这个月上旬, 月底 alone (not 3月底: a date; nor 腊月底, 蜜月中)
_MONTH_PART_EN = re.compile(
    r"\b(?:(?:the )?(beginning|start|middle|end|first half|1st half|second half|2nd half) "
    r"of (last|this|next|the)|"
    r"(early|mid|late)[- ]?(last|this|next)) month\b", re.IGNORECASE)
_MONTH_PART_ZH = re.compile(
    rf"({_SHANG}|{_XIA}|这|{_BEN})个?月的?(上半月|下半月|上旬|中旬|下旬|初|中|底|末)|"
    rf"(?<![\d{_ZH_NUM}个每岁年日明满蜜正腊半本上下这])月(上旬|中旬|下旬|"
    r"初(?![一二三四五六七八九十])|中(?![\u3400-\u9fff])|中(?=[的我你他她咱])|底|末)")
# A day of the month alone: "on the 25th", "by the 3rd", 25号 (not 3号线, 5号电池, 38号鞋)
# What may follow a day of the month alone: a clause's end or a word that is no noun
_AFTER_A_DAY = (r"(?:and|or|but|at|in|on|to|for|so|because|when|while|if|then|i|we|you|he|"
                r"she|they|it|my|our|his|her|their|this|that|the|a|an|with|from|until|till|"
                r"through|before|after|next|last|is|was|will|again|too|as|around|about)")
# A day of the month that ends its clause ("my flight is the 14th."), and a weekday's name
_ENDS_CLAUSE = r"(?=\s*(?:$|[.,!?;:)]|(?:at|and|but|so|because)\b))"
_FULL_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_NTH_EN = re.compile(rf"\b(?:on|by|until|till|since|from|before|after) the (\d{{1,2}})"
                     rf"(?:st|nd|rd|th)\b(?! of\b)(?![ ,]+(?:{_MONTH})\b)"
                     # "on the 3rd floor", "by the 4th round": an ordinal before a noun
                     rf"(?! (?!{_AFTER_A_DAY}\b)[a-z])|"
                     # "my flight is the 14th", "it was the 3rd": at the end of a clause
                     # (not "I was the 2nd in line", "the 3rd to arrive")
                     rf"(?:\b(?:is|was|are|were)|['\u2019]s) the (\d{{1,2}})(?:st|nd|rd|th)\b"
                     rf"{_ENDS_CLAUSE}|"
                     # "Friday the 13th": the date, which the weekday only confirms
                     rf"\b({_FULL_WEEKDAY}),? the (\d{{1,2}})"
                     rf"(?:st|nd|rd|th)\b(?! of\b)(?![ ,]+(?:{_MONTH})\b)", re.IGNORECASE)
# What N号 numbers before it: 3号线, 5号电池, 38号鞋, 3号选手, 9号公路 are no day
_HAO_NOUN = "线楼门床位房馆机车厅桌柜窗口码球字电院鞋选种病公路街巷队台站包箱店厂仓地桥段色键"
_NTH_ZH = re.compile(r"(?<![\d〇零一二两三四五六七八九十月第])"
                     r"(\d{1,2}|[一二三四五六七八九十]{1,3})号"
                     rf"(?![{_HAO_NOUN}])")
# 去年三月, 明年3月5号, 今年六月底 (not 过去年三月)
_YEAR_MONTH_ZH = re.compile(
    rf"({_QU}年|{_JIN}年|{_MING}年|{_QIAN}年|{_HOU}年)的?([\d{_ZH_NUM}]{{1,3}})月份?"
    rf"(?:([\d{_ZH_NUM}]{{1,3}})[日号]|({_ZH_THIRD}))?")
# "the first weekend of May", "the last Friday in June 2024", 五月的第一个周末, 6月最后一个周六
_NTH_OF_MONTH_EN = re.compile(
    r"\b(first|second|third|fourth|1st|2nd|3rd|4th|last) ((?:mon|tues|wednes|thurs|fri|"
    rf"satur|sun)day|weekend) (?:of|in) ({_MONTH})\b(?:,? ({_YEAR})\b)?", re.IGNORECASE)
_NTH_OF_MONTH_ZH = re.compile(
    rf"(?:({_YEAR})年)?([\d{_ZH_NUM}]{{1,3}})月份?的?(?:第([一二三四1-4])个|(最后一)个)"
    r"(周末|(?:周|星期|礼拜)[一二三四五六日天])")
_ORDINALS = {"first": 0, "1st": 0, "second": 1, "2nd": 1, "third": 2, "3rd": 2, "fourth": 3,
             "4th": 3, "一": 0, "二": 1, "三": 2, "四": 3, "1": 0, "2": 1, "3": 2, "4": 3}
# Days of one month from one to another: "from the 3rd to the 7th (of next month)", "March
# 3-7", "from June 10th to 14th, 2024", 下个月3号到7号, 12月20号到25号, 5月1日至5日
_TO = r"\s*(?:-|–|—|to|through|thru|until|till)\s*"
_RANGE_EN = re.compile(
    rf"\bfrom the (\d{{1,2}})(?:st|nd|rd|th){_TO}the (\d{{1,2}})(?:st|nd|rd|th)"
    rf"(?: of (?:(this|next|last) month|({_MONTH})(?:,? ({_YEAR}))?))?\b|"
    rf"\b({_MONTH})\.? (\d{{1,2}})(?:st|nd|rd|th)?{_TO}(?:({_MONTH})\.? )?(\d{{1,2}})"
    rf"(?:st|nd|rd|th)?\b(?![:.]\d)(?:,? ({_YEAR})\b)?", re.IGNORECASE)
_RANGE_ZH = re.compile(
    rf"(?:({_YEAR})年)?(?:({_SHANG}|{_XIA}|这|{_BEN})个?月|([\d{_ZH_NUM}]{{1,3}})月)?"
    rf"(?<![\d{_ZH_NUM}])([\d{_ZH_NUM}]{{1,3}})[号日]?(?:到|至|-|~|—)"
    # a second month only where the first end names one (5号到8月9号: two days)
    rf"(?(3)(?:([\d{_ZH_NUM}]{{1,3}})月)?)([\d{_ZH_NUM}]{{1,3}})[号日](?![{_HAO_NOUN}])")
# A day of a month counted from this one: "the 3rd of next month", 下个月5号, 上月20日
_COUNTED_DAY_EN = re.compile(r"\bthe (\d{1,2})(?:st|nd|rd|th) of (this|next|last) month\b",
                             re.IGNORECASE)
_COUNTED_DAY_ZH = re.compile(rf"({_SHANG}|{_XIA}|这|{_BEN})个?月的?([\d{_ZH_NUM}]{{1,3}})[号日]"
                             rf"(?![{_HAO_NOUN}])")
_THIS_TIME = re.compile(r"\b(?:around |about )?this time last year\b|"
                        rf"{_QU}年的?(?:这个时候|这时候|此时|这会儿)|"
                        # the very day: "this day last year", "a year ago today", 去年的今天
                        r"\b(this day last year|a year ago today)\b|"
                        rf"{_QU}年的?(今天|今日)", re.IGNORECASE)
# 过两天, 过几天, 过一两天 (in a few days; not 度过两天, 过了两天)
_SOON_ZH = re.compile(r"(?<![度经通超越难好熬错路住待呆玩不才只刚已])过(?:几|两|一两|两三)天(?!了)")
_PARTS = {"beginning": 0, "start": 0, "early": 0, "初": 0, "上旬": 0, "middle": 1, "mid": 1,
          "中": 1, "中旬": 1, "end": 2, "late": 2, "底": 2, "末": 2, "下旬": 2, "上中旬": 3,
          "中下旬": 4, "first half": 5, "1st half": 5, "上半月": 5, "second half": 6,
          "2nd half": 6, "下半月": 6}
# Parts of a year: "early 2024", "the end of last year", "mid-2023", "the first half of the
# year", 2023年底, 去年年初, 今年上半年, 年底 (a year's thirds: January-April, May-August,
# September-December; its halves). 年中 as 6月中: not before a word (今年中秋, 2023年中国),
# unless 年 is doubled (去年年中).
_YEAR_PART_EN = re.compile(
    rf"\b(?:(?:the )?(beginning|start|middle|end) of |(early|mid|late)[- ]|"
    rf"(?:the )?(first|second|1st|2nd) half of )(?:(the|this|last|next) year|({_YEAR}))\b",
    re.IGNORECASE)
_ZH_YEAR_PART = (r"初(?![一二三四五六七八九十])|底|末|中(?![\u3400-\u9fff])|"
                 r"中(?=[的我你他她咱])")
_YEAR_PART_ZH = re.compile(
    rf"(?:({_YEAR})|({_QU}|{_JIN}|{_MING}|{_QIAN}))年(?:年([初底末中])|({_ZH_YEAR_PART})|(上半年|下半年))|"
    rf"(?<![\d{_ZH_NUM}百千万几多半数每这那当同次全新年去今明前少童晚些学成老中青周])"
    rf"(?:年({_ZH_YEAR_PART})|(?<![马加剩过满快近多再还])(上半年|下半年))")
# Months of a year's parts: thirds, halves; but its end (年底, 年末, "the end of 2023") is
# its last month, narrower than "late 2023": so the writers of two blind sets, each on
# their own, read it
_YEAR_THIRDS = {"beginning": (1, 4), "start": (1, 4), "early": (1, 4), "初": (1, 4),
                "middle": (5, 8), "mid": (5, 8), "中": (5, 8), "end": (12, 12), "late": (9, 12),
                "底": (12, 12), "末": (12, 12), "first": (1, 6), "1st": (1, 6), "上半年": (1, 6),
                "second": (7, 12), "2nd": (7, 12), "下半年": (7, 12)}
# Quarters: "last quarter", "Q3 2024", "the first quarter of 2024", 上个季度, 今年一季度
_QUARTER_EN = re.compile(
    rf"\b(?:(last|this|next) quarter(?! of\b)|(?:the )?(first|second|third|fourth|1st|2nd|"
    rf"3rd|4th|last) quarter of (?:(the|this|last|next) year|({_YEAR}))|"
    # Q3 after a word that leads to a time ("in Q3", "by Q4") or before its year: not an
    # Audi Q3 or "Q2 on the exam"
    rf"(?:(?<=\bin )|(?<=\bby )|(?<=\bfor )|(?<=\bduring )|(?<=\buntil )|(?<=\bbefore )|"
    rf"(?<=\bafter )|(?<=\bsince )|(?<=\bthe )|(?<=\bour )|(?<=\bthis )|"
    rf"(?=q[1-4],? (?:{_YEAR}|(?:of )?(?:last|this|next) year)\b))"
    rf"q([1-4])(?:,? ({_YEAR})|,? (?:of )?(last|this|next) year)?)\b", re.IGNORECASE)
_QUARTER_ZH = re.compile(
    rf"({_SHANG}|{_XIA}|这|{_BEN})个?季度|"
    rf"(?:({_YEAR})年|({_QU}|{_JIN}|{_MING})年)?的?第?([一二三四1-4])季度(?!假)")
_QUARTERS = {name: n + 1 for name, n in _ORDINALS.items()} | {"last": 4}
_WHICH_YEAR = {"this": 0, "last": -1, "next": 1, "今": 0, "去": -1, "明": 1, "前": -2}
# A season alone: "over the winter", "in the summer" (not "the summer of 2021": a date)
_SEASON_ALONE = re.compile(r"\b(?:in|over|during|through|throughout|for) the (spring|summer|"
                           r"autumn|fall|winter)\b(?![ ,]*(?:of\b|\d))", re.IGNORECASE)
_EARLIER_EN = re.compile(r"\bearlier this (week|month|year)\b", re.IGNORECASE)
_BEFORE_LAST_EN = re.compile(
    rf"\b(?:the (week|weekend|month|year|{_WEEKDAY})|({_FULL_WEEKDAY})) (before last|after next)\b"
    # not "a month before last summer", "before last year's", "a week before last Monday"
    rf"(?!['\u2019]s|\s+(?:years?|weeks?|weekends?|months?|summer|winter|spring|autumn|fall|"
    rf"night|time|{_WEEKDAY})\b)", re.IGNORECASE)
_RELATIVE_ZH = re.compile(
    rf"({_QU}年|{_JIN}年|{_MING}年|{_QIAN}年|{_YEAR}年|这个|上个|下个)的?(春天|夏天|秋天|冬天|春季|夏季|秋季|冬季)|"
    rf"(昨天|昨晚|昨儿)|(大前天|{_QIAN}天)|({_MING}天|{_MING}儿|大后天|{_HOU}天)|({_QU}年|{_JIN}年)|({_QIAN}年)|({_MING}年)|"
    # 上周六 is last week's Saturday; 上周一起 ("together"), 上周一直 ("all along"), 上周天气,
    # 本周日程, 下周三天 are the whole week; 上上周, 下下个月: two back or ahead
    rf"((?:{_SHANG}){{1,2}}|(?:{_XIA}){{1,2}}|这|{_BEN})(?:个)?(周末|周|星期|礼拜|月)(?:([一二三四五六日天])(?![直起次些样定般共切气程子常天]))?|"
    # 三天前, 两个月后; 半年前, 一年半前, 一个半月前, 半个月前; 几天前, 十几年前
    rf"([\d{_ZH_NUM}]{{1,6}}几?|几|半)(个半|半个|个)?(天|周|星期|礼拜|月|年)(半)?(前|以前|之前|后|以后)")
# A period counted back to now: "(in) the past two weeks", "over the last few days", "the
# past month", "last 3 days", 最近三天, 过去一周, 这两天, 前几天, 近两个月. Without a count
# only "the past week" and "in/over/during/within the last week": "the last week of June",
# "the last day" and "the previous week" (before something else) are no period counted
# back. 过去 and 前 only where a clause or its subject starts: 考试前两天, 怀孕前三个月, 我的
# 前三个月工资 and 下周过去两天 are not; nor 前一天 / 这一天 (the day before, that day).
_ROLL = rf"{_NUMBER}|few|couple of|couple"
_BACK_EN = re.compile(
    rf"\b(?:(?:the|these) (?:past|last) ({_ROLL}) (day|week|month|year)s?|"
    rf"(?:past|last) ({_ROLL}) (day|week|month|year)s?|"
    rf"the past (week|month|year)|"
    rf"(?:in|over|during|within|for) the last (week|month|year))\b(?! of\b)", re.IGNORECASE)
_STARTS = r"(?:^|(?<=[，。,；;：:！？!?\s在我你他她们咱]))"
_BACK_ZH = re.compile(
    rf"(?:(?:最近|(?<![将接附靠亲])近|{_STARTS}过去)的?([\d{_ZH_NUM}]{{1,6}}几?|几|半)|"
    rf"(?:{_STARTS}前|这)(?!一)([\d{_ZH_NUM}]{{1,6}}几?|几|(?<=前)些(?=天|日子)))"
    rf"(?:个)?(天|周|星期|礼拜|月|年|日子)(?![前后以之])")
_UNITS = {"day": "day", "week": "week", "month": "month", "year": "year", "天": "day",
          "日子": "day", "周": "week", "星期": "week", "礼拜": "week", "月": "month", "年": "year"}


def _back(m: re.Match[str], day: date) -> Span:
    """The `n` days, weeks, months or years up to and with `day`, for a period counted
    back ("the past week": the seven days ending today; 最近三天: today and the two before)."""
    *count, unit = [g for g in m.groups() if g]
    unit = _UNITS[unit.lower()]
    if count == ["半"]:  # 最近半个月: half of one
        half = {"day": 1, "week": 4, "month": 15, "year": 183}[unit]
        return Span(day - timedelta(days=half - 1), day, back=True)
    n = _rolled(count[0]) if count else 1
    if unit in ("day", "week"):
        first = day - timedelta(days=n * (7 if unit == "week" else 1) - 1)
    else:  # the same day n months (years) back, and the day after it
        index = day.year * 12 + day.month - 1 - n * (12 if unit == "year" else 1)
        year, month = divmod(index, 12)
        first = date(year, month + 1, min(day.day, _month_span(year, month + 1).hi.day)) \
            + timedelta(days=1)
    return Span(first, day, back=True)


def _half(m: re.Match[str], day: date) -> Span | None:
    """"half a year ago", "a year and a half ago", "two fortnights later"."""
    half_of, n1, unit1, n2, unit2, n3, _, way = m.groups()
    if half_of:
        n, unit = 0.5, half_of
    elif n1 or n2:
        n, unit = _rolled(n1 or n2) + 0.5, unit1 or unit2
    else:
        n, unit = 2.0 * _rolled(n3), "week"
    return _counted(day, -n if way.lower() in ("ago", "back") else n, unit.lower())


@functools.lru_cache(maxsize=64)  # named_dates and _relative both read a text's
def _year_parts(text: str) -> tuple[re.Match[str], ...]:
    return (*_find(_YEAR_PART_EN, text), *_find(_YEAR_PART_ZH, text),
            *_find(_QUARTER_EN, text), *_find(_QUARTER_ZH, text))


def _part_of(m: re.Match[str]) -> tuple[int, int, str | None, str | None]:
    """A part of a year's first and last month, which year (last, 去, the, ...) and the
    year written out, from a match of `_year_parts`."""
    g = m.groups()
    if m.re is _YEAR_PART_EN:
        first, last = _YEAR_THIRDS[(g[0] or g[1] or g[2]).lower()]
        return first, last, g[3], g[4]
    if m.re is _YEAR_PART_ZH:
        first, last = _YEAR_THIRDS[next(p for p in g[2:] if p)]
        return first, last, g[1], g[0]
    if m.re is _QUARTER_EN:
        quarter, which, written = _QUARTERS.get((g[1] or "").lower()) or int(g[4]), \
            g[2] or g[6], g[3] or g[5]
    else:
        quarter, which, written = _QUARTERS.get(g[3]) or int(g[3]), g[2], g[1]
    return 3 * quarter - 2, 3 * quarter, which, written


def _year_part(m: re.Match[str], day: date | None, *, year: YearOf) -> Span | None:
    """A part of a year (a third, a half, a quarter): of the year written out ("early
    2024", 2023年底, Q3 2024), of the one last / this / next (去年年底) counts to from
    `day`, else (年初, "the end of the year", Q1) of the year `year` gives its months
    (`_year_of`: "年底我升职了" said in January is last year's end). "last quarter", 上个季度:
    counted from `day`'s quarter."""
    if m.re in (_QUARTER_EN, _QUARTER_ZH) and m.group(1):
        if day is None:
            return None
        step = _step(m.group(1))
        y, q = divmod(day.year * 4 + (day.month - 1) // 3 + step, 4)
        return Span(date(y, 3 * q + 1, 1), _month_span(y, 3 * q + 3).hi)
    first, last, which, written = _part_of(m)
    if written:
        y = int(written)
    elif day is None:
        return None
    elif which and which.lower() in _WHICH_YEAR:
        y = day.year + _WHICH_YEAR[which.lower()]
    else:  # the tense of its clause moves it a year back or on
        back, on = year(first, m.start()), year(last, m.start())
        y = day.year - 1 if back == day.year - 1 else (day.year + 1 if on == day.year + 1
                                                       else day.year)
    return Span(date(y, first, 1), _month_span(y, last).hi)


def _season_alone(m: re.Match[str], day: date) -> Span:
    """"over the winter": in what tells of the past the latest begun by `day`, else the
    one holding `day` or the next."""
    name = m.group(1).lower()
    seasons = [_season_of(y, name) for y in range(day.year - 2, day.year + 2)]
    if _tells_past(_clause_at(m.string, m.start())):
        return [s for s in seasons if s.lo <= day][-1]
    return next(s for s in seasons if s.hi >= day)


def _month_part(m: re.Match[str], day: date) -> Span | None:
    """The first, middle or last third of last / this / next month: "the end of last
    month", "early next month", 上个月底, 这个月初, 下个月中; of the month alone ("the end of
    the month", 月底), the one its clause's tense gives (`_month_of`)."""
    if m.re is _MONTH_PART_ZH:
        which, part, alone = m.groups()
        part = part or alone
    else:
        part, which, early, which_early = m.groups()
        part, which = part or early, which or which_early
    third = _THIRDS[_PARTS[part.lower()]]
    counted = which is not None and which.lower() != "the"
    step = _step(which) if counted else _month_of(m, day, third)
    month = _shift(day, step, "month").lo
    return _in_month(month.year, month.month, third)


def _month_of(m: re.Match[str], day: date, days: tuple[int, int]) -> int:
    """Which month, counted from `day`'s, holds `days` named without their month ("the
    25th", 月底): the last one where its clause tells of the past and they are still to
    come, the next one where it looks ahead (`_tells_ahead`) and they are over, else this
    one."""
    clause = _clause_at(m.string, m.start())
    if days[0] > day.day and _tells_past(clause):
        return -1
    if days[1] < day.day and _tells_ahead(clause):
        return 1
    return 0


def _nth(m: re.Match[str], day: date) -> Span | None:
    """A day of the month alone ("on the 25th", 3号): of the month `_month_of` gives."""
    if m.re is _NTH_EN and m.group(3):
        return _weekday_nth(m, day)
    n = _zh_int(m.group(1) if m.re is _NTH_ZH else (m.group(1) or m.group(2)))
    if n is None or not 1 <= n <= 31:
        return None
    month = _shift(day, _month_of(m, day, (n, n)), "month").lo
    return _day(month.year, month.month, n)


def _weekday_nth(m: re.Match[str], day: date) -> Span | None:
    """"Friday the 13th": the last such day before `day` where its clause tells of the
    past, else the next from `day` (within two years; else none)."""
    weekday, n = _WEEKDAYS[m.group(3).lower()], int(m.group(4))
    back = _tells_past(_clause_at(m.string, m.start()))
    for step in range(0, -25, -1) if back else range(25):
        month = _shift(day, step, "month").lo
        found = _day(month.year, month.month, n)
        if found and found.lo.weekday() == weekday and (
                found.lo < day if back else found.lo >= day):
            return found
    return None


def _earlier(m: re.Match[str], day: date) -> Span:
    """"earlier this week": from the week's (month's, year's) first day to `day`."""
    return Span(_shift(day, 0, m.group(1).lower()).lo, day, back=True)


def _before_last(m: re.Match[str], day: date) -> Span | None:
    """"the week before last", "the Friday after next" (a week after the next Friday),
    "the weekend after next" (a week after the next weekend to begin: asked on a Monday,
    the one after the coming one)."""
    what, way = (m.group(1) or m.group(2)).lower(), 1 if m.group(3).lower() == "after next" \
        else -1
    if what in _WEEKDAYS:  # the Friday before last: a week before last Friday
        return _shift(_weekday_from(day, way, _WEEKDAYS[what]), 7 * way, "day")
    if what == "weekend" and way > 0:  # the one after the next to begin, as for a weekday
        saturday = _weekday_from(day, 1, _SATURDAY) + timedelta(weeks=1)
        return Span(saturday, saturday + timedelta(days=1))
    return _named_period(day, 2 * way, what)


def _rolled(count: str) -> int:
    """How many units a period counted back holds: 3, three, a few, 三, 几 (a few: 3)."""
    word = count.lower()
    if word in ("few", "几"):
        return 3
    if word == "些":  # 前些天, 前些日子: some days, vaguer than 前几天
        return 7
    if word.endswith("几"):  # 十几: some ten-odd
        return (_zh_int(word[:-1]) or 0) + 5
    if word.startswith("couple"):
        return 2
    return _COUNT.get(word) or (int(word) if word.isdigit() else (_zh_int(word) or 1))


# What tells of the past: English auxiliaries, the common irregular past forms, a regular
# one right after its subject ("he proposed", "what happened"; not "I need", "I'm excited"),
# Chinese 了 / 过.
_PAST = re.compile(
    r"(?i:\b(?:did|was|were|had)(?:n['\u2019]t)?\b|\b(?:went|ate|got|said|told|met|made|saw|"
    r"bought|spent|paid|took|came|gave|found|began|ran|swam|flew|drove|rode|wrote|won|"
    r"lost|felt|kept|slept|sent|built|broke|chose|forgot|heard|knew|taught|"
    r"thought|brought|caught|fought|threw|wore|sang|stood|woke|fell|grew|drew|became|"
    r"spoke|froze|shook|hung|led|hid|lent|meant|tore|understood|"
    r"cooked|watched|played|visited|called)\b)|"
    # a regular past after its subject: a pronoun ("he proposed"), a name or a noun after
    # my / the ("Sarah moved", "my sister married")
    r"\b(?:(?i:i|we|you|he|she|they|it|what|who|which)|[A-Z][a-z]+|"
    r"(?i:my|our|his|her|their|the) [a-z]+)\s+(?:\w+ly\s+|just\s+|also\s+|never\s+|"
    r"first\s+|all\s+|both\s+)?(?!(?:ne|fe|se|spe|ble|bre|procee|excee|succee|emb)ed\b)"
    r"[a-z]{2,}ed\b|(?<![除为忘别罢])了|(?<![不难经通超越度太])过(?![来年节])")
# A plan, a wish or a reminder: "I'll", "I'm flying", "going to"; 要 as "will" (not 重要,
# 需要, 要求), 别忘, 打算. Not 会, which is also a meeting (开会) or a party (聚会).
_PLAN = re.compile(r"\b(?:will|won['\u2019]t|shall|would|going to|gonna|plan|planned|"
                   r"planning|tomorrow|tmrw|tmr|2moro|2morrow|tomoz|next)\b|['\u2019](?:ll|d)\b|"
                   r"(?:['\u2019]m|\bam|\bare|\bis) \w+ing\b|"
                   r"\b(?:am|are|is) (?:i|we|you|he|she|they) \w+ing\b|"  # "what am I doing"
                   r"(?<![重需主想只不必])要(?![求是紧点])|将要|别忘|打算|准备|计划|记得|明天|"
                   r"下周|下个月|下礼拜", re.IGNORECASE)
# A time said as a thing's date in the present is its schedule: "the meeting is on Friday",
# "my flight's the 14th", "the exam is in March", "the party is on 12/20", 周五有个会. Not
# "it's Friday", "today is the 14th" (the day it is said), "my favourite day is Sunday", a
# possessive ("at Joe's on Monday"), an ordinal before a noun ("is in the 3rd grade"), "is
# in March's report".
_NOT_NOW = r"(?<!\bit )(?<!today )(?<!that )"  # before " is": the day it is said
_NOT_NOW_S = r"(?<!\bit)(?<!today)(?<!that)"  # before "'s"
_SCHEDULED = re.compile(
    rf"{_NOT_NOW}(?<!day )\b(?:is|are) (?:on |in )?the \d{{1,2}}(?:st|nd|rd|th)\b{_ENDS_CLAUSE}|"
    rf"{_NOT_NOW_S}['\u2019]s the \d{{1,2}}(?:st|nd|rd|th)\b{_ENDS_CLAUSE}|"
    rf"{_NOT_NOW}(?<!day )\b(?:is|are) (?:on )?{_FULL_WEEKDAY}\b|"
    rf"{_NOT_NOW}(?<!day )\b(?:is|are) on \d{{1,2}}/\d{{1,2}}\b(?!/)|"
    rf"{_NOT_NOW_S}['\u2019]s {_FULL_WEEKDAY}\b|"
    rf"\b(?:is|are) in (?:{_MONTH})\b(?!['\u2019]s| of\b)|"
    r"(?:(?:周|星期|礼拜)[一二三四五六日天]|[\d一二三四五六七八九十]号)"
    r"(?:上午|下午|中午|晚上|早上)?有一?个", re.IGNORECASE)
_CLAUSE = re.compile(r"[;,.!?\n，。；！？]")
# An arrangement told in the past is about the time arranged, still to come
_ARRANGED = re.compile(r"\b(?:book(?:ed)?|regist(?:er|ered)|sign(?:ed)? up|schedul(?:e|ed)|"
                       r"reserv(?:e|ed)|invit(?:e|ed)|appointment|rsvp(?:ed)?)\b|"
                       r"约了|约好|说好|订了|预约|预订|报名|定好", re.IGNORECASE)
# Not past: "have got", a present passive or question ("is held", "are you interested")
_NOT_PAST = re.compile(
    r"\b(?:have|has)(?: (?:i|we|you|they|he|she))? got\b|['\u2019]ve got\b|"
    r"\b(?:is|are|am|isn['\u2019]t|aren['\u2019]t|be|being|been|get|gets)\s+"
    r"(?:(?:i|we|you|he|she|they|it)\s+)?(?:\w+ly\s+)?[a-z]{2,}ed\b", re.IGNORECASE)
# Not a day: "moved to Friday", "tickets for Friday's concert", Good Friday, Black Friday,
# Sunday school, a Sunday roast
_WEEKDAY_EN = re.compile(r"\b((?:mon|tues|wednes|thurs|fri|satur|sun)day|tues?|weds|thurs?|"
                         r"fri)\b\.?(?!s\b)"
                         r"(?! (?:school|roast|best|paper|league|service|driver)s?\b)",
                         re.IGNORECASE)
# the word right before a weekday (at most 7 letters and a space: read 8 back)
_NOT_DAY_WORDS = ("last|next|this|past|coming|every|to|until|till|by|before|good|black|ash|"
                  "cyber|holy|maundy|easter")
_NOT_A_DAY_BEFORE = re.compile(rf"\b(?:{_NOT_DAY_WORDS}|for) $", re.IGNORECASE)
_NOT_A_DAY_BEFORE_PLAN = re.compile(rf"\b(?:{_NOT_DAY_WORDS}) $", re.IGNORECASE)
# Not a day: 四周 (all around), 每逢周一 (every Monday)
_CJK = re.compile(r"[\u3400-\u9fff]")
# What is done again and again: no one day
_HABIT = re.compile(r"\b(?:usually|always|often|every|normally|generally|typically)\b|"
                    r"一般|通常|经常|总是|每", re.IGNORECASE)
# A weekend without last / this / next: "over the weekend", 周末 (not 上周末, 每个周末)
_WEEKEND_ALONE = re.compile(r"\b(?:over|on|at|during) the weekend\b|(?<![上下这本个每前])周末",
                            re.IGNORECASE)
_WEEKDAY_ZH = re.compile(r"(?<![上下这本个每四逢])(?:周|星期|礼拜)([一二三四五六日天])"
                         r"(?![直起次些样定般共切气程子常天末])")
_WEEKDAYS = {name: i for i, names in enumerate(
    (("monday", "mon"), ("tuesday", "tue", "tues"), ("wednesday", "wed", "weds"),
     ("thursday", "thu", "thur", "thurs"), ("friday", "fri"), ("saturday", "sat"),
     ("sunday", "sun"))) for name in names}

def _en_relative(m: re.Match[str], day: date) -> Span | None:
    back, before, tomorrow, count, unit, way, which, what = m.groups()
    if back:
        return _shift(day, -1, "day")
    if before:
        return _shift(day, -2, "day")
    if tomorrow:  # "the day after tomorrow": two days on
        return _shift(day, 2 if "after" in tomorrow.lower() else 1, "day")
    if count:
        n = _count(count)
        return _shift(day, -n if way.lower() in ("ago", "back") else n, unit.lower())
    if what.lower() in ("may", "march") and what[0].islower():  # "this may help", "one
        return None  # last march around the field"
    which, what = which.lower(), what.lower()
    # this coming weekend: the one holding `day`, else the next (as "this weekend")
    step = 1 if which == "next" or (which == "this coming" and what != "weekend") else (
        0 if which in ("this", "this coming") else -1)
    return _named_period(day, step, what)


def _count(word: str) -> int:
    return _COUNT.get(word.lower()) or (int(word) if word.isdigit() else 1)


def _in_counted(m: re.Match[str], day: date) -> Span | None:
    """"in three days": that day ahead; not how long something takes or has not happened
    (`_NOT_AHEAD`), nor in a clause that tells of the past."""
    clause = _clause_at(m.string, m.start())
    if _tells_past(clause) or _holds(_NOT_AHEAD, clause):
        return None
    return _shift(day, _count(m.group(1)), m.group(2).lower())


def _weekdays_ago(m: re.Match[str], day: date) -> Span | None:
    """"two Saturdays ago": the last Saturday before `day`, then a week back per count."""
    n = _count(m.group(1))
    if n < 1:
        return None
    last = _weekday_from(day, -1, _WEEKDAYS[m.group(2).lower()])
    return _shift(last, -7 * (n - 1), "day")


def _weeks_from(m: re.Match[str], day: date) -> Span:
    """"a week from Friday": a week after the next Friday; "two weeks from tomorrow"."""
    start = m.group(2).lower()
    base = (_weekday_from(day, 1, _WEEKDAYS[start]) if start in _WEEKDAYS
            else day + timedelta(days=1))
    return _shift(base, 7 * _count(m.group(1)), "day")


_SATURDAY = 5


def _weekday_from(day: date, step: int, target: int) -> date:
    """Weekday `target` (Monday 0): the last before `day` (step < 0), the next after it
    (step > 0), or `day` itself or the next (step 0)."""
    if step < 0:
        return day - timedelta(days=(day.weekday() - target) % 7 or 7)
    return day + timedelta(days=(target - day.weekday()) % 7 or (7 if step > 0 else 0))


def _named_period(day: date, step: int, what: str) -> Span | None:
    """last/this/next week, weekend, month, year, season or weekday, counted from `day`."""
    if what in _WEEKDAYS:
        d = _weekday_from(day, step, _WEEKDAYS[what])
        return Span(d, d)
    if what in _SEASONS:
        return _season(day, step, what)
    if what in _MONTHS:  # last December: the latest before this month; next March
        month = _MONTHS[what]
        year = day.year + (0 if step == 0 else (
            -(month >= day.month) if step < 0 else int(month <= day.month)))
        return _month_span(year, month)
    if what == "weekend":  # this one: the one holding `day`, else the coming one
        # a Sunday's Saturday is the day before
        saturday = day + timedelta(days=5 - day.weekday(), weeks=step)
        return Span(saturday, saturday + timedelta(days=1))
    return _shift(day, step, what)


def _season_of(year: int, name: str) -> Span:
    """The season `name` that starts in `year` (winter runs into the next February)."""
    first, last = _SEASONS[name]
    end = _month_span(year + (last - 1) // 12, (last - 1) % 12 + 1)
    return Span(date(year, first, 1), end.hi)


def _season(day: date, step: int, name: str) -> Span:
    """Last (the latest one over before `day`), this (the one holding `day`, else this
    year's) or next (the first one to start after `day`) summer, winter, ..."""
    years = [_season_of(y, name) for y in range(day.year - 2, day.year + 2)]
    if step < 0:
        return [s for s in years if s.hi < day][-1]
    if step > 0:
        return next(s for s in years if s.lo > day)
    return next((s for s in years if s.lo <= day <= s.hi), _season_of(day.year, name))


def _shift(day: date, n: int, unit: str) -> Span:
    """The day, week, month or year `n` of them from `day`'s."""
    if unit == "day":
        d = day + timedelta(days=n)
        return Span(d, d)
    if unit == "week":
        monday = day - timedelta(days=day.weekday()) + timedelta(weeks=n)
        return Span(monday, monday + timedelta(days=6))
    if unit == "month":
        index = day.year * 12 + day.month - 1 + n
        return _month_span(index // 12, index % 12 + 1)
    return _year_span(day.year + n)


_ZH_YEARS = {"去年": -1, "今年": 0, "明年": 1, "前年": -2, "后年": 2}
_ZH_DAYS = {"昨天": -1, "昨晚": -1, "昨儿": -1, "前天": -2, "大前天": -3, "明天": 1, "明儿": 1,
            "后天": 2, "大后天": 3}


def _zh_relative(m: re.Match[str], day: date) -> Span | None:
    (which_year, season, back, before, tomorrow, last_year, year_before, next_year, way,
     period, weekday, count, counter, unit, half, direction) = m.groups()
    if season:
        name = {"春": "spring", "夏": "summer", "秋": "autumn", "冬": "winter"}[season[0]]
        if which_year.endswith("个"):  # 这个冬天: the one holding `day`; 上个, 下个
            return _season(day, {"这": 0, "上": -1, "下": 1}[which_year[0]], name)
        year = (int(which_year[:4]) if which_year[0].isdigit()
                else day.year + _ZH_YEARS[which_year])
        return _season_of(year, name)
    if back or before or tomorrow:
        return _shift(day, _ZH_DAYS[back or before or tomorrow], "day")
    if last_year or year_before or next_year:
        return _shift(day, _ZH_YEARS[last_year or year_before or next_year], "year")
    if way:
        step = -len(way) if way[0] == "上" else (len(way) if way[0] == "下" else 0)
        if period == "周末":
            return _named_period(day, step, "weekend")
        if period == "月":
            return _shift(day, step, "month")
        week = _shift(day, step, "week")
        if weekday:  # 上周六: that day of last week (日 and 天 are Sunday)
            d = week.lo + timedelta(days=_zh_weekday(weekday))
            return Span(d, d)
        return week
    if unit == "月" and not (counter or count == "半"):  # 三月前: before March
        return None
    halves = "半" in count + (counter or "") + (half or "")
    n = (0 if count == "半" else _rolled(count)) + (0.5 if halves else 0)
    return _counted(day, n if direction in ("后", "以后") else -n, _UNITS[unit])


def _counted(day: date, n: float, unit: str) -> Span | None:
    """`n` (a half too: "a year and a half ago", 半年前) days, weeks, months or years from
    `day`, read in the unit below where it is not whole: 18 months, about 6 weeks."""
    if n == int(n):
        return _shift(day, int(n), unit)
    finer = {"year": ("month", 12), "month": ("week", 4.35), "week": ("day", 7),
             "day": ("day", 1)}[unit]
    steps = round(n * finer[1])
    return None if steps == 0 else _shift(day, steps, finer[0])


_YEAR_MONTH_OR_NTH: dict[re.Pattern[str], Callable[[re.Match[str], date], Span | None]] = {
    _YEAR_MONTH_ZH: _zh_year_month, _NTH_OF_MONTH_EN: _nth_of_month,
    _NTH_OF_MONTH_ZH: _nth_of_month, _RANGE_EN: _day_range, _RANGE_ZH: _day_range,
    _COUNTED_DAY_EN: _counted_day, _COUNTED_DAY_ZH: _counted_day}


_COUNTED_EN: dict[re.Pattern[str], Callable[[re.Match[str], date], Span | None]] = {
    _IN_EN: _in_counted, _WEEKDAYS_AGO_EN: _weekdays_ago, _WEEKS_FROM_EN: _weeks_from}


# Each pattern below is run only on a text that holds what it cannot match without: most
# texts name no time, and scanning them with every pattern was half the cost of a search's
# date reading (a Chinese pattern has no literal prefix to skip English text by).
_GATES: dict[re.Pattern[str], re.Pattern[str]] = {
    _RELATIVE_ZH: _CJK, _DATES_ZH: re.compile("[年月]"), _WEEKDAY_ZH: re.compile("周|星期|礼拜"),
    _BACK_ZH: re.compile("近|过去|前|这"), _MONTH_PART_ZH: re.compile("月"),
    _NTH_ZH: re.compile("号"), _YEAR_PART_ZH: re.compile("年"), _QUARTER_ZH: re.compile("季度"),
    _YEAR_MONTH_ZH: re.compile("年"), _NTH_OF_MONTH_ZH: re.compile("第|最后"),
    _SOON_ZH: re.compile("过"), _RANGE_EN: re.compile(r"\d"), _RANGE_ZH: re.compile("[号日]"),
    _COUNTED_DAY_EN: re.compile("month", re.IGNORECASE), _COUNTED_DAY_ZH: re.compile("月"),
    _THIS_TIME: re.compile("this time|this day|ago today|去年", re.IGNORECASE),
    _NTH_OF_MONTH_EN: re.compile(r"(?:of|in) (?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)",
                                 re.IGNORECASE),
    _HALF_EN: re.compile(r"half|fortnight", re.IGNORECASE),
    _YEAR_PART_EN: re.compile(r"year|\d", re.IGNORECASE),
    _QUARTER_EN: re.compile(r"quarter|q[1-4]", re.IGNORECASE),
    _SEASON_ALONE: re.compile(r"spring|summer|autumn|fall|winter", re.IGNORECASE),
    _NTH_EN: re.compile(r"\d"),
    _MONTH_PART_EN: re.compile(r"month", re.IGNORECASE),
    _BACK_EN: re.compile(r"past|last", re.IGNORECASE),
    _EARLIER_EN: re.compile(r"earlier", re.IGNORECASE),
    _IN_EN: re.compile(r"\bin ", re.IGNORECASE),
    _WEEKDAYS_AGO_EN: re.compile(r"s ago", re.IGNORECASE),
    _WEEKS_FROM_EN: re.compile(r"ks? from", re.IGNORECASE),
    _BEFORE_LAST_EN: re.compile(r"before last|after next", re.IGNORECASE),
    _WEEKEND_ALONE: re.compile(r"weekend|周末", re.IGNORECASE),
    _DECADE: re.compile(r"0['\u2019]?s|ties\b|年代", re.IGNORECASE),
    _SHORT_YEAR_EN: re.compile(r"['\u2019]\d\d"),
    _NUMERIC_DATES: re.compile(r"\d[/.-]\d"),
}


def _find(pattern: re.Pattern[str], text: str) -> list[re.Match[str]]:
    """`pattern`'s matches in `text`, none without scanning where its gate finds nothing."""
    gate = _GATES.get(pattern)
    if gate is not None and gate.search(text) is None:
        return []
    return list(pattern.finditer(text))

"""Holidays and festivals as days of a year, so "what did I do at Christmas?", 去年春节 and
"I spent Easter at my parents'" place something in time: fixed dates (Christmas, New Year,
NYE, Valentine's Day, April Fools', St Patrick's Day, Halloween, Hogmanay, 元旦, 妇女节, 植树节,
教师节, 国庆节, 五一, 双十一, and the shopping days 618 and 520 where they are days), Easter
(computed), the US Thanksgiving and Black Friday, Fourth of July, Memorial Day and Labor Day
(by these names only: Independence Day and Labour Day fall on other days in other
countries), Mother's Day and Father's Day (母亲节, 父亲节: the second Sunday of May and the
third of June, as in the US and China; the UK's Mothering Sunday is not read), and the
Chinese lunisolar festivals and solar terms (春节 or "Chinese New Year", 除夕, 元宵节, 端午节,
七夕, 中秋节, 重阳节, 清明, 冬至), 十一 as a holiday (十一期间), and 年前, the three weeks
before 春节.

The lunisolar dates come from a table for 1990-2060, generated once from the MIT-licensed
`holidays` package (`holidays.calendars.chinese`; 七夕, which it lacks, from `lunardate`,
and both checked against `lunar-python`), so nothing is computed or installed at
run time; a year outside it names no festival.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, timedelta
from typing import NamedTuple

FIRST_YEAR = 1990
# Per year from FIRST_YEAR: 春节 (the first day), 端午, 中秋, 清明, 冬至, 七夕, 重阳, as MMDD.
_LUNISOLAR = (
    '0127 0528 1003 0405 1222 0826 1026', '0215 0616 0922 0405 1222 0816 1016',
    '0204 0605 0911 0404 1221 0805 1004', '0123 0624 0930 0405 1222 0824 1023',
    '0210 0613 0920 0405 1222 0813 1013', '0131 0602 0909 0405 1222 0802 1101',
    '0219 0620 0927 0404 1221 0820 1020', '0207 0609 0916 0405 1222 0809 1010',
    '0128 0530 1005 0405 1222 0828 1028', '0216 0618 0924 0405 1222 0817 1017',
    '0205 0606 0912 0404 1221 0806 1006', '0124 0625 1001 0405 1222 0825 1025',
    '0212 0615 0921 0405 1222 0815 1014', '0201 0604 0911 0405 1222 0804 1004',
    '0122 0622 0928 0404 1221 0822 1022', '0209 0611 0918 0405 1222 0811 1011',
    '0129 0531 1006 0405 1222 0731 1030', '0218 0619 0925 0405 1222 0819 1019',
    '0207 0608 0914 0404 1221 0807 1007', '0126 0528 1003 0404 1222 0826 1026',
    '0214 0616 0922 0405 1222 0816 1016', '0203 0606 0912 0405 1222 0806 1005',
    '0123 0623 0930 0404 1221 0823 1023', '0210 0612 0919 0404 1222 0813 1013',
    '0131 0602 0908 0405 1222 0802 1002', '0219 0620 0927 0405 1222 0820 1021',
    '0208 0609 0915 0404 1221 0809 1009', '0128 0530 1004 0404 1222 0828 1028',
    '0216 0618 0924 0405 1222 0817 1017', '0205 0607 0913 0405 1222 0807 1007',
    '0125 0625 1001 0404 1221 0825 1025', '0212 0614 0921 0404 1221 0814 1014',
    '0201 0603 0910 0405 1222 0804 1004', '0122 0622 0929 0405 1222 0822 1023',
    '0210 0610 0917 0404 1221 0810 1011', '0129 0531 1006 0404 1221 0829 1029',
    '0217 0619 0925 0405 1222 0819 1018', '0206 0609 0915 0405 1222 0808 1008',
    '0126 0528 1003 0404 1221 0826 1026', '0213 0616 0922 0404 1221 0816 1016',
    '0203 0605 0912 0405 1222 0805 1005', '0123 0624 1001 0405 1222 0824 1024',
    '0211 0612 0919 0404 1221 0812 1012', '0131 0601 0908 0404 1221 0801 1001',
    '0219 0620 0927 0405 1222 0820 1020', '0208 0610 0916 0405 1222 0810 1009',
    '0128 0530 1004 0404 1221 0828 1027', '0215 0618 0924 0404 1221 0817 1017',
    '0204 0607 0913 0405 1222 0807 1007', '0124 0527 1002 0405 1222 0826 1026',
    '0212 0614 0920 0404 1221 0814 1014', '0201 0603 0910 0404 1221 0803 1003',
    '0122 0622 0928 0404 1222 0822 1022', '0210 0611 0917 0405 1222 0811 1011',
    '0130 0531 1005 0404 1221 0731 1029', '0217 0619 0925 0404 1221 0819 1018',
    '0206 0608 0915 0404 1222 0808 1008', '0126 0529 1004 0405 1222 0827 1027',
    '0214 0615 0922 0404 1221 0816 1016', '0202 0604 0911 0404 1221 0805 1005',
    '0123 0623 0930 0404 1222 0823 1024', '0211 0613 0919 0405 1222 0812 1013',
    '0201 0601 0907 0404 1221 0801 1030', '0219 0620 0926 0404 1221 0820 1020',
    '0208 0610 0916 0404 1222 0810 1009', '0128 0530 1005 0405 1222 0829 1028',
    '0215 0617 0924 0404 1221 0817 1017', '0204 0606 0913 0404 1221 0806 1007',
    '0124 0625 1002 0404 1221 0825 1025', '0212 0614 0921 0405 1222 0814 1014',
    '0202 0603 0909 0404 1221 0802 1002',
)
_SPRING, _DRAGON_BOAT, _MID_AUTUMN, _QINGMING, _WINTER_SOLSTICE, _QIXI, _DOUBLE_NINTH = range(7)


Days = Callable[[int], tuple[date, date] | None]


def _lunisolar(which: int, before: int = 0, after: int = 0) -> Days:
    def days(year: int) -> tuple[date, date] | None:
        if not FIRST_YEAR <= year < FIRST_YEAR + len(_LUNISOLAR):
            return None
        mmdd = _LUNISOLAR[year - FIRST_YEAR].split()[which]
        day = date(year, int(mmdd[:2]), int(mmdd[2:]))
        return day - timedelta(days=before), day + timedelta(days=after)

    return days


def _fixed(month: int, day: int, last: int = 0, *, from_previous: int = 0,
           ) -> Callable[[int], tuple[date, date]]:
    """`month`/`day` of the year (through `last` days after; `from_previous` days before,
    into the year before: New Year's Eve for New Year)."""
    def days(year: int) -> tuple[date, date]:
        first = date(year, month, day)
        return first - timedelta(days=from_previous), first + timedelta(days=last)

    return days


def easter(year: int) -> date:
    """Easter Sunday (the Gregorian computus, Anonymous / Meeus)."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = divmod(b, 4)
    g = (8 * b + 13) // 25
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    l_ = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * l_) // 451
    month, day = divmod(h + l_ - 7 * m + 114, 31)
    return date(year, month, day + 1)


def _easter(before: int, after: int) -> Callable[[int], tuple[date, date]]:
    def days(year: int) -> tuple[date, date]:
        sunday = easter(year)
        return sunday - timedelta(days=before), sunday + timedelta(days=after)

    return days


def nth_weekday(year: int, month: int, weekday: int, n: int) -> date | None:
    """The `n`th (0 the first, -1 the last) `weekday` (Monday 0) of a month; None where it
    has no such."""
    first = date(year, month, 1) + timedelta(days=(weekday - date(year, month, 1).weekday()) % 7)
    matching = [d for d in (first + timedelta(weeks=i) for i in range(5)) if d.month == month]
    return matching[n] if -len(matching) <= n < len(matching) else None


def _nth_weekday_of(month: int, weekday: int, n: int, before: int = 0, after: int = 0) -> Days:
    """A holiday on the `n`th `weekday` of `month` (as `nth_weekday`), from `before` days
    before it through `after` days after (negative: the other way): the US Memorial Day and
    Labor Day with their weekends, Thanksgiving through its weekend, Black Friday the day
    after it, Mother's Day, Father's Day."""
    def days(year: int) -> tuple[date, date] | None:
        day = nth_weekday(year, month, weekday, n)
        if day is None:
            return None
        return day - timedelta(days=before), day + timedelta(days=after)

    return days


_MONDAY, _THURSDAY, _SUNDAY = 0, 3, 6
_SPRING_FESTIVAL = _lunisolar(_SPRING, 1, 6)  # 除夕 to 初六, by every name it goes by
# Names (lower case) and the days they hold in a given year.
_DAYS: dict[str, Days] = {
    "christmas eve": _fixed(12, 24), "christmas day": _fixed(12, 25),
    "christmas": _fixed(12, 24, 2), "xmas": _fixed(12, 24, 2), "boxing day": _fixed(12, 26),
    "new year's eve": _fixed(12, 31), "new year's day": _fixed(1, 1),
    "new year": _fixed(1, 1, from_previous=1), "valentine's day": _fixed(2, 14),
    "halloween": _fixed(10, 31), "hogmanay": _fixed(12, 31), "fourth of july": _fixed(7, 4),
    "thanksgiving": _nth_weekday_of(11, _THURSDAY, 3, after=3),
    "black friday": _nth_weekday_of(11, _THURSDAY, 3, before=-1, after=1),
    "chinese new year": _SPRING_FESTIVAL, "lunar new year": _SPRING_FESTIVAL,
    "spring festival": _SPRING_FESTIVAL,
    "mid-autumn festival": _lunisolar(_MID_AUTUMN),
    "dragon boat festival": _lunisolar(_DRAGON_BOAT),
    "memorial day": _nth_weekday_of(5, _MONDAY, -1, before=2),
    "labor day": _nth_weekday_of(9, _MONDAY, 0, before=2),
    "easter": _easter(2, 1), "easter weekend": _easter(2, 1), "easter sunday": _easter(0, 0),
    "easter monday": _easter(-1, 1), "good friday": _easter(2, -2),
    "mother's day": _nth_weekday_of(5, _SUNDAY, 1),
    "father's day": _nth_weekday_of(6, _SUNDAY, 2),
    "april fools' day": _fixed(4, 1), "st patrick's day": _fixed(3, 17),
    "双十一": _fixed(11, 11), "双11": _fixed(11, 11), "光棍节": _fixed(11, 11),
    "双十二": _fixed(12, 12), "双12": _fixed(12, 12),
    "圣诞": _fixed(12, 24, 2), "圣诞节": _fixed(12, 24, 2), "平安夜": _fixed(12, 24),
    "元旦": _fixed(1, 1), "跨年": _fixed(1, 1, from_previous=1), "情人节": _fixed(2, 14),
    "万圣节": _fixed(10, 31), "儿童节": _fixed(6, 1), "五一": _fixed(5, 1, 4),
    "劳动节": _fixed(5, 1, 4), "国庆": _fixed(10, 1, 6), "国庆节": _fixed(10, 1, 6),
    "春节": _SPRING_FESTIVAL, "过年": _SPRING_FESTIVAL,
    "年前": _lunisolar(_SPRING, 21, -1),  # the weeks before it (年前回家, 年前把活干完)
    "除夕": _lunisolar(_SPRING, 1, -1), "大年三十": _lunisolar(_SPRING, 1, -1),
    "大年初一": _lunisolar(_SPRING), "元宵节": _lunisolar(_SPRING, -14, 14),
    "端午": _lunisolar(_DRAGON_BOAT), "端午节": _lunisolar(_DRAGON_BOAT),
    "中秋": _lunisolar(_MID_AUTUMN), "中秋节": _lunisolar(_MID_AUTUMN),
    "七夕": _lunisolar(_QIXI), "七夕节": _lunisolar(_QIXI),
    "重阳": _lunisolar(_DOUBLE_NINTH), "重阳节": _lunisolar(_DOUBLE_NINTH),
    "母亲节": _nth_weekday_of(5, _SUNDAY, 1), "父亲节": _nth_weekday_of(6, _SUNDAY, 2),
    "教师节": _fixed(9, 10),
    "妇女节": _fixed(3, 8), "三八节": _fixed(3, 8), "愚人节": _fixed(4, 1), "植树节": _fixed(3, 12),
    "618": _fixed(6, 18), "520": _fixed(5, 20),
    "清明节": _lunisolar(_QINGMING), "清明": _lunisolar(_QINGMING),
    "冬至": _lunisolar(_WINTER_SOLSTICE),
}
_EN = re.compile(
    r"\b(?:(last|this|next) )?(christmas (?:eve|day)|christmas|xmas|boxing day|"
    r"(?:chinese|lunar) new year|spring festival|mid-autumn festival|dragon boat festival|"
    r"black friday|"
    r"new year['\u2019]?s (?:eve|day)|new year|valentine['\u2019]?s(?: day)?|halloween|"
    r"thanksgiving|hogmanay|fourth of july|memorial day|labor day|"
    r"easter (?:weekend|sunday|monday)|easter|good friday|"
    # not "my mother's day started at 5", "his father's day job"
    r"(?<!\bmy )(?<!\bhis )(?<!\bher )(?<!\bour )(?<!\byour )(?<!\btheir )"
    r"(?:mother['\u2019]?s day|father['\u2019]?s day)|april fools?['\u2019]?(?:s)?(?: day)?|"
    r"(?:st\.?|saint) patrick['\u2019]?s day|(?-i:NYE))\b"
    r"(?:,? ((?:19|20)\d\d)\b| (last|this|next) year\b)?",  # "Christmas Day last year"
    re.IGNORECASE)
_ZH = re.compile(r"(去年|今年|明年)?(?:((?:19|20)\d\d)年)?的?"
                 r"(圣诞节|圣诞|平安夜|元旦|跨年|情人节|万圣节|儿童节|"
                 # not 五一班 or 五一广场 (a class, a place)
                 r"(?<![\d一二三四五六七八九十])五一(?![\d一二三四五六七八九十班广路街大公中小])|劳动节|"
                 r"双十一|双11|光棍节|双十二|双12|"
                 r"国庆节|国庆|春节|(?<![难])过年(?!前)|除夕|"
                 # 十一 is 国庆 only as a holiday: 十一期间, 十一假期, 十一长假, 十一黄金周
                 r"(?<![\d〇零一二两三四五六七八九十第月])十一(?=期间|假期|长假|黄金周|放假)|"
                 # not 三年前, 多年前, 去年前 (counted years) or 新年前
                 # nor 成年前, 十周年前夕, 一亿年前, 学年前, 童年前
                 r"(?<![\d〇零一二两三四五六七八九十百千万亿几多少干半数每这那当同次全新早些去今明前"
                 r"成周学童青晚老])"
                 r"年前|大年三十|大年初一|元宵节|端午节|端午|"
                 # 清明 and 重阳 alone only before what is done then (not 李清明, 目光清明)
                 r"中秋节|中秋|清明节|清明(?=假期|期间|小长假|放假|回|去|扫墓|上坟|祭祖|那天|前后|的时候)|"
                 r"冬至|七夕节|七夕|重阳节|重阳(?=登高|假期|那天|的时候)|母亲节|父亲节|教师节|妇女节|三八节|"
                 r"愚人节|植树节|"
                 # the shopping days 618 and 520 only as days, not a room or a sum
                 r"(?<![\d.])(?<!花了)(?<!付了)(?<!用了)(?<!一共)(?<![花付卖价共])(?:618|520)"
                 r"(?=大促|购物节|活动|期间|那天|当天|的时候|打折|优惠|促销|买|抢|囤|表白|送))")
_CJK = re.compile(r"[\u3400-\u9fff]")
_STEP = {"last": -1, "this": 0, "next": 1, "去年": -1, "今年": 0, "明年": 1}


class Named(NamedTuple):
    """A festival a text names: `step` -1 last / 去年, 0 this / 今年, 1 next / 明年, None
    bare; `by_year`: the step counts calendar years (去年春节: last year's), not
    occurrences ("last Christmas": the latest one over); `year`: one written out
    ("Christmas 2023", 2023年春节); `span`: where in the text."""

    name: str
    step: int | None
    by_year: bool
    year: int | None
    span: tuple[int, int]


def named(text: str) -> list[Named]:
    """The festivals `text` names."""
    out = []
    for m in _EN.finditer(text):
        which, name, year, which_year = m.groups()
        if which_year:  # "Christmas last year": that year's, as 去年圣诞
            out.append(Named(_canonical(name), _STEP[which_year.lower()], True, None,
                             m.span()))
            continue
        out.append(Named(_canonical(name), None if which is None else _STEP[which.lower()],
                         False, int(year) if year else None, m.span()))
    for m in _ZH.finditer(text) if _CJK.search(text) else ():  # English: no scan
        which, year, name = m.groups()
        out.append(Named("国庆" if name == "十一" else name,
                         None if which is None else _STEP[which], True,
                         int(year) if year else None, m.span()))
    return out


def _canonical(name: str) -> str:
    name = name.lower()
    if name.startswith("valentine"):
        return "valentine's day"
    if name == "nye":
        return "new year's eve"
    if name.startswith(("mother", "father")):
        return name[:6] + "'s day"
    if name.startswith("april fool"):
        return "april fools' day"
    if name.endswith(("patrick's day", "patrick\u2019s day", "patricks day")):
        return "st patrick's day"
    if name.startswith("new year"):
        return {"e": "new year's eve", "y": "new year's day"}.get(name[-1], "new year")
    return name


def when(name: str, year: int) -> tuple[date, date] | None:
    """The days festival `name` holds in `year` (None: a lunisolar one outside the table)."""
    return _DAYS[name](year)

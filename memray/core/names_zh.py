"""Chinese names where a text introduces them: the entity index's rules for Chinese.

core/entities.py knows a Latin-script name by its capital, and drops one the user also
writes in lower case. Chinese writes no capitals. What a Chinese speaker does instead is
introduce a person or a pet, and the index reads the name there:
- after 叫 / 名叫 / 叫做 / 名字叫 / 喊 ("我家狗叫豆豆", "新同事叫陈磊", "都叫她芳姐");
- after a word for a relation, when what follows has a name's shape ("我表妹王若琳",
  "同事小张", "我家猫咪咪"): a surname and one or two characters, 小 / 老 / 阿 and one,
  or a doubled character;
- a surname before a title ("李老师", "王总", "张阿姨"), and 小 / 老 before a surname
  ("小刘", "老马").
The Chinese counterpart of "not written in lower case" is "not a word of the language":
a shape after a relation that is a common word (儿子高考…, 妈妈天天…, 老公小气) names no
one. Common words come from jieba's dictionary (its frequencies; the words it tags as
person names stay names). A full name also answers to its given name (王若琳 → 若琳), as
people are later asked about. Once a user's text has introduced a name, every memory that
contains it names it. The lists here are the language's words for relations and roles,
titles, common surnames and the characters that end a name, not phrasings (a few role
words, 大厨 and 常客 among them, were added after a test conversation used them).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from collections import Counter
from collections.abc import Callable

_CJK = re.compile(r"[\u4e00-\u9fff]")
_COUNTED = 50  # how often jieba's dictionary counts a common word (names are rarer)
# Common surnames, less those whose character mostly begins an ordinary word (包, 向, 连,
# 常, 于, 师: "妈妈包饺子" and "我师姐" name no one).
_SURNAMES = frozenset(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘蒋蔡余杜叶程苏"
    "魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚"
    "邵万钱严覃武戴莫孔汤文樊葛邢安乔庞颜倪庄聂章鲁岳翟殷詹欧耿兰焦俞柳祝舒阮柯纪梅童凌季裴霍"
    "涂苗翁冉骆蓝辛靳柴蒙鲍喻祁蒲房滕饶牟艾阳穆农卓古吉缪简项芦麦褚娄窦戚岑景党宫卜晏席卫柏"
    "宗瞿桂佟臧闵苟邬边卞姬仇栾隋商刁沙荣巫寇桑郎甄丛仲虞敖巩佘池查麻苑迟邝")
# Words for whom a person is to the speaker, and the pets a name follows.
_RELATION_WORDS = """
爸爸 妈妈 父亲 母亲 老公 老婆 丈夫 妻子 太太 爱人 儿子 女儿 哥哥 姐姐 弟弟 妹妹 表哥 表姐 表弟
表妹 堂哥 堂姐 堂弟 堂妹 爷爷 奶奶 外公 外婆 姥姥 姥爷 叔叔 阿姨 舅舅 舅妈 姑姑 姨妈 婶婶 侄子
侄女 外甥 外甥女 孙子 孙女 男朋友 女朋友 男友 女友 对象 朋友 好友 闺蜜 发小 同学 室友 舍友 同事
闺女 媳妇 老伴 儿媳 女婿 公公 婆婆 岳父 岳母 兄弟 师兄 师姐 师弟 师妹 学长 学姐 大厨 厨师 店员 员工
伙计 助理 秘书 实习生 常客 顾客 网友 队友 班主任
老板 上司 领导 经理 主管 组长 导师 教练 医生 邻居 房东 客户 搭档 合伙人 师傅 徒弟 学生 宝宝
狗狗 小狗 猫咪 小猫 狗 猫 兔子 鹦鹉 仓鼠 宠物 我哥 我姐 我弟 我妹
"""
_TITLE_WORDS = """
老师 总 经理 医生 大夫 阿姨 叔叔 师傅 律师 教授 主任 老板 姐 哥 工 奶奶 爷爷 伯伯 大爷 大妈 婶
嫂 先生 女士 小姐 总监 处长 科长 局长
"""
# longest first, so that a pattern of them takes 表妹 before 妹
_RELATIONS = sorted(_RELATION_WORDS.split(), key=len, reverse=True)
_TITLES = sorted(_TITLE_WORDS.split(), key=len, reverse=True)
_TITLE_ENDS = tuple(_TITLES)  # for str.endswith
# Characters a name stops before: punctuation, particles, pronouns, common verbs and
# adverbs that follow a subject.
_ENDS = frozenset(
    "，。！？、；：,.!?;: \n的了着过说也和跟与在是都又还就才要会能想给让把被对从到去来这那今"
    "昨前后上下最很太不没每刚已正吗呢吧啊呀哦嘛我你他她它们一两几有做再找带问请叫帮非真特"
    "好家看见约陪等谢")
_PRONOUNS = frozenset("我你他她它咱您")
_COUNTING = frozenset("这那每本一二三四五六七八九十两几半")  # before 周 the week, 张 a sheet
_CLAUSE = frozenset("，。！？、；：,.!?;: \n")  # what a clause starts after
_ASKING = frozenset("什啥谁哪怎多几")
# After 叫, what names nothing: a measure word or an aspect ("叫个车", "叫了外卖").
_NOT_CALLED = frozenset("个份了上过醒")
# Before 叫, what makes it a naming: a relation or a pet just named, keeping one, a name.
_NAMING = re.compile("(?:" + "|".join(_RELATIONS) + "|养|名|姓|只|条)[^。！？!?]{0,8}$")
_SURNAME = f"[{''.join(sorted(_SURNAMES))}]"
_TITLED = re.compile(f"({_SURNAME}(?:{'|'.join(_TITLES)}))")
_CALLED = re.compile(r"(?:名字叫|名字是|名叫|叫做|叫|喊)")
_FAMILIAR = re.compile(f"[小老]{_SURNAME}")
# 小 / 老 and a surname is a nickname so often that the dictionary counts those as words
# too (小张, 老马); these few are words instead.
_NOT_FAMILIAR_WORDS = """小麦 小孔 小农 小钱 小商 小房 老农 小熊 小米 小康 小于 小龙 小金 老姜
小毛 小路 老路"""
_NOT_FAMILIAR = frozenset(_NOT_FAMILIAR_WORDS.split())
_RELATED = re.compile("|".join(_RELATIONS))


def has_cjk(text: str) -> bool:
    """Whether `text` holds a Chinese character (only then are these rules read)."""
    return _CJK.search(text) is not None


@functools.cache
def _lexicon() -> tuple[frozenset[str], frozenset[str]]:
    """From jieba's dictionary, words of two or three characters counted 50 times or more:
    those it does not tag as person names (~37k, the common words), and those it does
    (小雨, 李白: names, but also people anyone may mention). Read once, ~0.6 s, ~8 MB;
    found without importing jieba, whose import sets up logging."""
    spec = importlib.util.find_spec("jieba")
    if spec is None or spec.origin is None:
        raise RuntimeError("jieba is not installed: it is a dependency of memray-ai")
    words: set[str] = set()
    people: set[str] = set()
    with open(os.path.join(os.path.dirname(spec.origin), "dict.txt"), encoding="utf-8") as f:
        for line in f:
            word, freq, tag = line.split()
            if 2 <= len(word) <= 3 and int(freq) >= _COUNTED:
                (people if tag.startswith("nr") else words).add(word)
    return frozenset(words), frozenset(people)


def _word(text: str) -> bool:
    return text in _lexicon()[0]


def introduced(text: str) -> frozenset[str]:
    """The names `text` introduces, and each full name's given name."""
    if not has_cjk(text):
        return frozenset()
    found = {m[1] for m in _TITLED.finditer(text) if _titled(text, m.start(1), m.end(1))}
    found.update(m[0] for m in _FAMILIAR.finditer(text)
                 if m[0] not in _NOT_FAMILIAR and _ends_after(text, m.end()))
    for m in _CALLED.finditer(text):
        found.update(_called(text, m.start(), m.end()))
    for m in _RELATED.finditer(text):
        found.update(_shaped(text, m.end()))
    given = {name[1:] for name in found if len(name) == 3 and _full(name)
             and not _word(name[1:])}  # 李国庆 answers to 国庆 no more than the holiday
    return frozenset(found | given)


def _titled(text: str, start: int, end: int, after_relation: bool = False) -> bool:
    """Whether a surname and a title at text[start:end] stand alone: nothing of a word
    before, unless a relation ("楼下张阿姨", "客户郑先生"; not "语文老师"), and a
    one-character title that does not begin the next word ("王总明天", not "这周总是")."""
    if text[start - 1:start] in _COUNTING or not (after_relation or _starts_word(text, start)):
        return False  # "语文老师"; "这周总是", "一张总结": a week, a sheet
    return end - start > 2 or text[end:end + 1] in _ENDS or not _word(text[end - 1:end + 1])


def _ends_after(text: str, at: int) -> bool:
    """Whether a name may end at `at`: the text ends, or what follows is no Chinese, or a
    character that ends a name, or the start of a word ("小刘还", "小刘明天")."""
    return (at >= len(text) or text[at] in _ENDS or not _CJK.match(text[at])
            or _word(text[at:at + 2]))


def _run(text: str, at: int, most: int, stops: frozenset[str] = _ENDS) -> str:
    """Up to `most` characters of Chinese from `at`, stopping before one that ends a name."""
    out = ""
    for ch in text[at:at + most]:
        if ch in stops or not _CJK.match(ch):
            break
        out += ch
    return out


def _called(text: str, start: int, at: int) -> list[str]:
    """After 叫 or 喊: two or three characters up to one that ends a name ("叫豆豆",
    "叫陈磊", "都叫她芳姐"; not "叫我", "叫了外卖", "叫妈妈来", "你叫什么"). A common word
    is a name only where a relation or a pet was just named ("养了一只柯基，叫可乐")."""
    nxt = text[at:at + 1]
    if not nxt or nxt in _ASKING or nxt in _NOT_CALLED:
        return []
    if nxt in _PRONOUNS:
        # "喊他马总", "叫她芳姐": a name after him or her only if it has a name's shape,
        # since "叫他去买菜" asks him to do something
        name = _run(text, at + 1, 3)
        shaped = name.endswith(_TITLE_ENDS) or name[:1] in "小老阿"
        return [name] if nxt in "他她" and len(name) >= 2 and shaped else []
    name = _run(text, at, 3)
    if len(name) < 2 or name in _RELATIONS:
        return []
    # a common word, or 叫 opening a clause ("，叫外卖吧"): a name only after a naming,
    # looked for in the few characters a relation and what follows it take
    if _word(name) or _word(name[:2]) or not start or text[start - 1] in _CLAUSE:
        return [name] if _NAMING.search(text, max(0, start - 12), start) else []
    return [name]


def _shaped(text: str, at: int) -> list[str]:
    """After a relation: what has a name's shape and is no common word ("王若琳", "小张",
    "咪咪"; not "高考完", "天天", "小气")."""
    titled = _TITLED.match(text, at)  # "客户郑先生", "导师吴教授"
    if titled and _titled(text, at, titled.end(1), after_relation=True):
        return [titled[1]]
    first, pair = text[at:at + 1], text[at:at + 2]
    if _FAMILIAR.fullmatch(pair):  # 小张: no dictionary tells these apart
        return [] if pair in _NOT_FAMILIAR else [pair]
    if first in _SURNAMES:
        name = first + _run(text, at + 1, 2)
        if len(name) < 2 or name in _RELATIONS or any(map(_word, {name, name[:2], name[1:]})):
            return []
        return [name]
    if (len(pair) == 2 and _CJK.match(pair[1]) and pair[1] not in _ENDS
            and (first in "小老阿" or pair[0] == pair[1]) and not _word(pair)):
        return [pair]
    # two characters that a pronoun takes up: "我老婆秀梅，她…" (not "奶奶腿疼，明天…")
    after = text[at + 2:at + 4].lstrip("，,")
    if (len(pair) == 2 and all(_CJK.match(c) and c not in _ENDS for c in pair)
            and after[:1] in ("他", "她") and not _word(pair) and pair not in _RELATIONS):
        return [pair]
    return []


def fulls_in(text: str, surname: str) -> frozenset[str]:
    """The full names of `surname` that `text` says where a word starts ("钱永福那边…")."""
    out = set()
    at = text.find(surname)
    while at >= 0:
        run = surname + _run(text, at + 1, 2)
        if _starts_word(text, at) and _full(run):
            out.add(run)
        at = text.find(surname, at + 1)
    return frozenset(out)


def mentioned(names: frozenset[str], text: str) -> frozenset[str]:
    """The names of `names` that `text` contains, less those inside a longer one it
    contains (a question about 王若琳 names her, not also 若琳 as someone else)."""
    hits = [n for n in names if n in text]
    return frozenset(n for n in hits if not any(n != m and n in m for m in hits))


def _full(name: str) -> bool:
    """Whether `name` has the shape of a full name: a surname and one or two characters,
    no title, no nickname, no common word (刘晨, 王若琳; not 马总, 小刘, 周末)."""
    return (2 <= len(name) <= 3 and name[0] in _SURNAMES and _CJK.match(name[1:]) is not None
            and not name.endswith(_TITLE_ENDS) and not _TITLED.match(name)
            and not _word(name[:2]))


def _starts_word(text: str, at: int) -> bool:
    """Whether a word may start at `at`: the text starts, or punctuation, a particle or
    other character that ends a name is before it, but not a number or a demonstrative
    (一段时间, 这周) nor 小 / 老 / 阿 (小刘 is a nickname)."""
    before = text[at - 1:at]
    return not before or ((before in _ENDS or not _CJK.match(before)) and before not in _COUNTING)


def _surname_of(name: str) -> str:
    """The surname a nickname or a title carries (小钱, 老葛, 郑医生 → 钱, 葛, 郑), or ""."""
    if _FAMILIAR.fullmatch(name):
        return name[1]
    titled = _TITLED.fullmatch(name)
    return titled[1][0] if titled else ""


def _by_surname(full: str) -> frozenset[str]:
    """What a full name is called by through its surname: 小刘, 老刘, 刘总, 刘姐 …"""
    return frozenset({"小" + full[0], "老" + full[0]} | {full[0] + t for t in _TITLES})


def _by_given(full: str) -> frozenset[str]:
    """What a full name is called by through its given name: the given name (of two
    characters), its last character doubled, after 阿 or before 姐 / 哥 (若琳, 琳琳; 芳姐)."""
    last = full[-1]
    out = {last * 2, "阿" + last, last + "姐", last + "哥"}
    return frozenset(out | ({full[1:]} if len(full) == 3 else set()))


def groups(known: frozenset[str], query: str,
           said: Callable[[str], bool] = lambda _: True,
           fulls_of: Callable[[str], frozenset[str]] = lambda _: frozenset(),
           ) -> frozenset[frozenset[str]]:
    """The people `query` names, each as the forms of their name to look for in memories.

    A full name in the query stands for that person (`_forms`) if it is known, or if the
    user's texts say it (`said`) and one of its forms is known (刘晨 asked, 小刘 known). A
    known name the query holds stands for the one known full name it is a form of (若琳 →
    王若琳; 马总 → 马建国, if no other known full name is a 马), else, for a nickname or a
    title, for the one full name of its surname the user's texts say (`fulls_of`: 老钱 →
    钱永福) that is no famous name (李白), else for itself."""
    fulls = frozenset(n for n in known if _full(n))
    surnames = Counter(f[0] for f in fulls)
    out = set()
    for candidates in _asked_fulls(query):
        for full in candidates:  # the longest the user says: 张桂芳, not also 张桂
            forms = _forms(full, known, fulls, surnames)
            if full in known or (forms & known - {full} and said(full)):
                out.add(forms)
                break
    covered = set().union(*out)
    for name in mentioned(known, query) - covered:
        owners = [f for f in fulls if name == f or name in _by_given(f)
                  or (name in _by_surname(f) and surnames[f[0]] == 1)]
        surname = _surname_of(name)
        if not owners and surname and not surnames[surname]:
            owners = list(fulls_of(surname) - _lexicon()[1])
        out.add(_forms(owners[0], known, fulls, surnames) if len(owners) == 1
                else frozenset({name}))
    return frozenset(out)


def _asked_fulls(query: str) -> list[list[str]]:
    """The full names a query may hold, longest first for each place: a surname where a
    word starts (not 小刘's 刘), up to a question word (王磊怎么样 → 王磊), in a full name's
    shape and not in a word (高血压, 孙子)."""
    out = []
    for i, ch in enumerate(query):
        if ch not in _SURNAMES or not _starts_word(query, i):
            continue
        run = ch + _run(query, i + 1, 2, _ENDS | _ASKING)
        if _word(run) or _word(run[1:]) or run in _RELATIONS:
            continue
        out.append([f for f in dict.fromkeys((run, run[:2])) if _full(f)])
    return out


def _forms(full: str, known: frozenset[str], fulls: frozenset[str],
           surnames: Counter[str]) -> frozenset[str]:
    """What the person named `full` is looked for by: the name; its given name and given
    nicknames (若琳, 琳琳, and the user's 芳姐) that are no common word (宝宝, 明明) and no
    other known full name's; the user's surname forms (小刘, 马总) if no other known full
    name has that surname."""
    others = fulls - {full}
    # the given name and its doubled last character whether the user used them or not
    # (琳琳 for 若琳), the other nicknames only if they did (芳姐)
    plain = {full[-1] * 2} | ({full[1:]} if len(full) == 3 else set())
    # a form in the dictionary at all is anyone's (宝宝, 丽丽 are what babies and girls
    # are called), not this person's
    words, people = _lexicon()
    forms = {f for f in _by_given(full) if (f in plain or f in known)
             and f not in words and f not in people
             and not any(f in _by_given(o) for o in others)}
    if surnames[full[0]] - (full in fulls) == 0:
        forms |= _by_surname(full) & known
    return frozenset(forms | {full})

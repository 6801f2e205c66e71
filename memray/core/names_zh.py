"""Chinese names where a text introduces them: the entity index's rules for Chinese.

core/entities.py knows a Latin-script name by its capital; Chinese writes none. What a
Chinese speaker does instead is introduce a person or a pet the first time, and the index
reads the name there:
- after 叫 / 名叫 / 叫做 / 名字叫 / 名字是 ("我家狗叫豆豆", "新同事叫陈磊");
- after a word for a relation, when what follows has a name's shape ("我表妹王若琳",
  "同事小张", "我家猫咪咪"): a surname and one or two characters, 小 / 老 / 阿 and one, or
  a doubled character;
- a surname before a title ("李老师", "王总", "张姐").
A full name also answers to its given name (王若琳 → 若琳), as people are later asked
about. Once any of a user's texts introduced a name, every memory that contains it names
it, so the name is read in the user's own words, not from a list of names. The lists here
are closed classes of the language (relations, titles, common surnames, characters that
end a name), not phrasings.
"""

from __future__ import annotations

import re

_CJK = re.compile(r"[\u4e00-\u9fff]")
# Common surnames, less those whose character mostly begins an ordinary word (包, 向,
# 连, 常, 于: "妈妈包饺子" names no one).
_SURNAMES = frozenset(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘蒋蔡余杜叶程苏"
    "魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚"
    "邵万钱严覃武戴莫孔汤文樊葛邢安乔庞颜倪庄聂章鲁岳翟殷詹欧耿兰焦俞柳祝舒阮柯纪梅童凌季裴霍"
    "涂苗翁冉骆蓝辛靳柴蒙鲍喻祁蒲房滕饶牟艾阳穆农卓古吉缪简项芦麦褚娄窦戚岑景党宫卜晏席卫柏"
    "宗瞿桂佟臧闵苟邬边卞姬师仇栾隋商刁沙荣巫寇桑郎甄丛仲虞敖巩佘池查麻苑迟邝")
# Words for whom a person is to the speaker, and the pets a name follows.
_RELATION_WORDS = """
爸爸 妈妈 父亲 母亲 老公 老婆 丈夫 妻子 太太 爱人 儿子 女儿 哥哥 姐姐 弟弟 妹妹 表哥 表姐 表弟
表妹 堂哥 堂姐 堂弟 堂妹 爷爷 奶奶 外公 外婆 姥姥 姥爷 叔叔 阿姨 舅舅 舅妈 姑姑 姨妈 婶婶 侄子
侄女 外甥 外甥女 孙子 孙女 男朋友 女朋友 男友 女友 对象 朋友 好友 闺蜜 发小 同学 室友 舍友 同事
老板 上司 领导 经理 主管 组长 导师 教练 医生 邻居 房东 客户 搭档 合伙人 师傅 徒弟 学生 宝宝
狗狗 小狗 猫咪 小猫 狗 猫 兔子 鹦鹉 仓鼠 宠物 我哥 我姐 我弟 我妹
"""
_TITLE_WORDS = "老师 总 经理 医生 大夫 阿姨 叔叔 师傅 律师 教授 主任 老板 姐 哥 工"
# longest first, so that a pattern of them takes 表妹 before 妹
_RELATIONS = sorted(_RELATION_WORDS.split(), key=len, reverse=True)
_TITLES = sorted(_TITLE_WORDS.split(), key=len, reverse=True)
# Characters a name stops before: punctuation, particles, pronouns, common verbs and
# adverbs that follow a subject.
_ENDS = frozenset(
    "，。！？、；：,.!?;: \n的了着过说也和跟与在是都又还就才要会能想给让把被对从到去来这那今"
    "昨前后上下最很太不没每刚已正吗呢吧啊呀哦嘛我你他她它们一两几有做再找带问请叫帮非真特"
    "好家看见约陪等谢")
_PRONOUNS = frozenset("我你他她它咱您")
_ASKING = frozenset("什啥谁哪怎多几")
# Common words that a surname or 小 / 老 / 阿 begins: never a name after a relation.
_COMMON_WORDS = """
马上 周末 周一 周二 周三 周四 周五 周六 周日 周天 周年 高兴 方便 方面 常常 许多 于是 万一 白天
毛病 时候 时间 全部 文件 关系 关心 应该 成功 华为 司机 车上 车里 江边 小时 小心 小孩 小学 小区
小说 小吃 小狗 小猫 老家 老是 老公 老婆 老师 老板 老人 阿姨 单位 明天 明年 安排 安全 和我 康复
小于 小米 小康 小包 小路 老路 小牛 老牛 小马 小石 老龙 小龙 老黄 小黄 小白 老白 小宋 老宋 小名
"""
_WORDS = frozenset(_COMMON_WORDS.split())
_TITLED = re.compile(
    f"([{''.join(sorted(_SURNAMES))}]"
    f"(?:{'|'.join(_TITLES)}))")
_CALLED = re.compile(r"(?:名字叫|名字是|名叫|叫做|叫|喊)")
# 小 / 老 and a surname: how colleagues and friends are called ("小刘", "老马"), cue or not.
_FAMILIAR = re.compile(f"[小老][{''.join(sorted(_SURNAMES))}]")
_RELATED = re.compile("|".join(_RELATIONS))


def has_cjk(text: str) -> bool:
    return _CJK.search(text) is not None


def introduced(text: str) -> frozenset[str]:
    """The names `text` introduces, and each full name's given name."""
    if not has_cjk(text):
        return frozenset()
    # a one-character title must end there too: "张总说", not "高工资" nor "一张总结"
    found = {m[1] for m in _TITLED.finditer(text) if _starts_before(text, m.start(1))
             and (len(m[1]) > 2 or _ends_after(text, m.end(1)))}
    found.update(m[0] for m in _FAMILIAR.finditer(text) if _ends_after(text, m.end()))
    for m in _CALLED.finditer(text):
        found.update(_called(text, m.end()))
    for m in _RELATED.finditer(text):
        found.update(_shaped(text, m.end()))
    given = {name[1:] for name in found
             if len(name) == 3 and name[0] in _SURNAMES and name[:2] not in _WORDS}
    return frozenset(n for n in found | given if n[:2] not in _WORDS)


def _run(text: str, at: int, most: int) -> str:
    """Up to `most` characters of Chinese from `at`, stopping before one that ends a name."""
    out = ""
    for ch in text[at:at + most]:
        if ch in _ENDS or not _CJK.match(ch):
            break
        out += ch
    return out


def _starts_before(text: str, at: int) -> bool:
    """Whether a name may start at `at`: nothing of a word before it ("楼下张阿姨", "王总";
    not "语文老师")."""
    return at == 0 or text[at - 1] in _ENDS or not _CJK.match(text[at - 1])


def _ends_after(text: str, at: int) -> bool:
    """Whether a name may end at `at`: the text ends, or a character that ends a name
    follows ("张姐说", not "温哥华"; "小刘还", not "小米粥")."""
    return at >= len(text) or text[at] in _ENDS or not _CJK.match(text[at])


def _called(text: str, at: int) -> list[str]:
    """After 叫 or 喊: two or three characters up to one that ends a name ("叫豆豆",
    "叫陈磊", "都叫她芳姐"; not "叫我", "叫了外卖")."""
    if text[at:at + 1] in _ASKING:  # "我叫什么名字？"
        return []
    if at < len(text) and text[at] in _PRONOUNS:
        # "喊他马总", "叫她芳姐": a name after him or her only if it has a name's shape,
        # since "叫他去买菜" asks him to do something
        name = _run(text, at + 1, 3)
        shaped = name[-1:] in _TITLES or name[:1] in "小老阿"
        return [name] if text[at] in "他她" and len(name) >= 2 and shaped else []
    name = _run(text, at, 3)
    return [name] if len(name) >= 2 else []


def _shaped(text: str, at: int) -> list[str]:
    """After a relation: what has a name's shape ("王若琳", "小张", "咪咪"), else nothing
    ("同事推荐了…" has none)."""
    first = text[at:at + 1]
    if first in _SURNAMES:
        name = first + _run(text, at + 1, 2)
        return [name] if len(name) >= 2 else []
    pair = text[at:at + 2]
    if len(pair) == 2 and _CJK.match(pair[1]) and pair[1] not in _ENDS and (
            first in "小老阿" or pair[0] == pair[1]):
        return [pair]
    return []


def mentioned(names: frozenset[str], text: str) -> frozenset[str]:
    """The names of `names` that `text` contains, less those inside a longer one it
    contains (a question about 王若琳 names her, not also 若琳 as someone else)."""
    hits = [n for n in names if n in text]
    return frozenset(n for n in hits if not any(n != m and n in m for m in hits))

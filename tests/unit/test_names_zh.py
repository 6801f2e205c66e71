"""Chinese names where a text introduces them (core/names_zh.py), and how the entity index
(core/entities.py) finds them in a question and in the memories that name them."""

from __future__ import annotations

import pytest

from memray.core.entities import Names, may_name
from memray.core.names_zh import fulls_in, groups, introduced, mentioned


@pytest.mark.parametrize(("text", "names"), [
    ("我家狗叫豆豆，很乖", {"豆豆"}),  # after 叫
    ("新来的同事叫陈磊。", {"陈磊"}),
    ("我表妹王若琳今年考研", {"王若琳", "若琳"}),  # a full name answers to its given name
    ("同事小张帮了我", {"小张"}),  # after a relation, in a name's shape
    ("我同事李明说他要辞职", {"李明"}),
    ("我家猫叫咪咪", {"咪咪"}),
    ("楼下张阿姨送了饺子", {"张阿姨"}),  # a surname and a title
    ("王总说可以请假", {"王总"}),
    ("李老师布置了作业", {"李老师"}),
    ("今天小刘还带了点心", {"小刘"}),  # 小 / 老 and a surname, with no cue
    ("大家都喊他马总", {"马总"}),  # after him: only what has a name's shape
    ("我们都叫她芳姐", {"芳姐"}),
    ("客户郑先生又改需求了", {"郑先生"}),  # a title after a relation
    ("张医生说没事", {"张医生"}),  # a title is no given name
    ("张总和李总下午开会", {"张总", "李总"}),
    ("我女朋友叫小雨", {"小雨"}),
    ("家里养了一条柯基，叫可乐", {"可乐"}),  # a common word, where a pet was just named
    ("我儿子小宝对鸡蛋过敏", {"小宝"}),
    ("我老婆秀梅，她管收银", {"秀梅"}),  # two characters a pronoun takes up
])
def test_a_name_is_read_where_a_text_introduces_it(text: str, names: set[str]) -> None:
    assert introduced(text) == names


@pytest.mark.parametrize("text", [
    "老板叫我加班",  # asks me to
    "叫他去买菜",  # asks him to: nothing shaped like a name follows
    "我叫了外卖",
    "你还记得我叫什么吗？",  # a question, not a name
    "我是一名小学语文老师",  # 文老师: the surname is the end of a word
    "妈妈包饺子",  # 包 begins a word far more often than it names anyone
    "她要回温哥华工作",  # 哥 inside a place's name
    "我老公周末加班",  # 周末 is a word
    "我朋友推荐了一家店",  # no name's shape after the relation
    "我小时候住在乡下",
    "这份工作的高工资",  # a one-character title must end the name
    "写了一张总结",
    "I have a dog called Max",  # no Chinese: the capitals rule reads it
    # After a relation, a common word (jieba's dictionary) names no one:
    "儿子高考完了",
    "妈妈天天做饭",
    "老公小气得很",
    "爷爷高血压又犯了",
    "同事商量了一下",
    "对小麦过敏",  # 小 and a surname that is a word
    "懒得做饭，叫外卖吧",  # 叫 opening a clause, with nothing named before it
    "这周总是下雨",  # 周 after 这 is a week
    "奶奶腿疼，明天带她去医院",  # no pronoun takes it up
])
def test_what_is_no_name(text: str) -> None:
    assert introduced(text) == frozenset()


def test_a_question_names_the_longest_name_it_contains() -> None:
    known = frozenset({"王若琳", "若琳", "小刘"})
    assert mentioned(known, "王若琳考上了吗") == {"王若琳"}
    assert mentioned(known, "若琳和小刘认识吗") == {"若琳", "小刘"}
    assert mentioned(known, "今天吃什么") == frozenset()


def test_the_index_finds_every_memory_that_contains_an_introduced_name() -> None:
    texts = ["我表妹王若琳今年考研", "若琳对芒果过敏", "琳琳来住了一周", "同事小刘结婚了"]
    names = Names(texts)
    asked = names.named("若琳对什么过敏？")
    assert asked == {"王若琳|琳琳|若琳"}  # one person, by the forms of her name
    # Every text that contains a form of the name, wherever it was introduced.
    assert names.share(asked, 4).tolist() == [1.0, 1.0, 1.0, 0.0]
    both = names.named("若琳和小刘谁先结婚？")
    assert names.share(both, 4).tolist() == [0.5, 0.5, 0.5, 0.5]


def test_a_person_is_asked_about_by_another_form_of_their_name() -> None:
    known = frozenset({"小刘", "芳姐", "马建国", "建国", "马总", "老马", "张阿姨"})
    # A full name never introduced, asked: linked to the nickname the user uses.
    assert groups(known, "刘晨今年有哪些大事？") == {frozenset({"刘晨", "晨晨", "小刘"})}
    assert groups(known, "孙芳帮过我什么忙？") == {frozenset({"孙芳", "芳芳", "芳姐"})}
    # A nickname or title asked: the one known full name of that surname, with its forms.
    assert groups(known, "马总做过什么决定？") == {
        frozenset({"马建国", "国国", "马总", "老马"})}  # 建国 is a word: not looked for
    assert groups(known, "周末有什么安排？") == frozenset()  # 周末 is a word, no name
    assert groups(known, "李华来了吗？") == frozenset()  # a full name linked to no one
    # Words that begin with a surname link to no one (老高 and 孙教授 known).
    ill = frozenset({"老高", "孙教授"})
    assert groups(ill, "我有高血压") == groups(ill, "平时帮忙带孙子") == frozenset()
    assert groups(ill, "羽毛球打得怎么样") == groups(ill, "一段时间") == frozenset()
    # A nickname no introduced full name owns: the one full name of its surname said.
    assert groups(frozenset({"老钱"}), "老钱供的牛肉怎么样？",
                  fulls_of=lambda s: frozenset({"钱永福"}) if s == "钱" else frozenset()) == {
        frozenset({"钱永福", "福福", "老钱"})}
    # One person once: 张桂芳, not also 张桂 (said too, as part of her name)
    said = "隔壁张桂芳帮我们喂猫".__contains__
    assert groups(frozenset({"张姐"}), "张桂芳做过哪些事？", said=said) == {
        frozenset({"张桂芳", "桂芳", "芳芳", "张姐"})}
    # A full name the user's texts never say names no one.
    assert groups(known, "刘晨来了吗？", said=lambda _: False) == frozenset()
    # Two known people share a surname: their surname forms stand for neither.
    two = frozenset({"王若琳", "若琳", "王磊", "王总"})
    assert groups(two, "王总说了什么？") == {frozenset({"王总"})}
    assert groups(two, "王磊怎么样？") == {frozenset({"王磊", "磊磊"})}


def test_a_name_is_forgotten_when_the_texts_that_introduced_it_are_gone() -> None:
    texts = ["我家狗叫豆豆", "豆豆今天打了疫苗", "小刘请我吃饭"]
    names = Names(texts)
    assert names.named("豆豆怎么样") == {"豆豆"}
    # Drop the introduction: 豆豆 is now only a word in one text, no name.
    after = names.patched([1, 2], ["今天去爬山了"], [texts[0]], [True])
    assert after.named("豆豆怎么样") == frozenset()
    assert after.named("小刘请我吃了什么") == {"小刘"}
    assert after.share(frozenset({"小刘"}), 3).tolist() == [0.0, 1.0, 0.0]
    # Introduced again by a new text: found in the old rows too.
    again = after.patched([0, 1, 2], ["我的狗叫豆豆"], [], [True])
    assert again.share(again.named("豆豆呢"), 4).tolist() == [1.0, 0.0, 0.0, 1.0]


def test_only_a_query_that_could_name_someone_builds_the_index() -> None:
    assert may_name("What did Melanie paint?")
    assert may_name("若琳怎么样？")
    assert not may_name("what did she paint?")


def test_the_full_names_a_text_says_for_a_surname() -> None:
    assert fulls_in("钱永福那边前天送来的牛腩不新鲜", "钱") == {"钱永福"}
    assert fulls_in("给供牛肉的钱总打电话，钱包落在店里了", "钱") == frozenset()  # a title, a word
    assert fulls_in("零花钱不够", "钱") == frozenset()  # inside a word


def test_names_asks_its_texts_for_unintroduced_full_names() -> None:
    texts = ["给我们供牛肉的钱总又涨价了", "老钱说下个月再涨", "钱永福那边送来的牛腩不新鲜",
             "今天生意不错"]
    names = Names(texts)
    asked = names.named("老钱的牛肉出过什么问题？")
    # 老钱 is 钱永福, the one full name of 钱 said, who is also 钱总 (introduced as one)
    assert asked == {"福福|老钱|钱总|钱永福"}
    assert names.share(asked, 4).tolist() == [1.0, 1.0, 1.0, 0.0]


def test_forms_that_are_anyones_or_another_persons_are_not_looked_for() -> None:
    # 宝宝 is what any baby is called; 明明 is a word ("obviously")
    assert groups(frozenset({"王宝"}), "王宝怎么样") == {frozenset({"王宝"})}
    assert groups(frozenset({"李明明"}), "李明明呢") == {frozenset({"李明明"})}
    # 琳琳 would be 王若琳's as much as 张琳's: neither is looked for by it
    both = frozenset({"王若琳", "若琳", "张琳"})
    assert groups(both, "张琳呢") == {frozenset({"张琳"})}
    # two known 王: 小王 stands for neither, and neither is looked for by it
    two = frozenset({"王若琳", "若琳", "王磊", "小王"})
    assert groups(two, "小王说什么了") == {frozenset({"小王"})}
    assert groups(two, "若琳呢") == {frozenset({"王若琳", "若琳", "琳琳"})}  # no 小王
    # a famous name the user mentions is nobody's nickname's full name
    assert groups(frozenset({"老李"}), "老李怎么样",
                  fulls_of=lambda _: frozenset({"李白"})) == {frozenset({"老李"})}


def test_an_index_patched_reads_chinese_names_as_one_built_anew() -> None:
    texts = ["我表妹王若琳今年考研", "同事小刘结婚了", "若琳对芒果过敏", "钱永福送来的牛腩不新鲜",
             "老钱说下个月涨价", "我家狗叫豆豆"]
    names = Names(texts[:3])
    patched = names.patched([0, 2], texts[3:], [texts[1]], [True, True, True])
    fresh = Names([texts[0], texts[2], *texts[3:]])
    for query in ("若琳怎么样", "小刘呢", "老钱的牛肉", "豆豆乖吗"):
        assert patched.named(query) == fresh.named(query), query
        assert patched.share(patched.named(query), 5).tolist() == \
            fresh.share(fresh.named(query), 5).tolist(), query

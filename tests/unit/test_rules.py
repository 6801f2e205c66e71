from __future__ import annotations

import pytest

from memray.extract.base import Turn
from memray.extract.rules import RuleExtractor

X = RuleExtractor()


def facts(text: str) -> list[tuple[str | None, str, str]]:
    out = X.extract([Turn("s:0", "user", text)], [])
    return [(f.slot, f.type.value, f.content) for f in out.facts]


@pytest.mark.parametrize(("text", "want"), [
    ("I'm only free after 9 pm; I like writing scripts in Python",
     [("availability", "constraint", "I'm only free after 9 pm"),
      ("like:writing scripts in python", "preference", "I like writing scripts in Python")]),
    ("我平时晚上九点以后才有空，喜欢用 Python 写脚本",
     [("availability", "constraint", "我平时晚上九点以后才有空"),
      ("like:python 写脚本", "preference", "喜欢用 Python 写脚本")]),
    ("我不吃香菜", [("dislike:香菜", "preference", "我不吃香菜")]),
    ("我讨厌香菜", [("dislike:香菜", "preference", "我讨厌香菜")]),
    ("别放香菜", [("dislike:香菜", "preference", "别放香菜")]),
    ("I don't eat cilantro", [("dislike:cilantro", "preference", "I don't eat cilantro")]),
    ("I'm allergic to peanuts", [("diet", "constraint", "I'm allergic to peanuts")]),
    ("我对花生过敏", [("diet", "constraint", "我对花生过敏")]),
    ("My name is Lin", [("name", "identity", "My name is Lin")]),
    ("我叫林小明，是一名数据工程师", [("name", "identity", "我叫林小明"),
                                      ("job", "identity", "是一名数据工程师")]),
    ("I live in Shanghai", [("city", "identity", "I live in Shanghai")]),
    ("我搬到杭州了", [("city", "identity", "我搬到杭州了")]),
    ("My daughter is called Mia", [("family:daughter", "identity", "My daughter is called Mia")]),
    ("I no longer eat meat", [("dislike:meat", "preference", "I no longer eat meat")]),
    ("I have two kids", [("family:kids", "identity", "I have two kids")]),
    ("我喜欢喝咖啡但不喜欢加糖", [("like:咖啡", "preference", "我喜欢喝咖啡"),
                                   ("dislike:加糖", "preference", "不喜欢加糖")]),
    ("I'm 35 years old", [("age", "identity", "I'm 35 years old")]),
    ("我的生日是五月三号", [("birthday", "identity", "我的生日是五月三号")]),
    ("I'm working on a tax report due Friday",
     [("task", "task_state", "I'm working on a tax report due Friday")]),
    # a city after 住 with no 在, the subject dropped or not
    ("我是家庭主妇啦，住高雄", [("job", "identity", "我是家庭主妇啦"),
                                 ("city", "identity", "住高雄")]),
    ("我住板桥", [("city", "identity", "我住板桥")]),
    # a job after 当 / 做 with the subject dropped
    ("在台北当软件工程师", [("job", "identity", "在台北当软件工程师")]),
    ("做会计的", [("job", "identity", "做会计的")]),
    ("我的兴趣是拉二胡", [("hobby:拉二胡", "preference", "我的兴趣是拉二胡")]),
    ("我吃全素", [("diet", "constraint", "我吃全素")]),
    # any animal counted with an animal's measure word
    ("我们家养了一只柴犬", [("pet:柴犬", "fact", "我们家养了一只柴犬")]),
])
def test_facts_in_both_languages(text: str, want: list[tuple[str, str, str]]) -> None:
    assert facts(text) == want


@pytest.mark.parametrize("text", ["hi, how are you?", "thanks!", "今天天气不错",
                                  "What's the weather like tomorrow?", "你觉得呢？", "ok"])
def test_small_talk_and_questions_are_not_facts(text: str) -> None:
    assert facts(text) == []


def test_assistant_turns_are_never_facts() -> None:
    out = X.extract([Turn("s:1", "assistant", "I love Python and I live in Paris")], [])
    assert out.facts == [] and out.forgets == []


@pytest.mark.parametrize(("text", "slots"), [
    ("Delete everything you remember about my working hours", ("availability",)),
    ("把我关于工作时间的记忆全部删掉", ("availability",)),
    ("别再提我住在哪里了", ("city",)),
    ("forget what you know about my diet", ("diet", "like:", "dislike:")),
])
def test_forget_commands_name_slots_and_are_not_facts(text: str, slots: tuple[str, ...]) -> None:
    out = X.extract([Turn("s:0", "user", text)], [])
    assert out.facts == []
    assert [f.slots for f in out.forgets] == [slots]
    assert X.is_urgent(text)


def test_forget_everything() -> None:
    out = X.extract([Turn("s:0", "user", "忘掉你关于我的所有记忆")], [])
    assert out.forgets[0].everything


def test_corrections_and_remember_commands() -> None:
    out = X.extract([Turn("s:0", "user", "我现在换工作了，早九晚六，晚上反而没空了")], [])
    assert [(f.slot, f.content, f.correction) for f in out.facts] == [
        ("job", "我现在换工作了", True), ("availability", "早九晚六，晚上反而没空了", True)]
    assert X.is_urgent("I moved to Hangzhou") and X.is_urgent("actually I prefer tea")
    assert not X.is_urgent("I like tea")
    remembered = X.extract([Turn("s:0", "user", "记住：周五前交季度报告")], [])
    assert X.is_urgent("记住：周五前交季度报告")
    assert [f.content for f in remembered.facts] == ["周五前交季度报告"]
    assert remembered.facts[0].importance >= 0.7


@pytest.mark.parametrize(("text", "slots"), [
    ("Delete all of your memories about my working hours", ("availability",)),
    ("删掉我关于工作时间的所有记忆", ("availability",)),
    ("Erase everything you know about where I live", ("city",)),
    ("把我工作相关的记忆全部删掉", ("job",)),
    ("forget that I like jazz", ("like:jazz",)),
    ("忘掉我喜欢爵士乐这件事", ("like:爵士乐",)),
])
def test_a_forget_with_all_words_and_a_topic_is_scoped(text: str, slots: tuple[str, ...]) -> None:
    forget = X.extract([Turn("s:0", "user", text)], []).forgets[0]
    assert (forget.slots, forget.everything) == (slots, False)


@pytest.mark.parametrize("text", [
    "forget everything you know about me", "Please wipe all of your memories",
    "Delete all of my data", "把关于我的记忆全部删掉", "忘掉你关于我的一切", "清空我的所有记忆"])
def test_forget_everything_only_without_a_topic(text: str) -> None:
    forget = X.extract([Turn("s:0", "user", text)], []).forgets[0]
    assert forget.everything and not forget.slots and not forget.terms


@pytest.mark.parametrize(("text", "terms"), [
    ("please delete all your memories about my grandmother's recipes", ("grandmother", "s",
                                                                        "recipes")),
    ("删掉关于我奶奶菜谱的所有记忆", ("奶奶菜谱",)),
])
def test_a_topic_with_no_slot_becomes_terms(text: str, terms: tuple[str, ...]) -> None:
    forget = X.extract([Turn("s:0", "user", text)], []).forgets[0]
    assert (forget.terms, forget.slots, forget.everything) == (terms, (), False)


@pytest.mark.parametrize(("first", "second"), [
    ("我不吃香菜", "我讨厌香菜味的东西"),
    ("我喜欢咖啡", "我喜欢喝咖啡"),
    ("I hate cilantro", "I can't stand the taste of cilantro"),
    ("I like tea", "I love drinking tea"),
])
def test_paraphrased_objects_meet_in_one_slot(first: str, second: str) -> None:
    assert facts(first)[0][0] == facts(second)[0][0]


@pytest.mark.parametrize(("text", "slot", "correction"), [
    ("We moved to Berlin", "city", True),
    ("We've relocated to Lisbon", "city", True),
    ("我们住在成都", "city", False),
    ("I'm learning Japanese", "learning:japanese", False),
    ("我在学日语", "learning:日语", False),
    ("I have a dog named Rex", "pet:dog", False),
    ("我养了一只猫", "pet:猫", False),
    ("I drive a Tesla", "own:tesla", False),
    ("我有一辆自行车", "own:自行车", False),
    ("My hobby is pottery", "hobby:pottery", False),
    ("我的爱好是摄影", "hobby:摄影", False),
    ("Every morning I go for a run", "routine:morning", False),
    ("I now swim every morning instead", "routine:morning", True),
    ("我每天早上跑步", "routine:morning", False),
    ("我现在每天早上游泳", "routine:morning", True),
    ("I'm free every evening", "availability", False),
])
def test_habits_pets_possessions_learning_and_plural_corrections(
        text: str, slot: str, correction: bool) -> None:
    (fact,) = X.extract([Turn("s:0", "user", text)], []).facts
    assert (fact.slot, fact.correction) == (slot, correction)


@pytest.mark.parametrize(("text", "confidence"), [
    ("I think maybe I like jazz, not sure", 0.5), ("我好像有点喜欢爵士", 0.5),
    ("I like jazz. Maybe I'll try salsa", 0.9), ("我喜欢爵士", 0.9)])
def test_hedged_statements_are_low_confidence(text: str, confidence: float) -> None:
    assert X.extract([Turn("s:0", "user", text)], []).facts[0].confidence == confidence


@pytest.mark.parametrize(("text", "slots"), [
    ("Please stop keeping my job in mind.", ("job",)),
    ("我的工作你别再记着了。", ("job",)),
    ("关于我工作的一切都别记了。", ("job",)),
    ("No need to remember my schedule.", ("availability",)),
    ("Don't keep my address.", ("city",)),
])
def test_forgets_in_words_for_not_keeping(text: str, slots: tuple[str, ...]) -> None:
    out = X.extract([Turn("s:0", "user", text)], [])
    assert out.facts == [] and [f.slots for f in out.forgets] == [slots]


def test_what_i_said_about_is_part_of_the_command() -> None:
    (forget,) = X.extract([Turn("s:0", "user", "Forget what I said about my bike.")], []).forgets
    assert forget.terms == ("bike",)


def test_statements_about_keeping_are_not_forgets() -> None:
    assert X.extract([Turn("s:0", "user", "I don't keep pets anymore.")], []).forgets == []


@pytest.mark.parametrize(("text", "want"), [
    ("I don't like jazz anymore.", ("dislike:jazz", "preference")),
    ("其实我现在早上改喝茶了。", ("routine:morning", "behavior")),
    ("I'm flying to Tokyo next week for a conference.", ("task", "task_state")),
    ("下周我要去北京出差。", ("task", "task_state")),
    ("以后叫我豆豆就行。", ("name", "identity")),
])
def test_flips_joint_subjects_habit_changes_plans_and_nicknames(
        text: str, want: tuple[str, str]) -> None:
    assert [(s, t) for s, t, _ in facts(text)] == [want]


def test_a_joint_subject_is_never_a_fragment() -> None:
    got = facts("My partner and I moved to Lisbon.")
    assert sorted(s for s, _, _ in got) == ["city", "family:partner"]
    assert {c for _, _, c in got} == {"My partner and I moved to Lisbon"}



@pytest.mark.parametrize("text", [
    "我住院了", "我住得很远", "住一晚多少钱？", "我住酒店", "他住北京", "我养了一盆花",
    "我想去掉辣椒", "我住七楼", "住在这里很方便", "我住隔壁", "我住附近", "住旅馆", "住满了",
    "住家附近有个公园", "住持在寺庙里", "我还住爸妈家", "当老师真不容易", "做医生太辛苦了",
    "做测试的时候发现了一个bug", "当程序员累不累", "做产品经理需要什么技能", "养了一头长发",
    "我兴趣是什么来着", "这份资料里关于我住址的那行帮我去掉", "请把聊天记录里我对象的名字去掉",
    "帮我把资料全部移除", "这个记录删一下", "你的记忆里的东西不用删"])
def test_staying_somewhere_editing_a_document_or_a_dish_are_no_facts_or_forgets(
        text: str) -> None:
    out = X.extract([Turn("s:0", "user", text)], [])
    assert out.facts == [] and out.forgets == []


@pytest.mark.parametrize(("text", "slot"), [
    ("我的过敏记录不用去掉", "diet"), ("医生说我的过敏记录不能删", "diet"),
    ("去掉辣椒，记录一下我不吃辣", "dislike:辣"), ("记录一下，我喜欢爵士乐，别删", "like:爵士乐")])
def test_keeping_a_record_is_never_a_forget(text: str, slot: str) -> None:
    out = X.extract([Turn("s:0", "user", text)], [])
    assert out.forgets == [] and [f.slot for f in out.facts] == [slot]


@pytest.mark.parametrize(("text", "slots", "terms"), [
    ("从你的记忆里拿掉我住哪里", ("city",), ()),
    ("学日文那件事麻烦从你的记忆里拿掉", (), ("学日文",)),
])
def test_removing_from_what_is_kept_in_any_words_is_a_forget(
        text: str, slots: tuple[str, ...], terms: tuple[str, ...]) -> None:
    out = X.extract([Turn("s:0", "user", text)], [])
    assert out.facts == []
    assert [(f.slots, f.terms) for f in out.forgets] == [(slots, terms)]

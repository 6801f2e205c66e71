"""Topics: what a question is about and what a memory is about, from Chinese and English
words, so that a question can reach the memories of its topic that the embedding misses.

MiniLM places "When would suit a deep-work discussion?" far from "I'm only free after
9 pm" (cosine 0.14), "what should I cook tonight?" far from "I am vegetarian" (0.28), and
it barely reads Chinese at all. Each topic is a small lexicon of its subjects (foods,
pets, family members, sports ...) matched on both sides, plus, for the query, the words
that ask about it ("when", "where", "几点"), plus the memory slots that belong to it.

A memory's topics come from its slot (extracted facts; a verbatim memory is classified
by the rule classifier at search time, cached by content; nothing stored changes) and
from the subjects its text names. Slots that carry an object (like:, dislike:, hobby:,
own:) only name the topic their object is about: "like:writing scripts in python" is not
food, "dislike:猪肉" is. The lexicons are small and general on purpose; what they miss,
similarity and keywords may still catch (core/ranking.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from memray.extract.rules import classify
from memray.hanzi import simplified


@dataclass(frozen=True)
class Topic:
    name: str
    subjects: re.Pattern[str]  # things of the topic, named by a query or by a memory
    cues: re.Pattern[str] | None = None  # how a query asks about it ("when", "几点")
    marks: re.Pattern[str] | None = None  # how a memory states it ("9 pm", "live in")
    slots: tuple[str, ...] = ()  # memory slots that are about the topic
    slot_prefixes: tuple[str, ...] = ()  # slot families that are (whatever the object)
    implied_by: tuple[str, ...] = ()  # a query about one of these is about this one too
    slot_requires: tuple[str, ...] = ()  # the slot counts only with one of these topics


def _p(english: str, chinese: str = "(?!)") -> re.Pattern[str]:
    """English words (whole words, any case, plural -s allowed) or Chinese strings."""
    return re.compile(rf"(?<![a-z])(?:{english})s?(?![a-z])|{chinese}", re.I)


_NEVER = re.compile(r"(?!)")
TOPICS: tuple[Topic, ...] = (
    # What the user eats, what they drink, and the constraints on both (diet).
    Topic("eat", _p(
        r"eat|eating|ate|food|meal|dinner|lunch|breakfast|brunch|supper|snack|cook|cooking|"
        r"recipe|dish|dishes|menu|cuisine|restaurant|takeaway|takeout|groceries|kitchen|oven|"
        r"stove|microwave|bake|baking|hungry|meat|pork|beef|lamb|mutton|chicken|turkey|fish|"
        r"seafood|shellfish|shrimp|prawn|crab|lobster|oyster|nut|peanut|almond|egg|cheese|"
        r"butter|cream|creamy|yogh?urt|tofu|rice|noodle|pasta|pizza|bread|cake|dessert|sweets|"
        r"sugar|chocolate|cand(?:y|ies)|cookie|pancake|fruit|vegetable|salad|soup|mushroom|"
        r"onion|garlic|cilantro|coriander|celery|olive|tomato(?:es)?|chil[il]i?|spicy|curry|"
        r"sushi|ramen|dumpling|burger|sandwich(?:es)?|steak|bbq|barbecue",
        r"吃|饭|餐|菜|食|厨|灶|烤|炒(?!股)|煮|炖|零食|外卖|馆子|小吃|点心|甜点|甜品|宵夜|夜宵|"
        r"荤|肉|(?<!钓)鱼|虾|蟹|海鲜|花生|坚果|蛋|芝士|豆腐|主食|面食|面条|拉面|面包|饺子|"
        r"包子|馒头|粥|汤|辣|糖|巧克力|水果|榴莲|香菇|蘑菇|葱|蒜|香菜|芹菜|内脏|火锅|烧烤|"
        r"烤串|日料|寿司|烘焙|微波炉|烤箱")),
    Topic("drink", _p(
        r"drink|drinking|beverage|coffee|caffeine|latte|espresso|tea|juice|soda|beer|wine|"
        r"alcohol|cocktail|liquor|smoothie|milk",
        r"喝|饮|茶|咖啡|酒(?!店|精)|饮料|(?<!奶)奶(?!奶)")),
    Topic("diet", _p(
        r"diet|vegetarian|vegan|halal|kosher|gluten|celiac|coeliac|lactose|dairy|diabetes|"
        r"diabetic|allergic to (?:nuts|peanuts|shellfish|seafood|eggs|milk|gluten|wheat|soy)|"
        r"pregnant|pregnancy|fasting",
        r"忌口|吃素|素食|清真|乳糖|糖尿病|高血压|痛风|减肥|怀孕|孕期|不碰肉"),
        slots=("diet",), implied_by=("eat", "drink"), slot_requires=("eat", "drink")),
    Topic("schedule", _NEVER,
          cues=_p(r"when|what time|which day|schedule|reschedule|calendar|book (?:a|an|me|us)|"
                  r"appointment|slot|meet|meet up|meeting|catch-up|call|free|available|busy",
                  r"什么时候|何时|几点|哪天|时间|有空|安排|约|开会|预约|档期"),
          marks=_p(r"free|available|busy|swamped|booked|schedule|shift|weekday|weekend|"
                   r"morning|evening|night|afternoon|meeting|until|day off|days off|time off|"
                   r"\d{1,2}(?::\d\d)?\s*(?:am|pm)|o'clock|"
                   r"(?:mon|tues|wednes|thurs|fri|satur|sun)days|daily|every day|time ?zone|"
                   r"(?:pacific|eastern|central|mountain) time|gmt|utc",
                   r"有空|没空|空闲|周末|工作日|早上|上午|中午|下午|晚上|夜里|白天|夜班|早班|晚班|"
                   r"值班|倒班|\d+点|[一二三四五六七八九十两]+点(?!儿)|周[一二三四五六日天]|星期|"
                   r"每天|每周|加班|下班|时差|时区"),
          slots=("availability",), slot_prefixes=("routine:",)),
    # Where the user lives; asked about directly, or by any request for a place to go.
    Topic("place", _p(r"city|neighbou?rhood|hometown", r"城市|老家"),
          cues=_p(r"where|weather|rain|raining|temperature|nearby|near me|around here|local|"
                  r"area|in my city|in town|restaurant|caf[eé]|bar|park|route|trail|venue|"
                  r"beach(?:es)?|day trip|outing|getaway",
                  r"哪里|哪儿|住哪|去哪|附近|周边|天气|下雨|多少度|气温|本地|当地|这边|小区|馆子|"
                  r"餐厅|饭店|公园|路线|海滩|景点|地方|户外"),
          marks=_p(r"live in|lives in|living in|based in|moved to|move to|moving to|"
                   r"relocat\w*|grew up in|i'm from|i am from",
                   r"住在|搬到|搬去|常驻|家在|来自"),
          slots=("city", "hometown")),
    Topic("work", _p(r"work|works|working|job|career|office|colleague|coworker|boss|"
                     r"manager|company|client|profession",
                     r"工作|职业|公司|上班|同事|老板|客户|单位"),
          slots=("job", "task")),
    Topic("family", _p(
        r"family|kid|child|children|son|daughter|wife|husband|partner|fianc[ée]e?|baby|"
        r"babies|grandson|granddaughter|grandchild(?:ren)?|nephew|niece|brother|sister|"
        r"mother|mom|mum|father|dad|parent|cousin|twin|pregnant|pregnancy|nursery",
        r"家人|全家|孩子|儿子|女儿|老婆|老公|妻子|丈夫|宝宝|孙子|孙女|父母|爸|妈|哥|姐|弟|妹|"
        r"怀孕|预产期"),
        slot_prefixes=("family:",)),
    Topic("pets", _p(r"pet|dog|pupp(?:y|ies)|cat|kitten|bird|parrot|rabbit|hamster",
                     r"宠物|狗|猫|鹦鹉|兔|仓鼠"),
          slot_prefixes=("pet:",)),
    Topic("health", _p(
        r"doctor|gp|clinic|hospital|medicine|medication|antibiotic|allerg\w*|pregnan\w*|"
        r"hearing|knee|injur\w*|skin|skincare|sleep|insomnia|health",
        r"医生|医院|体检|药|过敏|怀孕|孕|预产期|耳朵|膝盖|腰|皮肤|护肤|睡眠|失眠|健康")),
    Topic("contact", _p(r"contact|reach me|phone|phone call|email|text me|message me",
                        r"联系|电话|短信|邮件")),
    Topic("occasion", _p(r"wedding|married|marry|engaged|engagement|party|parties|birthday|"
                         r"anniversary|celebrat\w*",
                         r"婚礼|结婚|订婚|生日|聚会|派对|纪念日")),
    Topic("plants", _p(r"plant|garden|gardening|flower|bouquet|rose|lily|lilies|tulip|"
                       r"sunflower|orchid|daisy|daisies",
                       r"植物|花园|园艺|花(?!生|钱|费|粉)|玫瑰|百合|郁金香|向日葵|兰花")),
    Topic("music", _p(r"music|song|band|concert|piano|guitar|jazz|instrument|playlist",
                      r"音乐|歌|钢琴|吉他|琴")),
    Topic("screen", _p(r"movie|film|cinema|series|documentar(?:y|ies)|tv",
                       r"电影|电视剧|纪录片|综艺")),
    Topic("reading", _p(r"book|novel|read|reading", r"书|小说|阅读")),
    Topic("games", _p(r"game|gaming|chess", r"游戏|棋")),
    Topic("sport", _p(
        r"sport|exercise|workout|gym|go running|went running|race|marathon|cycling|bike|"
        r"football|soccer|"
        r"tennis|swim\w*|yoga|hik\w*|climb\w*|fishing",
        r"运动|锻炼|健身|跑步|骑行|足球|踢球|篮球|羽毛球|游泳|爬山|登山|徒步|瑜伽|钓鱼"),
        marks=_p(r"run|runs|ran")),
    Topic("travel", _p(r"trip|travel\w*|vacation|holiday|flight|fly|flying|train|getaway|"
                       r"tour|abroad|commut\w*|subway|metro|bus",
                       r"旅游|旅行|出差|自驾|度假|机票|郊游|通勤|地铁|公交|高铁|火车|飞机"),
          cues=_p(r"away|get to|getting to", r"出门")),
    Topic("learning", _p(
        r"learn\w*|stud(?:y|ying|ies)|course|class|exam|language|lesson|spanish|english|"
        r"japanese|french|dutch|german",
        r"学习|自学|在学|考试|考研|驾照|课|日语|英语|法语|德语|外语"),
        slot_prefixes=("learning:",)),
    Topic("things", _p(r"car|drive|vehicle|laptop|computer|machine|camera|phone|house|flat|"
                       r"apartment", r"车|电脑|显卡|相机|手机|买房|房子|首付")),
    Topic("name", _NEVER, cues=_p(r"name|called", r"名字|叫什么"),
          marks=_p(r"my name|call me", r"我叫|名字"), slots=("name",)),
)
BY_NAME = {t.name: t for t in TOPICS}
# Slots whose object names the topic: "like:ramen" is food, "like:cycling" is sport.
OBJECT_SLOTS = ("like:", "dislike:", "hobby:", "own:")


def query_topics(query: str) -> frozenset[str]:
    """The topics a question asks about (maybe none)."""
    query = simplified(query)
    found = {t.name for t in TOPICS
             if t.subjects.search(query) or (t.cues and t.cues.search(query))}
    return frozenset(found | {t.name for t in TOPICS if found & set(t.implied_by)})


@lru_cache(maxsize=16_384)
def slot_of(content: str) -> str | None:
    """The slot the rule classifier gives a stored sentence (cached by content)."""
    found = classify(content)
    return found[1] if found else None


@lru_cache(maxsize=16_384)
def memory_topics(slot: str | None, content: str) -> frozenset[str]:
    """The topics of a memory: its slot's, and those whose subjects its text names."""
    content = simplified(content)
    names = {t.name for t in TOPICS
             if t.subjects.search(content) or (t.marks and t.marks.search(content))}
    if slot and slot.startswith(OBJECT_SLOTS):  # the topic of the object, not the slot's
        names |= {t.name for t in TOPICS if t.subjects.search(slot.split(":", 1)[1])}
    if slot:
        names |= {t.name for t in TOPICS
                  if (slot in t.slots or slot.startswith(t.slot_prefixes or ("\0",)))
                  and (not t.slot_requires or names & set(t.slot_requires))}
    return frozenset(names)


def topic_slots(topics: frozenset[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(slots, slot prefixes) of the topics, for fetching extracted memories of them."""
    chosen = [BY_NAME[n] for n in sorted(topics) if n in BY_NAME]
    return (tuple(dict.fromkeys(s for t in chosen for s in t.slots)),
            tuple(dict.fromkeys(p for t in chosen for p in t.slot_prefixes)))

"""`RuleExtractor`: Chinese and English patterns; the offline default and the cheap first
layer in front of an LLM. It only keeps what the user states about themselves.

A user turn is split into clauses; each clause is classified into a slot (what the fact
is about) by the first matching rule; neighbouring clauses of the same slot merge into one
fact. Clauses that match no rule (small talk, questions) are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memray.extract.base import Extraction, Fact, Forget, Judge, Turn
from memray.hanzi import simplified
from memray.models import MemoryRecord, MemorySource, MemoryType

_SENTENCE = re.compile(r"(?<=[。！？!?；;\n])|(?<=[.])\s+")
_CLAUSE = re.compile(r"[，,、]\s*|(?<=[\u4e00-\u9fff])(?:但是|但|不过)|"
                     r"\s+(?:and|but|so)\s+(?=i\b|i'm\b|my\b)", re.I)
# Requests to the assistant and quoted text speak of something else than the user.
_REQUEST = re.compile(r"[\"“”「」『』]|(?:^|\s)'[^']+'(?=$|[\s.,!?])|"
                      r"^(?:please |can you |could you )?(?:translate|recommend|"
                      r"suggest|find|write|draft|summari[sz]e|search|look up|tell me|show me)\b|"
                      r"^(?:请)?(?:帮我|帮忙|麻烦你?|给我)?(?:翻译|推荐|写|找|查|搜|总结|想想)",
                      re.I)
_QUESTION = re.compile(r"[?？]\s*$|^(?:what|when|where|who|why|how|can|could|would|do|does|"
                       r"is|are)\b|吗[？?]?$|呢[？?]?$", re.I)

CORRECTION = re.compile(r"现在|搬到|搬去|换工作|换了工作|不再|改成|改为|其实|反而|"
                        r"\b(?:now|moved to|relocated|no longer|actually|anymore|changed|"
                        r"switched|instead)\b", re.I)
# Hedging: what the user is unsure of enters as a candidate (probation), not a fact.
HEDGE = re.compile(r"\b(?:maybe|perhaps|probably|possibly|not sure|unsure|i guess|i suppose|"
                   r"kind of|sort of|might)\b|好像|可能|也许|大概|不确定|说不定|似乎|不一定",
                   re.I)
HEDGED_CONFIDENCE = 0.5
REMEMBER = re.compile(r"^(?:请)?(?:你)?(?:要)?记住[:：,，]?\s*|^(?:please\s+)?remember"
                      r"(?:\s+that)?[:,]?\s+", re.I)
FORGET = re.compile(r"忘掉|忘记|忘了吧|删掉|删除|清空|抹掉|别再提|不要再提|"
                    r"\bforget\b|\b(?:delete|remove|clear)\b.*\b(?:know|remember|memor|data|"
                    r"have|info|about)|"
                    r"\bstop mentioning\b|\bdon't mention\b.*\bagain\b|\berase\b|\bwipe\b|"
                    # Asking not to keep something in memory is a forget too, in any words
                    # for keeping: "stop keeping … in mind", "别再记着…", "不用记住…".
                    r"别再?记(?:着|住|了)|不要再?记(?:着|住)?|不用再?记(?:着|住)?|"
                    # Removing something from the assistant's memory, in any words for
                    # removing ("从你的记忆里拿掉"), within one clause and not negated
                    # ("记忆里的不用删"): a document's records or a dish's chili are no
                    # memory, and a wrong forget deletes what the user wanted kept.
                    r"(?:你的|从)记忆(?:里|中)?[^，,。！？!?不别没]{0,10}(?:拿掉|去掉|移除|清掉|删)|"
                    r"\bstop (?:keeping|remembering|storing|tracking|saving)\b|"
                    r"\bno need to (?:remember|keep)\b|"
                    r"^(?:please\s+)?(?:don't|do not) (?:keep|remember|store|save)\b",
                    re.I)
# Forget-everything needs an "all" word AND no topic left once the command's own words
# are taken out (see `forget_command`): "delete all of your memories about my working
# hours" names a topic and deletes only that.
_FORGET_ALL = re.compile(r"所有|全部|一切|通通|统统|\b(?:everything|all|anything)\b", re.I)
# The words of a forget command itself (verbs, "all", "memories", pronouns, fillers):
# whatever remains after removing them is the topic.
_COMMAND_WORDS = re.compile(
    r"忘掉|忘记|忘了吧|忘了|删掉|删除|删了|删一下|清除|清空|抹掉|拿掉|去掉|移除|清掉|"
    r"别再提|不要再提|别提|再也别|从你的记忆里|从你的记忆中|从记忆里|从记忆中|记忆里|记忆中|"
    r"别再记着|别再记住|别再记|别记着|别记住|别记了|别记|不要再记|不要记着|不要记住|不要记|"
    r"不用再记|不用记着|不用记住|不用记|说过|提过|说的|提到|"
    r"请|麻烦|帮我|你|您|把|将|我|关于|有关|相关|的|所有|全部|一切|通通|统统|"
    r"记忆|记得|知道|信息|内容|这件事|那件事|这事|事情|东西|资料|数据|都|吧|了|啊|呢|吗|掉|"
    r"\b(?:please|kindly|can|could|would|will|you|your|yours|forget|delete|erase|remove|wipe|"
    r"clear|purge|stop|mentioning|mention|don't|dont|do|not|ever|again|all|of|everything|"
    r"anything|every|memories|memory|remembered|remember|know|knew|stored|saved|save|keep|"
    r"kept|have|has|had|got|about|regarding|concerning|related|on|to|me|my|mine|i|i've|"
    r"i'm|what|that|this|these|those|the|a|an|it|is|are|was|info|information|data|stuff|"
    r"things?|details?|now|just|from|in|and|any|there|start|fresh|over|let's|lets|"
    r"okay|ok|keeping|remembering|storing|tracking|saving|mind|no|need|said|say|told|tell|"
    r"mentioned)\b|[^\w\s]|_", re.I)

# Occupations, so a job is recognised by what it names rather than one phrasing.
_JOBS_EN = ("engineer|developer|programmer|doctor|physician|surgeon|dentist|nurse|pharmacist|"
            "teacher|professor|lecturer|tutor|lawyer|attorney|paralegal|designer|architect|"
            "student|manager|director|analyst|accountant|auditor|consultant|researcher|"
            "scientist|writer|editor|journalist|chef|cook|baker|barista|waiter|waitress|"
            "driver|pilot|mechanic|electrician|plumber|carpenter|artist|musician|"
            "photographer|salesperson|marketer|recruiter|librarian|veterinarian|vet|"
            "therapist|psychologist|firefighter|officer|soldier|farmer|cashier|clerk|"
            "intern|freelancer|entrepreneur|founder|ceo|cto|administrator|technician|"
            "translator|agent|banker|trader|economist|statistician|pm|product manager")
_JOBS_ZH = ("工程师|医生|老师|教师|教授|律师|设计师|学生|研究生|博士|经理|总监|程序员|护士|会计|"
            "审计|财务|研究员|分析师|顾问|销售|市场|运营|产品经理|前端|后端|开发|测试|厨师|司机|"
            "记者|编辑|作家|翻译|药剂师|医师|警察|公务员|实习生|创业|老板|自由职业|"
            "咖啡师|摄影师|建筑师|会计师|客服|HR|人事|行政|家庭主妇|全职妈妈|作业员|工人|店员|"
            "服务员|收银员|快递员|外卖员|保安|导游|主播|农民|军人|中介|保姆|社工")


@dataclass(frozen=True)
class Rule:
    slot: str  # "like:" means "like:<object>"
    type: MemoryType
    importance: float
    pattern: re.Pattern[str]


def _r(slot: str, mtype: MemoryType, importance: float, pattern: str) -> Rule:
    return Rule(slot, mtype, importance, re.compile(pattern, re.I))


# First match wins, so negations come before the positive forms they contain.
RULES: tuple[Rule, ...] = (
    _r("diet", MemoryType.CONSTRAINT, 0.9,
       r"过敏|素食|吃(?:全|长|纯)?素|忌口|不能吃|糖尿病|高血压|乳糖不耐|清真|痛风|"
       r"\b(?:allergic|allergy|allergies|vegetarian|vegan|gluten|lactose|diabetic|"
       r"diabetes|halal|kosher|can't eat|cannot eat)\b"),
    _r("dislike:", MemoryType.PREFERENCE, 0.6,
       r"(?:不喜欢|讨厌|不吃|别放|不要放|别加|不要加|受不了|不爱)(?P<obj>.+)|"
       r"\b(?:don't|do not|never|no longer) (?:like|eat|want|drink)\s+(?P<obj2>.+)|"
       r"\b(?:dislike|hate|can't stand|cannot stand)\s+(?P<obj3>.+)|"
       r"\b(?:no|without)\s+(?P<obj4>\w+)\s+(?:please|for me)\b"),
    _r("hobby:", MemoryType.PREFERENCE, 0.5,
       r"\bmy hobb(?:y|ies) (?:is|are|include)\s+(?P<obj>.+)|"
       r"\bi (?:play|practice|practise) (?:the )?(?P<obj2>.+)|"
       r"(?:我的)?(?:爱好|兴趣)(?:爱好)?是(?!什么|啥|哪)(?P<obj3>.+)"),
    _r("like:", MemoryType.PREFERENCE, 0.5,
       r"(?:喜欢|爱吃|爱喝|爱(?!好)|偏好|最爱|热爱)(?P<obj>.+)|"
       r"\b(?:i|we)(?: (?:\w+ly|really|also|just|do|still|totally|kind of|sort of|so)){0,3}"
       r" (?:like|love|enjoy|prefer|adore)\s+(?P<obj2>.+)|"
       r"\b(?:fan of|favou?rite \w+ is)\s+(?P<obj3>.+)"),
    _r("name", MemoryType.IDENTITY, 0.9,
       r"我叫|我的名字|叫我|喊我|称呼我|\bmy name is\b|\bcall me\b|\bi'm called\b|"
       r"\bmy nickname\b|我的小名|我的昵称"),
    _r("family:", MemoryType.IDENTITY, 0.8,
       r"我(?:的)?(?P<obj>女儿|儿子|妻子|老婆|丈夫|老公|妈妈|爸爸|母亲|父亲|孩子|男朋友|女朋友)|"
       r"\bmy (?P<obj2>wife|husband|daughter|son|kids?|children|mother|mom|father|dad|"
       r"partner|boyfriend|girlfriend)\b|"
       r"\bi have (?:a |an |one |two |three |four |\d+ )?(?P<obj3>kids?|children|sons?|"
       r"daughters?|twins)\b"),
    _r("age", MemoryType.IDENTITY, 0.6,
       r"今年(?:刚满|已经|才|快)?[\d一二三四五六七八九十两]{1,4}(?:岁|了)|"
       r"我[\d一二三四五六七八九十两]{1,4}岁(?:了)?|"
       r"\b(?:i'?m|i am|i'll be|i will be|i turned|i just turned) \d{1,3}"
       r"(?: years old| this year)?(?=$|[\s,.!])(?! (?:am|pm|minutes|hours|kg|km|miles))"),
    _r("birthday", MemoryType.IDENTITY, 0.7, r"我的生日|我生日|\bmy birthday\b"),
    _r("city", MemoryType.IDENTITY, 0.8,
       r"我住在|我们住在|我在\S{1,6}(?:住|生活)|搬到|搬去|定居|"
       # A clause that is only 住 and a place ("住高雄", "我住板桥"): not where in a
       # building or near whom (七楼, 隔壁, 爸妈家), not a hotel, a hospital or a stay
       r"^(?:我们?)?(?:现在|目前|一直)?住(?:喺)?"
       r"(?![^，,。]*[楼隔附家这那满旅院宿店校边面里酒馆寺庙一两几哪不得了过的着在])"
       r"[^\s，,。.!?？！]{2,4}(?:啦|呢|哦|喔|啊)?$|"
       r"\b(?:i|we) (?:live|lived) in\b|\b(?:i'm|i am|we're|we are) (?:living|based) in\b|"
       r"\b(?:i|we|i've|we've|i have|we have) (?:just )?(?:moved|relocated) to\b|"
       r"\bbased in\b|\brelocated to\b"),
    _r("hometown", MemoryType.IDENTITY, 0.6,
       r"我来自|老家|\b(?:i'm from|i am from|i grew up in)\b"),
    _r("routine:", MemoryType.BEHAVIOR, 0.5,
       r"^(?!.*\b(?:free|available|busy|unavailable)\b)(?!.*(?:有空|没空|空闲|有时间|没时间))"
       r"(?:.*?\b(?:every|each)\s+(?P<obj>morning|evening|night|day|weekend|week)\b"
       r"|.*?每(?:天|日)?(?P<obj2>早上|早晨|上午|中午|下午|晚上|周末|晚|早|天)"
       r"|.*?\bi (?:usually|normally|always|often) \w+.*?\b(?:in the |at )?(?P<obj3>morning|"
       r"evening|night|weekends?)\b|.*?我习惯(?:在)?(?P<obj4>早上|晚上|周末|中午)?"
       # A habit changed for a time of day is still a habit of that time of day.
       r"|.*?(?P<obj5>早上|早晨|上午|中午|下午|晚上|周末)(?:都|也|就)?(?:改|换)"
       r"|.*?(?:改成|改为|换成)(?:每天)?(?P<obj6>早上|早晨|上午|中午|下午|晚上|周末))"),
    _r("availability", MemoryType.CONSTRAINT, 0.7,
       r"有空|没空|空闲|有时间|没时间|早九晚六|朝九晚五|九九六|996|点以后|点之后|点以前|点前|"
       r"作息|上班时间|下班|加班|"
       r"\b(?:free|available|busy|unavailable|working hours|office hours|"
       r"\d{1,2}\s*(?:am|pm)|\d{1,2}\s*(?:to|-)\s*\d{1,2})\b"),
    _r("job", MemoryType.IDENTITY, 0.8,
       r"换工作|换了工作|我的工作|我的职业|转岗|(?:我是|是一名|是一个|我在\S{1,10}(?:做|当)|"
       r"我(?:现在)?(?:做|当))\S{0,8}(?:" + _JOBS_ZH + r")|"
       # The subject dropped: only a clause that ends on the job ("在台北当工程师",
       # "做会计的"), not "当老师真不容易" or "做测试的时候"
       r"^(?:在\S{1,10})?(?:现在)?(?:做|当)\S{0,8}(?:" + _JOBS_ZH + r")(?:的|嘅|啦)?$|"
       r"我在\S{1,12}(?:工作|上班)|"
       r"\b(?:i work as|i work at|i work for|my job|i changed jobs|new job|"
       r"i(?:'m| am| work as)(?: now| currently)? an? (?:[\w-]+ ){0,3}(?:" + _JOBS_EN + r")s?|"
       r"(?:promoted|hired) (?:to|as) (?:an? )?(?:[\w-]+ ){0,3}(?:" + _JOBS_EN + r"))\b"),
    _r("learning:", MemoryType.FACT, 0.5,
       r"\b(?:i'm|i am|i've been|i have been|we're|we are) (?:learning|studying|taking)\s+"
       r"(?P<obj>.+)|(?:正在|在|开始)(?:学习|自学|学)(?!校|生|院|期)(?P<obj2>.+)|"
       r"报了(?P<obj3>.+?)(?:班|课)"),
    _r("pet:", MemoryType.FACT, 0.5,
       r"\b(?:i|we) (?:have|own|got|adopted) (?:a |an |two |three |\d+ )?(?:\w+ )?"
       r"(?P<obj>dogs?|cats?|puppy|kitten|parrots?|hamsters?|rabbits?|turtles?|fish)\b|"
       r"\bmy (?P<obj2>dog|cat|puppy|kitten|parrot|hamster|rabbit|turtle)\b|"
       r"(?:养了|养着|养)(?:一|两|三|几)?(?:只|条|头)?(?P<obj3>猫|狗|鹦鹉|仓鼠|兔子|乌龟|鱼)|"
       r"(?:养了|养着|养)(?:一|两|三|几)(?:只|条)(?P<obj4>[^\s，。,.!！？?的岁]{1,3})"
       r"(?=$|[，。,.!！？?]|叫|了|啦)"),
    _r("own:", MemoryType.FACT, 0.4,
       r"\b(?:i|we) (?:own|drive|bought|just bought) (?:a |an |the |my )?(?P<obj>.+)|"
       r"我(?:有|买了)(?:一|两)(?:辆|台|套|部)(?P<obj2>.+)"),
    # A plan bound to a near time is task state, so it expires like one: someone doing or
    # about to do something ("I'm flying", "need to finish") by a date ahead.
    _r("task", MemoryType.TASK_STATE, 0.5,
       r"\b(?:(?:i'm|i am|we're|we are)\s+\w+ing|(?:i'll|i will|we'll|we will|going to|"
       r"plan(?:ning)? to|have to|need to)\s+\w+)\b.*\b(?:next (?:week|month|year|weekend|"
       r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)|tomorrow|this (?:weekend|"
       r"week|month|friday|saturday|sunday)|in (?:two|three|\d+) (?:days|weeks))\b|"
       r"(?:下周|下星期|下个月|明天|后天|这周末|下周末|月底|年底|过几天).{0,16}"
       r"(?:要|去|准备|打算|计划|得)|(?:要|准备|打算|计划)\S{0,6}(?:下周|下星期|下个月|明天|"
       r"后天|这周末|下周末|月底|年底)"),
    _r("task", MemoryType.TASK_STATE, 0.5,
       r"正在|在做|在写|在准备|在搞|截止|这周要|下周要|"
       r"\b(?:i'm working on|i am working on|currently (?:building|writing|preparing|working)|"
       r"deadline|due (?:on|by)|this week i need|i need to finish)\b"),
)

# What a forget command may name, mapped to slots.
TOPICS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = tuple(
    (re.compile(p, re.I), slots) for p, slots in (
        (r"工作时间|作息|时间安排|空闲|有空|上班时间|日程|working hours|schedule|availability|"
         r"free time|when i'm free|hours", ("availability",)),
        (r"住|城市|居住|搬家|\bwhere i live\b|\bcity\b|\blocation\b|\baddress\b", ("city",)),
        (r"工作|职业|\bjob\b|\bwork\b|\bcareer\b", ("job",)),
        (r"名字|\bname\b", ("name",)),
        (r"家人|家庭|\bfamily\b", ("family:",)),
        (r"饮食|口味|吃|过敏|\bdiet\b|\bfood\b|\ballerg", ("diet", "like:", "dislike:")),
        (r"喜好|偏好|\bpreferences?\b|\blikes?\b", ("like:", "dislike:")),
        (r"爱好", ("hobby:", "like:")),
        (r"任务|项目|\btasks?\b|\bprojects?\b", ("task",)),
        (r"宠物|猫|狗|\bpets?\b|\bdogs?\b|\bcats?\b", ("pet:",)),
        (r"学习|在学|\blearning\b|\bstudies\b|\bclasses\b|\blessons\b", ("learning:",)),
        (r"习惯|日常|\broutines?\b|\bhabits?\b", ("routine:",)),
        (r"兴趣|\bhobb(?:y|ies)\b", ("hobby:",)),
    ))

_CONJUNCTION = re.compile(r"^(?:and|but|so|also|then|plus|而且|并且|另外|然后|不过|但是|可是|"
                          r"所以|因为)\s*", re.I)
_EDGE = " \t\n;；。.!！"
_OBJ_TRIM = re.compile(r"^[\s的了着过是用]+|[\s。！？!?.，,；;了啊呀吧呢哈哦喔嘛啦]+$")


# "My partner and I moved": the "and" joins two subjects, not two clauses.
_SUBJECT_ONLY = re.compile(r"^(?:my|our)(?:\s+[\w-]+){1,2}$", re.I)


def clauses(text: str) -> list[str]:
    out = []
    for sentence in _SENTENCE.split(text):
        joined = ""
        for part in _CLAUSE.split(sentence):
            clause = _CONJUNCTION.sub("", (part or "").strip(_EDGE)).strip(_EDGE)
            if joined:
                clause, joined = f"{joined} and {clause}", ""
            if _SUBJECT_ONLY.match(clause) and " and " in sentence:
                joined = clause
                continue
            if clause:
                out.append(clause)
        if joined:
            out.append(joined)
    return out


_SELF = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|our|us)\b|我|咱",
                   re.I)


def says_nothing_about_user(text: str) -> bool:
    """Every sentence is a question or a request that names neither the user nor theirs
    (no I, my, we, 我): nothing in it can be a fact about them, whoever reads it."""
    text = simplified(text)
    sentences = [s.strip(_EDGE) for s in _SENTENCE.split(text) if s and s.strip(_EDGE)]
    return bool(sentences) and all(
        (_QUESTION.search(s) or _REQUEST.search(s)) and not _SELF.search(s) for s in sentences)


# Objects are normalised so that paraphrases meet in one slot: "喝咖啡" and "咖啡",
# "香菜味的东西" and "香菜", "drinking tea" and "tea", "the taste of cilantro" and "cilantro".
_OBJ_LEAD = re.compile(r"^(?:(?:the )?(?:taste|smell|flavou?r) of |eating |drinking |to eat |"
                       r"to drink |the |an? )+|^[喝吃玩看听用]+(?=\S)", re.I)
_OBJ_TAIL = re.compile(r"(?:味的东西|的东西|味道?|之类的|这类的?|一类的?|类的|这种东西)$|"
                       r"\s+(?:very much|a lot|so much)$|"
                       # "jazz anymore" is the same thing as "jazz": when is not what.
                       r"\s+(?:anymore|any more|these days|nowadays|now|lately|at all)$", re.I)
PERIODS = {"早上": "morning", "早晨": "morning", "上午": "morning", "早": "morning",
           "中午": "noon", "下午": "afternoon", "晚上": "evening", "晚": "evening",
           "night": "evening", "周末": "weekend", "weekends": "weekend", "天": "day",
           "week": "weekend"}


def normalize_object(value: str) -> str:
    obj = _OBJ_TRIM.sub("", value).casefold()
    obj = _OBJ_TAIL.sub("", _OBJ_LEAD.sub("", obj)).strip()
    return PERIODS.get(obj, obj)[:40]


def _object(match: re.Match[str]) -> str:
    for key in ("obj", "obj2", "obj3", "obj4", "obj5", "obj6"):
        value = match.groupdict().get(key)
        if value:
            return normalize_object(value)
    return ""


_PRONOUNS = frozenset({"it", "them", "that", "this", "these", "those", "him", "her", "you",
                       "it so much", "them so much", "它", "他", "她", "它们", "他们", "这个",
                       "那个"})


_JOINT_SUBJECT = re.compile(r"^(?:my|our)(?:\s+[\w-]+){1,2}\s+and\s+(?=(?:i|we)\b)", re.I)


def classify(clause: str) -> tuple[Rule, str] | None:
    """The first rule matching the clause, with the slot it names. With a joint subject
    ("my partner and I moved to …") what they do decides, not who else does it. Read in
    Simplified characters (memray/hanzi.py)."""
    clause = simplified(clause)
    joint = _JOINT_SUBJECT.match(clause)
    if joint:
        found = classify(clause[joint.end():])
        if found is not None:
            return found
    for rule in RULES:
        m = rule.pattern.search(clause)
        if m:
            obj = _object(m) if rule.slot.endswith(":") else ""
            if rule.slot.endswith(":") and (not obj or obj in _PRONOUNS):
                continue
            return rule, rule.slot + obj if rule.slot.endswith(":") else rule.slot
    return None


def _topic(text: str) -> str:
    """What a forget command is about: its text without the command's own words."""
    return " ".join(_COMMAND_WORDS.sub(" ", text).split())


def _topic_terms(topic: str) -> tuple[str, ...]:
    """Terms a memory must all contain to match a topic that names no known slot:
    Latin words (lower-cased) and Chinese runs."""
    return tuple(dict.fromkeys(re.findall(r"[\u4e00-\u9fff]+|[^\W\d_]+|\d+", topic.casefold())))


def _topic_slots(text: str) -> list[str]:
    """The slots of the known topics a forget names. Specific topics first, and a matched
    span is used up; of two topics side by side ("work projects", "工作项目") the second is
    the head noun and the first only qualifies it."""
    found: list[tuple[int, int, tuple[str, ...]]] = []
    rest = text
    for pattern, group in TOPICS:
        for m in pattern.finditer(rest):
            found.append((m.start(), m.end(), group))
        rest = pattern.sub(lambda m: " " * len(m.group()), rest)
    found.sort()
    slots: list[str] = []
    for i, (_, end, group) in enumerate(found):
        nxt = found[i + 1][0] if i + 1 < len(found) else None
        if nxt is not None and not text[end:nxt].strip():
            continue  # a modifier of the next topic
        slots += group
    return slots


def forget_command(turn: Turn) -> Forget | None:
    """A forget names a topic and deletes only what matches it: known topics map to slots,
    a stated fact ("forget that I like jazz") to its slot, anything else to terms the
    memory must contain. Everything is deleted only on an "all" request with no topic."""
    text = simplified(turn.content)
    if not FORGET.search(text):
        return None
    topic = _topic(text)
    # The topic lost its subject with the command's words: "like jazz" is "I like jazz".
    stated = (classify(topic) or classify("I " + topic)) if topic else None
    slots: list[str] = [stated[1]] if stated else []
    if not stated:
        slots += _topic_slots(text)
    if slots:
        return Forget(slots=tuple(dict.fromkeys(slots)), turn_id=turn.id)
    if topic:
        return Forget(terms=_topic_terms(topic), turn_id=turn.id)
    return Forget(everything=bool(_FORGET_ALL.search(text)), turn_id=turn.id)


class RuleExtractor:
    """Deterministic, offline, Chinese and English. See the module docstring."""

    wants_existing = False

    def grey_band_judge(self) -> Judge | None:
        return None

    def is_urgent(self, text: str) -> bool:
        text = simplified(text)
        return bool(CORRECTION.search(text) or REMEMBER.search(text.strip())
                    or FORGET.search(text))

    def extract(self, turns: Sequence[Turn], existing: Sequence[MemoryRecord]) -> Extraction:
        result = Extraction()
        for turn in turns:
            if turn.role != "user":
                continue  # never keep the assistant's words or reasoning as user facts
            forget = forget_command(turn)
            if forget is not None:
                result.forgets.append(forget)
                continue  # a forget message is never itself a fact
            result.facts.extend(self._facts(turn))
        return result

    @staticmethod
    def _groups(text: str) -> list[tuple[Rule, str, list[str], bool]]:
        """Classified clauses, neighbours of one slot merged; hedged when a hedging cue
        stands anywhere in the clause's sentence ("I think maybe I like jazz, not sure")."""
        groups: list[tuple[Rule, str, list[str], bool]] = []
        for sentence in _SENTENCE.split(text):
            hedged = bool(HEDGE.search(sentence or ""))
            for clause in clauses(sentence or ""):
                skip = _QUESTION.search(clause) or _REQUEST.search(clause)
                found = None if skip else classify(clause)
                if found is None:
                    continue
                rule, slot = found
                joint = _JOINT_SUBJECT.match(clause)
                partner = classify(joint.group(0).rsplit(" and", 1)[0]) if joint else None
                if partner is not None and partner[1] != slot:
                    groups.append((partner[0], partner[1], [clause], hedged))
                if groups and groups[-1][1] == slot:
                    groups[-1][2].append(clause)
                    groups[-1] = (*groups[-1][:3], groups[-1][3] or hedged)
                else:
                    groups.append((rule, slot, [clause], hedged))
        return groups

    def _facts(self, turn: Turn) -> list[Fact]:
        said = turn.content.strip()
        text = simplified(said)  # read in Simplified, kept as written (`_as_said`)
        remember = REMEMBER.search(text)
        if remember:
            text, said = text[remember.end():], said[remember.end():]
        correction = bool(CORRECTION.search(text))
        facts: list[Fact] = []
        groups = self._groups(text)
        joiner = "，" if re.search(r"[\u4e00-\u9fff]", text) else ", "
        for rule, slot, parts, hedged in groups:
            content = joiner.join(_as_said(part, text, said) for part in parts)
            confidence = HEDGED_CONFIDENCE if hedged and not remember else 0.9
            facts.append(Fact(content=content, type=rule.type, slot=slot,
                              importance=min(1.0, rule.importance + (0.2 if remember else 0)),
                              confidence=confidence, source=MemorySource.USER_STATED,
                              correction=correction, turn_ids=(turn.id,),
                              excerpt=content[:200]))
        if remember and not facts and text:
            facts.append(Fact(content=said, type=MemoryType.FACT, importance=0.8,
                              confidence=1.0, turn_ids=(turn.id,), excerpt=said[:200]))
        return facts


def _as_said(part: str, read: str, said: str) -> str:
    """A clause as the user wrote it: `read` is `said` in Simplified characters, one for
    one, so the clause's place in `read` is its place in `said`. A clause the reading
    rewrote (a conjunction dropped) is not found and stays as read."""
    at = read.find(part)
    return said[at:at + len(part)] if at >= 0 else part

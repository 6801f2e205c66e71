"""Query intent: which kinds of memory a question is about, from Chinese and English cues.

MiniLM places "When would suit a deep-work discussion?" far from "I'm only free after
9 pm" (cosine 0.14), and it barely reads Chinese at all. A question that asks about time,
place, food or work therefore also searches the memories in the matching slots or types,
and those hits pass the similarity threshold with a ranking bonus.
"""

from __future__ import annotations

import re
from typing import Any

_INTENTS: tuple[tuple[re.Pattern[str], dict[str, Any]], ...] = tuple(
    (re.compile(p, re.I), where) for p, where in (
        (r"什么时候|何时|几点|时间|有空|安排|约|会议|讨论|晚上|周末|\bwhen\b|\bwhat time\b|"
         r"\bschedule\b|\bavailab|\bfree\b|\bbusy\b|\bmeeting\b|\bcall\b|\bdiscussion\b|"
         r"\bsuit\b|\bslot\b|\bbook\b", {"slots": ("availability",)}),
        (r"住|哪里|城市|搬|\bwhere\b|\bcity\b|\blive\b|\bmove\b|\bweather\b|\blocal\b",
         {"slots": ("city", "hometown")}),
        (r"吃|喝|菜|餐|食|饭|口味|过敏|\beat\b|\bfood\b|\bmeal\b|\brecipe\b|\bdinner\b|"
         r"\blunch\b|\bsnack\b|\bcook|\brestaurant\b|\bdrink\b|\ballerg",
         {"slots": ("diet",), "slot_prefixes": ("like:", "dislike:")}),
        (r"工作|职业|公司|\bjob\b|\bwork\b|\bcareer\b|\bcompany\b|\bprofession\b",
         {"slots": ("job",)}),
        (r"名字|叫什么|\bname\b|\bcalled\b", {"slots": ("name",)}),
        (r"家人|孩子|女儿|儿子|妻子|丈夫|\bfamily\b|\bkids?\b|\bdaughter\b|\bson\b|\bwife\b|"
         r"\bhusband\b", {"types": ("identity",)}),
    ))


def intents(query: str) -> list[dict[str, Any]]:
    """`Where` keyword sets for the kinds of memory the query asks about (maybe none)."""
    return [where for pattern, where in _INTENTS if pattern.search(query)]

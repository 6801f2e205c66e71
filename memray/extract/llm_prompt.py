"""What the LLM extractor sends: the system prompt with worked examples, and the schemas.

The examples show mechanisms (a move that replaces a city, a habit corrected in Chinese, a
forget in words no rule lists, a question that keeps nothing), never sentences of the
evaluation sets. The schemas use only what grammar engines accept (llama.cpp's GBNF
converter, xgrammar in vLLM): types, enums, required properties, no additional ones;
ranges and ids are checked in code (llm.py).
"""

from __future__ import annotations

import json
from typing import Any

OPS = ("ADD", "UPDATE", "DELETE", "NOOP")
SOURCES = ("user_stated", "inferred")
TYPES = ("identity", "preference", "constraint", "fact", "task_state", "behavior")

_RULES = """You maintain long-term memory about ONE user for an assistant.
Read the conversation and decide what to remember about the user.

Keep what will matter in a later session: identity (name, age, city, job, family, pets),
preferences, diet and allergies, constraints, habits, plans and ongoing tasks. Never keep
greetings, small talk, questions the user asks, the assistant's words, or general facts
about the world. Never keep passwords, card numbers, emails or phone numbers.

Write each fact as a short statement about the user in the user's own language, keeping
their words for names and things (never translate them).

For each fact write content, type and slot first. Then compare it with the EXISTING
memories, shown as [n] text, and choose op and id:
- ADD, id -1: nothing in EXISTING says it.
- UPDATE, id n: it changes or corrects [n]; content is the whole new fact.
- DELETE, id n: the user says [n] is no longer true, or asks you to forget or stop
  remembering it, and gives nothing new; content repeats [n].
- NOOP, id n: [n] already says it.
Leave out EXISTING memories the conversation does not touch.
type: identity, preference, constraint, fact, task_state (plans, tasks) or behavior (habits).
source: user_stated when the user said it, inferred when you concluded it.
slot: what the fact is about, one of name, age, birthday, city, hometown, job, diet,
availability, family:<relation>, pet:<kind>, like:<thing>, dislike:<thing>,
hobby:<activity>, learning:<subject>, own:<thing>, routine:<morning|evening|weekly>,
task:<what>; "" when none fits.
importance: 0 to 1. turns: the [t<n>] labels the fact comes from.
When nothing is worth keeping, answer {"facts": []}."""



def _fact(op: str, id: int, content: str, type: str, slot: str, importance: float,
          turns: list[str]) -> dict[str, Any]:
    return {"content": content, "type": type, "slot": slot, "op": op, "id": id,
            "source": "user_stated", "importance": importance, "turns": turns}


# (existing memories, conversation, answer). Memories the round does not touch are left
# out of the answers, as the instructions ask.
EXAMPLES: list[tuple[list[str], list[tuple[str, str]], list[dict[str, Any]]]] = [
    (["Lives in Berlin", "Likes jazz"],
     [("user", "We moved to Lisbon in May. Any tips for learning Portuguese?")],
     [_fact("UPDATE", 0, "Lives in Lisbon", "identity", "city", 0.8, ["t0"]),
      _fact("ADD", -1, "Is learning Portuguese", "task_state", "learning:portuguese", 0.6,
            ["t0"])]),
    (["Name is Tom", "Works as a chef"],
     [("user", "I just adopted a kitten called Pepper.")],
     [_fact("ADD", -1, "Has a kitten called Pepper", "identity", "pet:cat", 0.6, ["t0"])]),
    (["每天早上跑步", "养了一只猫"],
     [("user", "其实我早上不跑步了，改成游泳。还有我对花生过敏。")],
     [_fact("UPDATE", 0, "每天早上游泳", "behavior", "routine:morning", 0.6, ["t0"]),
      _fact("ADD", -1, "对花生过敏", "constraint", "diet", 0.9, ["t0"])]),
    (["Has a dog named Biscuit", "在银行工作"],
     [("user", "工作的事你就别再记着了。"), ("assistant", "好的。"),
      ("user", "As I said, Biscuit is my dog.")],
     [_fact("DELETE", 1, "在银行工作", "identity", "job", 0.5, ["t0"]),
      _fact("NOOP", 0, "Has a dog named Biscuit", "identity", "pet:dog", 0.6, ["t2"])]),
    (["Is vegetarian"],
     [("user", "What's the capital of Peru? Also it's raining here today.")],
     []),
]


def render(existing: list[str], turns: list[tuple[str, str]]) -> str:
    """The user message of one round (the examples use the same form)."""
    memories = "\n".join(f"[{i}] {m}" for i, m in enumerate(existing)) or "(none)"
    convo = "\n".join(f"[t{i}] {role}: {text}" for i, (role, text) in enumerate(turns))
    return f"EXISTING:\n{memories}\nCONVERSATION:\n{convo}\nANSWER:"


SYSTEM_PROMPT = _RULES


def messages(existing: list[str], turns: list[tuple[str, str]]) -> list[dict[str, str]]:
    """The whole request: the rules, the examples as earlier exchanges (a small model
    copies examples it reads inside the instructions into its answer; as past turns it
    treats them as done), then this round. Everything before the round is the same for
    every call, so a server's prefix cache keeps it."""
    out = [{"role": "system", "content": SYSTEM_PROMPT}]
    for e, t, a in EXAMPLES:
        out += [{"role": "user", "content": render(e, t)},
                {"role": "assistant", "content": json.dumps({"facts": a}, ensure_ascii=False)}]
    return [*out, {"role": "user", "content": render(existing, turns)}]

_STR = {"type": "string"}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


# The fact comes first, its relation to the memories shown after it: a model that must
# name an op first tends to list the memories it was shown instead of what was said.
FACTS_SCHEMA = _object({"facts": {"type": "array", "items": _object({
    "content": _STR,
    "type": {"type": "string", "enum": list(TYPES)},
    "slot": _STR,
    "op": {"type": "string", "enum": list(OPS)},
    "id": {"type": "integer"},
    "source": {"type": "string", "enum": list(SOURCES)},
    "importance": {"type": "number"},
    "turns": {"type": "array", "items": _STR},
})}})
VERDICT_SCHEMA = _object({"same_fact": {"type": "boolean"}})
SUMMARY_SCHEMA = _object({"summary": _STR})


def response_format(schema: dict[str, Any], name: str) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema,
                                                   "strict": True}}

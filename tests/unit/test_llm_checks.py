"""What the grammar cannot promise, checked in code; the protocol the local server and the
in-process transport speak; the extractor choice. A recording runtime stands in for the
model here (the real one: tests/integration/test_real_llm.py)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from memray.config import MemoryConfig
from memray.extract.base import Turn
from memray.extract.choose import build_extractor
from memray.extract.llm import RetryableError, _facts, grounded, read_facts
from memray.extract.llm_prompt import EXAMPLES, FACTS_SCHEMA, messages, response_format
from memray.extract.rules import RuleExtractor, says_nothing_about_user
from memray.localllm.protocol import BadRequestError, complete
from memray.localllm.runtime import Completion
from memray.localllm.transport import LocalTransport
from memray.models import MemoryRecord, MemoryType, content_hash, utcnow

TURNS = [Turn("s:0", "user", "We moved to Bergen, and I love skiing.")]


def record(text: str, slot: str | None = None) -> MemoryRecord:
    now = utcnow()
    return MemoryRecord(id=f"m-{text}", user_id="u", type=MemoryType.FACT, content=text,
                        slot=slot, importance=0.5, created_at=now, updated_at=now,
                        last_confirmed_at=now, embedding_model="x",
                        content_hash=content_hash(text))


def item(**kw: Any) -> dict[str, Any]:
    return {"op": "ADD", "id": -1, "content": "Loves skiing", "type": "preference",
            "source": "user_stated", "slot": "like:skiing", "importance": 0.7,
            "turns": ["t0"], **kw}


def test_ids_are_checked_against_the_memories_shown() -> None:
    shown = [record("Lives in Oslo")]
    (f,) = _facts({"facts": [item(op="UPDATE", id=0, content="Lives in Bergen")]}, shown, TURNS)
    assert f.op == "UPDATE" and f.target == "m-Lives in Oslo" and f.turn_ids == ("s:0",)
    with pytest.raises(RetryableError, match=r"UPDATE names memory \[3\].*\[0\]\.\.\[0\]"):
        _facts({"facts": [item(op="UPDATE", id=3)]}, shown, TURNS)
    # -1 is "no memory": a change to none is a new fact; confirming or deleting none is nothing.
    (added,) = _facts({"facts": [item(op="UPDATE", id=-1), item(op="NOOP", id=-1)]}, [], TURNS)
    assert added.op is None and added.target is None
    # Restating a memory unchanged is a NOOP whatever the op says.
    (same,) = _facts({"facts": [item(op="UPDATE", id=0, content="Lives in Oslo")]}, shown,
                     TURNS)
    assert same.op == "NOOP"


@pytest.mark.parametrize("bad", [
    {"facts": [item(op="MERGE")]}, {"facts": [item(type="opinion")]},
    {"facts": [item(source="guess")]}, {"facts": [item(id="0")]}, {"facts": [item(id=True)]},
    {"facts": [item(content="  ")]}, {"facts": [{"op": "ADD"}]}, {"facts": "none"},
    {"facts": [], "extra": 1}, ["not", "an", "object"],
])
def test_answers_that_break_the_schema_are_retryable_errors(bad: Any) -> None:
    with pytest.raises(RetryableError):
        _facts(bad, [], TURNS)


def test_values_are_bounded_in_code() -> None:
    (f,) = _facts({"facts": [item(importance=7, content="x" * 900, slot="  CITY ")]}, [],
                  TURNS)
    assert f.importance == 1.0 and len(f.content) == 400 and f.slot == "city"


def test_a_stated_fact_must_share_a_word_with_what_the_user_said() -> None:
    assert grounded("Lives in Bergen", "We just moved to Bergen!")
    assert grounded("对芒果过敏", "我对芒果过敏，也不吃香菜。")
    assert not grounded("Is vegetarian", "我的小名叫豆豆")
    facts, dropped = read_facts({"facts": [item(), item(content="Is vegetarian", slot="diet"),
                                           item(content="Might enjoy winter sports",
                                                source="inferred")]}, [], TURNS)
    assert [f.content for f in facts] == ["Loves skiing", "Might enjoy winter sports"]
    assert dropped == 1


def test_questions_about_the_world_say_nothing_about_the_user() -> None:
    assert says_nothing_about_user("What's the capital of Peru?")
    assert says_nothing_about_user("法国的首都是哪里？")
    assert not says_nothing_about_user("Can you remember that I'm allergic to nuts?")
    assert not says_nothing_about_user("我的生日是几号来着？")
    assert not says_nothing_about_user("It's raining here today.")


def test_the_examples_follow_the_schema_and_the_checks() -> None:
    for existing, turns, answer in EXAMPLES:
        shown = [record(t) for t in existing]
        said = [Turn(f"s:{i}", role, text) for i, (role, text) in enumerate(turns)]
        facts, dropped = read_facts({"facts": answer}, shown, said)
        assert len(facts) == len(answer) and dropped == 0
    msgs = messages(["Lives in Oslo"], [("user", "hi")])
    assert msgs[0]["role"] == "system" and msgs[-1]["content"].startswith("EXISTING:\n[0] ")
    assert len(msgs) == 2 + 2 * len(EXAMPLES)


def test_the_schema_uses_only_what_grammar_engines_accept() -> None:
    allowed = {"type", "properties", "required", "additionalProperties", "items", "enum"}

    def walk(schema: dict[str, Any]) -> None:
        assert set(schema) <= allowed, schema
        for sub in schema.get("properties", {}).values():
            walk(sub)
        if "items" in schema:
            walk(schema["items"])

    walk(FACTS_SCHEMA)
    obj = FACTS_SCHEMA["properties"]["facts"]["items"]
    assert obj["required"] == list(obj["properties"]) and obj["additionalProperties"] is False


class Recorder:
    n_ctx = 4096

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def chat(self, messages: list[dict[str, str]], *, schema: dict[str, Any] | None,
             max_tokens: int, temperature: float = 0.0, seed: int = 0) -> Completion:
        self.calls.append({"schema": schema, "max_tokens": max_tokens, "temp": temperature})
        return Completion('{"facts": []}', 120, 5, 100, "stop", 0.01)


def test_the_protocol_enforces_response_formats_and_refuses_the_rest() -> None:
    rt = Recorder()
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 50,
            "response_format": response_format(FACTS_SCHEMA, "f")}
    out = complete(rt, "m", body)
    assert rt.calls[-1]["schema"] == FACTS_SCHEMA and rt.calls[-1]["max_tokens"] == 50
    assert out["usage"] == {"prompt_tokens": 120, "completion_tokens": 5, "total_tokens": 125,
                            "prompt_tokens_details": {"cached_tokens": 100}}
    assert out["choices"][0]["message"]["content"] == '{"facts": []}'
    complete(rt, "m", {**body, "response_format": {"type": "json_object", "schema": {"a": 1}}})
    assert rt.calls[-1]["schema"] == {"a": 1}
    complete(rt, "m", {**body, "response_format": {"type": "text"}})
    assert rt.calls[-1]["schema"] is None
    for bad in ({**body, "response_format": {"type": "regex"}},
                {**body, "response_format": {"type": "json_schema"}},
                {**body, "messages": [{"role": "tool", "content": "x"}]},
                {**body, "max_tokens": 0}, {**body, "temperature": 5}, {**body, "n": 2},
                {**body, "stream": True}, "not an object"):
        with pytest.raises(BadRequestError):
            complete(rt, "m", bad)


def test_the_in_process_transport_answers_like_the_server() -> None:
    rt = Recorder()
    with httpx.Client(transport=LocalTransport(rt, "m"), base_url="http://local/v1/") as c:
        assert c.get("models").json()["data"][0]["id"] == "m"
        ok = c.post("chat/completions", json={"messages": [{"role": "user", "content": "x"}]})
        assert ok.status_code == 200 and json.loads(
            ok.json()["choices"][0]["message"]["content"]) == {"facts": []}
        assert c.post("chat/completions", json={"messages": []}).status_code == 400
        assert c.post("embeddings", json={}).status_code == 404


def test_auto_uses_the_endpoint_when_one_is_configured() -> None:
    rules = MemoryConfig.model_validate({"write": {}})
    assert rules.write.extractor == "auto" and rules.write.uses == "rules"
    assert isinstance(build_extractor(rules.write), RuleExtractor)
    llm = MemoryConfig.model_validate({"write": {"llm": {"base_url": "http://127.0.0.1:9/v1",
                                                         "model": "m"}}})
    assert llm.write.uses == "llm"
    assert type(build_extractor(llm.write)).__name__ == "LLMExtractor"
    assert MemoryConfig.model_validate({"write": {"extractor": "local"}}).write.uses == "local"
    with pytest.raises(ValueError, match="not a packaged model"):
        MemoryConfig.model_validate({"write": {"local_llm": {"model": "gpt-5"}}})
    with pytest.raises(ValueError, match=r"needs write\.llm"):
        MemoryConfig.model_validate({"write": {"extractor": "llm"}})


def test_a_noop_or_delete_needs_the_memory_in_what_the_user_said() -> None:
    shown = [record("Lives in Oslo", "city"), record("Works as a nurse", "job")]
    turns = [Turn("s:0", "user", "Please stop keeping my job in mind.")]
    facts, dropped = read_facts({"facts": [
        item(op="DELETE", id=1, content="Works as a nurse", slot="job"),  # the slot's word
        item(op="NOOP", id=0, content="Lives in Oslo", slot="city"),  # not mentioned
    ]}, shown, turns)
    assert [(f.op, f.target) for f in facts] == [("DELETE", "m-Works as a nurse")]
    assert dropped == 1

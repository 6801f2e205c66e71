"""The LLM extractor over real HTTP against a scripted OpenAI-compatible server on
127.0.0.1, through the public API on the embedded default."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_stub import Reply, ScriptedOpenAI

from memray import Memory, MemoryConfig, MemoryStatus
from memray.embed.cache import CachedEmbedder
from memray.errors import ExtractionError


@pytest.fixture
def llm() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI() as server:
        yield server


def config(tmp_path: Path, llm: ScriptedOpenAI, **write: Any) -> MemoryConfig:
    return MemoryConfig.model_validate({"data_dir": str(tmp_path), "write": {
        "extractor": "llm", "llm": {"base_url": llm.base_url, "model": "qwen-test",
                                    "api_key": "k", "timeout_s": 2, "max_retries": 1},
        **write}})


def fact(content: str, op: str = "ADD", id: int = -1, **kw: Any) -> dict[str, Any]:
    return {"op": op, "id": id, "content": content, "type": kw.get("type", "preference"),
            "source": kw.get("source", "user_stated"), "slot": kw.get("slot") or "",
            "importance": kw.get("importance", 0.6), "turns": []}


def answer(*facts: dict[str, Any]) -> Reply:
    return Reply({"facts": list(facts)})


def round_(m: Memory, text: str, user: str = "u") -> list[str]:
    res = m.add([{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}],
                user_id=user, session_id="s")
    return [e.op for e in res.events]


def test_add_update_noop_delete_with_small_ids(
        tmp_path: Path, llm: ScriptedOpenAI, embedder: CachedEmbedder) -> None:
    with Memory(config(tmp_path, llm), embedder=embedder) as m:
        llm.script(answer(fact("Only free after 9 pm", type="constraint", slot="availability"),
                          fact("Likes writing Python scripts")))
        assert round_(m, "I'm only free after 9 pm; I like writing scripts in Python") == [
            "ADD", "ADD"]
        request = llm.requests[-1]
        assert request["auth"] == "Bearer k"
        assert request["body"]["response_format"]["type"] == "json_schema"
        assert request["body"]["model"] == "qwen-test"

        ids = {r.content: r.id for r in m.get_all(user_id="u").items}
        llm.script(answer(fact("Works 9 to 6; evenings are busy", "UPDATE", 0,
                               type="constraint", slot="availability")))
        round_(m, "I changed jobs, now 9 to 6, evenings are busy")
        prompt = llm.requests[-1]["body"]["messages"][-1]["content"]
        assert "[0] " in prompt
        assert all(i not in json.dumps(llm.requests[-1]["body"]) for i in ids.values())
        shown = prompt.split("EXISTING:\n")[1].split("\nCONVERSATION:")[0].splitlines()
        old_index = next(i for i, line in enumerate(shown) if "9 pm" in line)
        assert old_index == 0  # the LLM's id 0 must have meant the 9 pm memory
        old = m.get(ids["Only free after 9 pm"], user_id="u")
        assert old is not None and old.status == MemoryStatus.SUPERSEDED

        llm.script(answer(fact("Likes writing Python scripts", "NOOP", 0)))
        assert round_(m, "Python scripting is still my thing") == ["NOOP"]

        llm.script(answer(fact("Likes writing Python scripts", "DELETE", 0)))
        assert round_(m, "I don't write Python anymore") == ["DELETE"]
        assert "Python" not in str(list(m.export(user_id="u")))


def test_invalid_json_is_retried_then_fails_without_writing(
        tmp_path: Path, llm: ScriptedOpenAI, embedder: CachedEmbedder) -> None:
    with Memory(config(tmp_path, llm), embedder=embedder) as m:
        llm.script(Reply("not json"), answer(fact("Likes tea")))
        assert round_(m, "I like tea") == ["ADD"]  # one retry sufficed

        llm.script(Reply("{\"facts\": [{\"op\": \"ADD\"}]}"), Reply(status=503))
        version = m.version(user_id="u")
        with pytest.raises(ExtractionError):
            round_(m, "I like coffee")
        assert m.version(user_id="u") == version
        assert [r.content for r in m.get_all(user_id="u").items] == ["Likes tea"]

        llm.script(answer(fact("Likes coffee")))  # the logged turns are retried
        result = m.flush(user_id="u", session_id="s")
        assert [e.memory.content for e in result.events if e.memory] == ["Likes coffee"]


def test_unknown_ids_and_timeouts_write_nothing(
        tmp_path: Path, llm: ScriptedOpenAI, embedder: CachedEmbedder) -> None:
    with Memory(config(tmp_path, llm), embedder=embedder) as m:
        llm.script(answer(fact("Likes tea", "UPDATE", 7)), answer(fact("Likes tea", "NOOP", 7)))
        with pytest.raises(ExtractionError, match=r"NOOP names memory \[7\].*shown were none"):
            round_(m, "I like tea")
        llm.script(Reply(delay_s=3), Reply(delay_s=3))
        with pytest.raises(ExtractionError, match="Timeout"):
            round_(m, "I like tea")
        assert m.get_all(user_id="u").items == []


def test_inferred_facts_wait_on_probation_until_confirmed(
        tmp_path: Path, llm: ScriptedOpenAI, embedder: CachedEmbedder) -> None:
    with Memory(config(tmp_path, llm), embedder=embedder) as m:
        llm.script(answer(fact("Probably a night owl", type="behavior", source="inferred")))
        round_(m, "Just finished my work, it's 2 am again")
        (record,) = m.get_all(user_id="u").items
        assert record.status == MemoryStatus.CANDIDATE and record.expires_at is not None
        assert m.search("night owl", user_id="u", threshold=-1) == []
        llm.script(answer(fact("Probably a night owl", type="behavior", source="inferred")))
        round_(m, "Up late coding again")
        confirmed = m.get(record.id, user_id="u")
        assert confirmed is not None and confirmed.status == MemoryStatus.ACTIVE
        assert [h.memory.id for h in m.search("night owl", user_id="u")] == [record.id]


def test_grey_band_is_judged_by_the_llm(
        tmp_path: Path, llm: ScriptedOpenAI, embedder: CachedEmbedder) -> None:
    cfg = config(tmp_path, llm, same_fact_similarity=0.99, grey_band_low=0.3)
    with Memory(cfg, embedder=embedder) as m:
        llm.script(answer(fact("Enjoys green tea")))
        round_(m, "I enjoy green tea")
        llm.script(answer(fact("Loves green tea in the morning")),
                   Reply({"same_fact": True}))
        assert round_(m, "I love green tea in the morning") == ["UPDATE"]
        assert "Statement A" in llm.requests[-1]["body"]["messages"][0]["content"]
        llm.script(answer(fact("Enjoys green apples")), Reply({"same_fact": False}))
        assert round_(m, "I enjoy green apples") == ["ADD"]
        assert len(m.get_all(user_id="u").items) == 2


def test_forget_commands_are_handled_by_the_rules_in_front(
        tmp_path: Path, llm: ScriptedOpenAI, embedder: CachedEmbedder) -> None:
    with Memory(config(tmp_path, llm), embedder=embedder) as m:
        llm.script(answer(fact("Only free after 9 pm", type="constraint", slot="availability")))
        round_(m, "I'm only free after 9 pm")
        calls = len(llm.requests)
        assert round_(m, "Delete everything you remember about my working hours") == ["DELETE"]
        assert len(llm.requests) == calls  # no LLM call for a pure forget command
        assert m.get_all(user_id="u").items == []

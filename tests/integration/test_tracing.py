"""OpenTelemetry spans of `Memory` calls (memray/tracing.py) on milvus-lite, caught by
the SDK's in-memory exporter: names, attributes, parents, and no content unless asked."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_stub import Reply, ScriptedOpenAI
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from memray import Memory, MemoryConfig, MemoryNotFoundError
from memray import tracing as memray_tracing
from memray.embed.hashing import HashingEmbedder
from memray.store.milvus import collection_name

SECRET = "I live in Shanghai near the river"
QUERY = "Which city do I live in?"
COLLECTION = collection_name("memray", HashingEmbedder(dim=32).model, 32)


@pytest.fixture(scope="module")
def provider() -> TracerProvider:
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        current = trace.get_tracer_provider()
    assert isinstance(current, TracerProvider)
    return current


@pytest.fixture
def spans(provider: TracerProvider) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    yield exporter
    processor.shutdown()  # stops this exporter taking the next test's spans


def memory(tmp_path: Path, **tracing: Any) -> Memory:
    cfg = MemoryConfig.model_validate({"data_dir": str(tmp_path / "d"), "tracing": tracing,
                                       "recall": {"hot_set": "off"}})
    return Memory(cfg, embedder=HashingEmbedder(dim=32))


def ops(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans()
            if s.attributes and "gen_ai.operation.name" in s.attributes
            and s.attributes["gen_ai.operation.name"] != "chat"]


def children(exporter: InMemorySpanExporter, parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return [s for s in exporter.get_finished_spans()
            if s.parent is not None and s.parent.span_id == parent.context.span_id]


def all_values(exporter: InMemorySpanExporter) -> str:
    return json.dumps([{k: str(v) for k, v in (s.attributes or {}).items()}
                       for s in exporter.get_finished_spans()], ensure_ascii=False)


def test_each_call_is_one_span_with_store_children_and_no_content(
        tmp_path: Path, spans: InMemorySpanExporter) -> None:
    with memory(tmp_path, enabled=True) as m:
        spans.clear()  # opening drains the outbox: no memory call, so no span expected
        mid = m.add(SECRET, user_id="alice", infer=False).events[0].memory_id
        assert m.search(QUERY, user_id="alice", threshold=-1)
        m.context(QUERY, user_id="alice")
        m.get(mid, user_id="alice")
        m.get_all(user_id="alice")
        m.update(mid, "I live in Hangzhou", user_id="alice")
        m.history(mid, user_id="alice")
        m.delete(mid, user_id="alice")
        m.add("I like tea", user_id="alice", infer=False)
        assert m.delete_all(user_id="alice").deleted == 1

    got = [(s.name, (s.attributes or {})["memray.method"]) for s in ops(spans)]
    assert got == [("upsert_memory", "add"), ("search_memory", "search"),
                   ("search_memory", "context"), ("search_memory", "get"),
                   ("search_memory", "get_all"), ("update_memory", "update"),
                   ("search_memory", "history"), ("delete_memory", "delete"),
                   ("upsert_memory", "add"), ("delete_memory", "delete_all")]
    by_method = {(s.attributes or {})["memray.method"]: s for s in ops(spans)}
    for method, span in by_method.items():
        attrs = span.attributes or {}
        assert span.kind == SpanKind.INTERNAL and span.parent is None, method
        assert attrs["gen_ai.memory.store.id"] == "memray_memories"
        assert span.instrumentation_scope is not None
        assert span.instrumentation_scope.name == "memray"
        has_id = method in ("get", "update", "history", "delete")
        assert (attrs.get("gen_ai.memory.record.id") == mid) == has_id, method
    assert (by_method["search"].attributes or {})["gen_ai.memory.record.count"] == 1
    assert (by_method["get_all"].attributes or {})["gen_ai.memory.record.count"] == 1
    assert (by_method["delete_all"].attributes or {})["gen_ai.memory.record.count"] == 1

    store = children(spans, by_method["search"])
    assert [s.name for s in store] == [f"search {COLLECTION}"]
    assert store[0].kind == SpanKind.CLIENT
    assert dict(store[0].attributes or {}) == {
        "db.system.name": "milvus", "db.operation.name": "search",
        "db.collection.name": COLLECTION, "db.response.returned_rows": 1}
    # a verbatim add for a user not held: the exact-repeat query, then a plain insert of
    # its new row (no query before a delete, as a replace would make)
    assert [s.name for s in children(spans, by_method["add"])] == [
        f"query {COLLECTION}", f"insert {COLLECTION}"]
    # update reads the record first: a store query, not a second memory span
    assert {s.name.split()[0] for s in children(spans, by_method["update"])} == {
        "query", "replace"}
    assert children(spans, by_method["context"])[0].name == f"search {COLLECTION}"
    text = all_values(spans)
    for private in ("Shanghai", "Hangzhou", "tea", QUERY, "alice"):
        assert private not in text


def test_content_is_recorded_only_when_opted_in(
        tmp_path: Path, spans: InMemorySpanExporter) -> None:
    with memory(tmp_path, enabled=True, capture_content=True) as m:
        mid = m.add(SECRET, user_id="alice", infer=False).events[0].memory_id
        m.search(QUERY, user_id="alice", threshold=-1)
    add, search = ops(spans)
    assert (search.attributes or {})["gen_ai.memory.query.text"] == QUERY
    assert (search.attributes or {})["user.id"] == "alice"
    [hit] = json.loads(str((search.attributes or {})["gen_ai.memory.records"]))
    assert hit["content"] == SECRET and hit["id"] == mid and isinstance(hit["score"], float)
    assert hit["metadata"] == {"type": "message", "status": "active"}
    [added] = json.loads(str((add.attributes or {})["gen_ai.memory.records"]))
    assert added == {"content": SECRET, "id": mid,
                     "metadata": {"type": "message", "status": "active", "op": "ADD"}}


def test_the_extraction_llm_call_is_a_child_span(
        tmp_path: Path, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMRAY_TRACING", "true")  # enabled by the environment this time
    with ScriptedOpenAI() as llm:
        cfg = MemoryConfig.model_validate({
            "data_dir": str(tmp_path / "d"), "write": {"extractor": "llm", "llm": {
                "base_url": llm.base_url, "model": "qwen-test", "max_retries": 0}}})
        with Memory(cfg, embedder=HashingEmbedder(dim=32)) as m:
            llm.script(Reply({"facts": [{
                "op": "ADD", "id": -1, "content": "Likes green tea", "type": "preference",
                "source": "user_stated", "slot": "like:green tea", "importance": 0.6,
                "turns": []}]}))
            m.add([{"role": "user", "content": "I really like green tea"},
                   {"role": "assistant", "content": "ok"}], user_id="bob", session_id="s")
    [add] = ops(spans)
    assert add.name == "upsert_memory"
    assert (add.attributes or {})["gen_ai.memory.record.count"] == 1
    kids = children(spans, add)
    chat = [s for s in kids if s.name == "chat qwen-test"]
    assert len(chat) == 1 and chat[0].kind == SpanKind.CLIENT
    attrs = dict(chat[0].attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.request.model"] == "qwen-test"
    assert attrs["server.address"] == "127.0.0.1" and isinstance(attrs["server.port"], int)
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
    assert "gen_ai.input.messages" not in attrs and "gen_ai.output.messages" not in attrs
    # The write, beside the LLM call: a new fact's id is new, so a plain insert.
    assert any(s.name.startswith("insert ") for s in kids)
    assert "green tea" not in all_values(spans)


def test_errors_are_marked(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    missing = "01a23710-6d01-7eff-ae16-8d4bbbadae8f"
    with memory(tmp_path, enabled=True) as m, pytest.raises(MemoryNotFoundError):
        m.update(missing, "x", user_id="alice")
    [update] = ops(spans)
    assert update.status.status_code == StatusCode.ERROR
    assert (update.attributes or {})["error.type"] == "MemoryNotFoundError"
    assert (update.attributes or {})["gen_ai.memory.record.id"] == missing


def test_off_by_default_and_without_opentelemetry(
        tmp_path: Path, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    with memory(tmp_path / "a") as m:
        m.add(SECRET, user_id="alice", infer=False)
        assert m.search(QUERY, user_id="alice", threshold=-1)
    assert spans.get_finished_spans() == ()
    assert memray_tracing.chat("m", "http://127.0.0.1:1/v1", []) is memray_tracing.NOOP

    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # as if the extra were absent
    memray_tracing._get_tracer.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, "memray.tracing"), \
                memory(tmp_path / "b", enabled=True) as m:
            m.add(SECRET, user_id="alice", infer=False)
            assert m.search(QUERY, user_id="alice", threshold=-1)
    finally:
        memray_tracing._get_tracer.cache_clear()
    assert spans.get_finished_spans() == ()
    assert [r.message for r in caplog.records if "opentelemetry-api" in r.message] == [
        "tracing is enabled but opentelemetry-api is not installed "
        "(pip install 'memray-ai[otel]'); no spans are emitted"]


def test_async_reads_are_one_span_each_with_store_children(
        tmp_path: Path, spans: InMemorySpanExporter) -> None:
    import asyncio

    from memray.core.aio import AsyncMemory

    with memory(tmp_path, enabled=True) as m:
        m.add(SECRET, user_id="alice", infer=False)
        spans.clear()
        am = AsyncMemory(m)
        assert asyncio.run(am.search(QUERY, user_id="alice", threshold=-1))
        asyncio.run(am.context(QUERY, user_id="alice"))
    got = [(s.name, (s.attributes or {})["memray.method"]) for s in ops(spans)]
    assert got == [("search_memory", "search"), ("search_memory", "context")]
    search = ops(spans)[0]
    assert (search.attributes or {})["gen_ai.memory.record.count"] == 1
    # the store call ran in a worker thread and is still this span's child
    assert [s.name for s in children(spans, search)] == [f"search {COLLECTION}"]
    assert "Shanghai" not in all_values(spans) and "alice" not in all_values(spans)

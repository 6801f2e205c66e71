"""`MemrayStore` with langgraph itself: a compiled graph writes and later recalls through
the store LangGraph injects, and the BaseStore operations directly (sync and async)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict

import numpy as np
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

from memray import Memory, MemoryConfig
from memray.embed.cache import CachedEmbedder
from memray.errors import ConfigError, InvalidInputError
from memray.integrations.langgraph import MemrayStore
from memray.maintain.plan import MaintenanceSettings, plan_user
from memray.models import MemoryStatus, utcnow
from memray.store.base import StoredMemory, Where

HASHING = {"provider": "hashing", "dim": 32}


class Turn(TypedDict, total=False):
    said: str
    ask: str
    recalled: list[str]


def remember(state: Turn, config: RunnableConfig, *, store: BaseStore) -> Turn:
    uid = config["configurable"]["user_id"]
    key = f"fact-{len(store.search(('memories', uid), limit=100))}"
    store.put(("memories", uid), key, {"content": state["said"], "from": "chat"})
    return {}


def recall(state: Turn, config: RunnableConfig, *, store: BaseStore) -> Turn:
    uid = config["configurable"]["user_id"]
    hits = store.search(("memories", uid), query=state["ask"], limit=1)
    return {"recalled": [h.value["content"] for h in hits]}


def graph(store: BaseStore):  # type: ignore[no-untyped-def]
    g = StateGraph(Turn)
    g.add_node("remember", remember)
    g.add_node("recall", recall)
    g.add_conditional_edges(START, lambda s: "remember" if s.get("said") else "recall")
    g.add_edge("remember", END)
    g.add_edge("recall", END)
    return g.compile(store=store)


def test_graph_writes_then_recalls_through_the_injected_store(
        tmp_path: Path, embedder: CachedEmbedder) -> None:
    with Memory(MemoryConfig(data_dir=str(tmp_path)), embedder=embedder) as m:
        app = graph(MemrayStore(m))
        alice = {"configurable": {"user_id": "alice"}}
        for said in ("I am vegetarian", "I live in Hangzhou", "I play the violin"):
            app.invoke({"said": said}, alice)
        app.invoke({"said": "I live in Paris"}, {"configurable": {"user_id": "bob"}})
        assert app.invoke({"ask": "Which city do I live in?"}, alice)["recalled"] == \
            ["I live in Hangzhou"]
        assert app.invoke({"ask": "What should I cook for dinner?"}, alice)["recalled"] == \
            ["I am vegetarian"]
        assert app.invoke({"ask": "Which city do I live in?"},
                          {"configurable": {"user_id": "bob"}})["recalled"] == ["I live in Paris"]
        # the items are memray memories of their user: recalled by memray itself too
        hits = m.search("Which city do I live in?", user_id="alice")
        assert hits and hits[0].memory.content == "I live in Hangzhou"
        assert m.profile("alice").constraints[0].content == "I am vegetarian"


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory(MemoryConfig(data_dir=str(tmp_path / "d"), embedder=HASHING)) as m:
        yield m


def test_put_get_update_delete_round_trip(memory: Memory) -> None:
    store = MemrayStore(memory)
    ns = ("memories", "u1")
    value = {"content": "I like green tea", "tags": ["drink", "tea"], "n": 3,
             "nested": {"a": [1, 2.5, None, True]}}
    store.put(ns, "tea", value)
    item = store.get(ns, "tea")
    assert item is not None and item.value == value and item.namespace == ns
    assert item.key == "tea"
    assert store.get(ns, "other") is None and store.get(("memories", "u2"), "tea") is None
    version = memory.version(user_id="u1")
    store.put(ns, "tea", value)  # the same value again: nothing written
    assert memory.version(user_id="u1") == version
    store.put(ns, "tea", {**value, "n": 4})
    again = store.get(ns, "tea")
    assert again is not None and again.value["n"] == 4
    assert again.created_at == item.created_at and again.updated_at >= item.updated_at
    mid = memory.get_all(user_id="u1").items[0].id
    assert [e.op for e in memory.history(mid, user_id="u1")] == ["ADD", "UPDATE"]
    store.delete(ns, "tea")
    store.delete(ns, "tea")  # deleting a missing item is not an error
    assert store.get(ns, "tea") is None
    assert store.search(ns, query="green tea") == []
    assert memory.history(mid, user_id="u1") == []  # a deleted item leaves no history


def test_search_filters_pages_and_sub_namespaces(memory: Memory) -> None:
    store = MemrayStore(memory)
    store.put(("memories", "u1"), "a", {"content": "I like green tea", "kind": "drink", "n": 1})
    store.put(("memories", "u1", "food"), "b", {"content": "I like noodles", "kind": "food",
                                                "n": 2})
    store.put(("memories", "u1", "food"), "c", {"content": "I like rice", "kind": "food",
                                                "n": 3})
    store.put(("memories", "u2"), "a", {"content": "I like green tea", "kind": "drink"})
    memory.add([{"role": "user", "content": "I like tea with milk"}], user_id="u1",
               infer=False)  # a memory of u1 that is not an item
    everything = store.search(("memories", "u1"))
    assert [i.key for i in everything] == ["c", "b", "a"]  # newest first
    assert {i.key for i in store.search(("memories", "u1", "food"))} == {"b", "c"}
    assert [i.key for i in store.search(("memories", "u1"), filter={"kind": "drink"})] == ["a"]
    assert [i.key for i in store.search(("memories", "u1"), filter={"n": {"$gte": 2}},
                                        query="rice")] == ["c", "b"]
    hits = store.search(("memories", "u1"), query="green tea")
    assert hits[0].key == "a" and hits[0].score is not None
    assert all(h.value.get("content") != "I like tea with milk" for h in hits)
    assert [i.key for i in store.search(("memories", "u1"), limit=1, offset=1)] == ["b"]
    assert store.search(("memories", "u3"), query="tea") == []


def test_list_namespaces(memory: Memory) -> None:
    store = MemrayStore(memory)
    for ns in (("memories", "u1"), ("memories", "u1", "food"), ("memories", "u2", "food"),
               ("memories", "u2", "trips", "2026")):
        store.put(ns, "k", {"content": "x"})
    assert store.list_namespaces() == sorted([
        ("memories", "u1"), ("memories", "u1", "food"), ("memories", "u2", "food"),
        ("memories", "u2", "trips", "2026")])
    assert store.list_namespaces(prefix=("memories", "u2")) == [
        ("memories", "u2", "food"), ("memories", "u2", "trips", "2026")]
    assert store.list_namespaces(suffix=("food",)) == [("memories", "u1", "food"),
                                                       ("memories", "u2", "food")]
    assert store.list_namespaces(max_depth=2) == [("memories", "u1"), ("memories", "u2")]
    assert store.list_namespaces(prefix=("memories", "*", "trips")) == [
        ("memories", "u2", "trips", "2026")]
    assert store.list_namespaces(limit=1, offset=1) == [("memories", "u1", "food")]


def test_namespaces_that_do_not_map_are_refused(memory: Memory) -> None:
    store = MemrayStore(memory)
    for bad in (("other", "u1"), ("memories",)):
        with pytest.raises(InvalidNamespaceError, match="does not map to a memray user"):
            store.put(bad, "k", {"content": "x"})
    with pytest.raises(InvalidNamespaceError, match="searches across users"):
        store.search(("memories",), query="x")
    with pytest.raises(InvalidNamespaceError):
        store.batch([GetOp(("memories", "a.b"), "k")])  # a label LangGraph forbids
    with pytest.raises(NotImplementedError):
        store.put(("memories", "u1"), "k", {"content": "x"}, ttl=5)
    with pytest.raises(ConfigError):
        MemrayStore(memory, namespace=("memories",))


def test_agent_namespaces_and_text_fields(memory: Memory) -> None:
    store = MemrayStore(memory, namespace=("{user_id}", "{agent_id}"), text_fields=["note"])
    store.put(("u1", "planner"), "k", {"note": "I fly to Oslo on Friday", "id": 7})
    store.put(("u1", "chef"), "k", {"note": "I am vegetarian"})
    record = next(r for r in memory.get_all(user_id="u1").items if r.agent_id == "planner")
    assert record.content == "I fly to Oslo on Friday"  # only the indexed field is embedded
    assert [i.value for i in store.search(("u1", "chef"), query="Oslo")] == [
        {"note": "I am vegetarian"}]
    assert store.get(("u1", "planner"), "k") is not None
    assert store.get(("u1", "chef"), "k") != store.get(("u1", "planner"), "k")


def test_batch_runs_ops_in_order_and_abatch_matches(memory: Memory) -> None:
    store = MemrayStore(memory)
    ns = ("memories", "u1")
    results = store.batch([
        PutOp(ns, "a", {"content": "first"}), PutOp(ns, "a", {"content": "second"}),
        PutOp(ns, "b", {"content": "other"}), GetOp(ns, "a"),
        PutOp(ns, "b", None), SearchOp(ns, None, 10, 0, None),
        ListNamespacesOp((MatchCondition("prefix", ("memories",)),))])
    assert results[:3] == [None, None, None]
    got = results[3]
    assert got is not None and got.value == {"content": "second"}  # type: ignore[union-attr]
    assert [i.key for i in results[5]] == ["a"]  # type: ignore[union-attr]
    assert results[6] == [ns]

    async def run() -> None:
        await store.aput(ns, "c", {"content": "async"})
        item = await store.aget(ns, "c")
        assert item is not None and item.value == {"content": "async"}
        assert {i.key for i in await store.asearch(ns, query="async")} == {"a", "c"}
        await store.adelete(ns, "c")
        assert await store.aget(ns, "c") is None

    asyncio.run(run())


def test_items_are_pinned_against_nightly_decay_and_merge(memory: Memory) -> None:
    store = MemrayStore(memory)
    for i in range(3):
        store.put(("memories", "u1"), f"k{i}", {"content": "I like green tea"})
    old = utcnow().replace(year=utcnow().year - 1)
    rows = [StoredMemory(r.record.model_copy(update={"importance": 0.1,
                                                     "last_confirmed_at": old}), r.vector)
            for r in memory.engine().store.rows("u1", Where())]
    assert len(rows) == 3 and np.allclose(rows[0].vector, rows[1].vector)
    plan = plan_user("u1", rows, utcnow(), MaintenanceSettings())
    assert plan.empty  # a year unconfirmed, low importance, identical: still kept as is
    unpinned = [StoredMemory(r.record.model_copy(update={"metadata": {}}), r.vector)
                for r in rows]
    # what pinning prevents:
    assert plan_user("u1", unpinned, utcnow(), MaintenanceSettings()).merges
    assert all(r.record.status == MemoryStatus.ACTIVE for r in rows)


def test_an_as_of_view_reads_items_as_they_were(memory: Memory) -> None:
    store = MemrayStore(memory)
    ns = ("memories", "u1")
    store.put(ns, "home", {"content": "I live in Shanghai"})
    mid = memory.get_all(user_id="u1").items[0].id
    first = memory.history(mid, user_id="u1")[0].at
    while utcnow() <= first:  # the next put must be recorded at a later millisecond
        pass
    store.put(ns, "home", {"content": "I live in Hangzhou"})
    assert memory.history(mid, user_id="u1")[-1].at > first
    store.put(ns, "pet", {"content": "I have a cat"})
    then = store.as_of(first)
    item = then.get(ns, "home")
    assert item is not None and item.value == {"content": "I live in Shanghai"}
    assert then.get(ns, "pet") is None  # put later
    assert [i.value["content"] for i in then.search(ns, query="Where do I live?")] == [
        "I live in Shanghai"]
    assert [i.key for i in then.search(ns)] == ["home"]
    now = store.get(ns, "home")
    assert now is not None and now.value == {"content": "I live in Hangzhou"}
    with pytest.raises(InvalidInputError, match="read-only"):
        then.put(ns, "home", {"content": "I live in Paris"})
    store.delete(ns, "home")
    assert store.as_of(first).get(ns, "home") is None  # deleted: no history to read
    with pytest.raises(InvalidInputError, match="as_of"):
        store.as_of("yesterday")

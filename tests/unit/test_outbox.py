"""Acknowledged writes survive a store outage; replays never resurrect deletions."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from memray import Memory, MemoryConfig
from memray.core.changes import ChangeSet
from memray.core.engine import Engine
from memray.core.ids import new_id
from memray.core.summary import MERGED_FROM, MERGED_INTO, rule_summary
from memray.embed.hashing import HashingEmbedder
from memray.errors import MemoryNotFoundError, StoreError
from memray.models import MemoryStatus, content_hash, utcnow
from memray.store.base import StoredMemory
from memray.store.fake import InMemoryStore


class FlakyStore(InMemoryStore):
    """The fake store, with writes failing while `down` is set."""

    down = False

    def replace(self, rows: Sequence[StoredMemory]) -> None:
        if self.down:
            raise StoreError("store is down")
        super().replace(rows)

    def delete(self, user_id: str, ids: Sequence[str]) -> int:
        if self.down:
            raise StoreError("store is down")
        return super().delete(user_id, ids)


def memory(tmp_path: Path, store: InMemoryStore) -> Memory:
    emb = HashingEmbedder(dim=32)
    return Memory(MemoryConfig(data_dir=str(tmp_path)), embedder=emb, store=store)


@pytest.fixture
def store() -> FlakyStore:
    return FlakyStore(model="hashing-32", dim=32)


def test_write_during_outage_is_applied_on_reopen(tmp_path: Path, store: FlakyStore) -> None:
    m = memory(tmp_path, store)
    store.down = True
    result = m.add("I like tea", user_id="u", infer=False)
    assert [e.op for e in result.events] == ["ADD"]
    assert store.count("u") == 0
    m.close()
    store.down = False
    with memory(tmp_path, store) as again:
        assert [r.content for r in again.get_all(user_id="u").items] == ["I like tea"]
        assert again.version(user_id="u") == 1


def test_queued_ops_apply_in_order_so_a_delete_stays_deleted(
        tmp_path: Path, store: FlakyStore) -> None:
    m = memory(tmp_path, store)
    mid = m.add("I like tea", user_id="u", infer=False).events[0].memory_id
    store.down = True
    m.update(mid, "I like green tea", user_id="u")  # queued
    store.down = False
    m.delete(mid, user_id="u")  # drains the update first, then deletes
    assert store.count("u") == 0
    m.close()
    with memory(tmp_path, store) as again:
        assert again.get(mid, user_id="u") is None
        assert again.history(mid, user_id="u") == []
        assert again.search("tea", user_id="u", threshold=-1) == []


def test_an_add_the_store_has_not_applied_can_be_read_updated_and_deleted(
        tmp_path: Path, store: FlakyStore) -> None:
    m = memory(tmp_path, store)
    store.down = True
    mid = m.add("I like tea", user_id="u", infer=False).events[0].memory_id
    assert store.count("u") == 0  # acknowledged, still queued
    got = m.get(mid, user_id="u")
    assert got is not None and got.content == "I like tea"
    assert m.update(mid, "I like green tea", user_id="u").op == "UPDATE"
    got = m.get(mid, user_id="u")
    assert got is not None and got.content == "I like green tea"
    assert m.delete(mid, user_id="u").op == "DELETE"
    assert m.get(mid, user_id="u") is None  # the queued delete counts before it is applied
    with pytest.raises(MemoryNotFoundError):
        m.delete(mid, user_id="u")
    store.down = False
    m.close()
    with memory(tmp_path, store) as again:
        assert again.get(mid, user_id="u") is None
        assert store.count("u") == 0


def test_a_lookup_never_shows_another_users_queued_memory(
        tmp_path: Path, store: FlakyStore) -> None:
    store.down = True
    with memory(tmp_path, store) as m:  # closed here: no retry left running while it is down
        mid = m.add("I like tea", user_id="a", infer=False).events[0].memory_id
        assert m.get(mid, user_id="b") is None
        with pytest.raises(MemoryNotFoundError):
            m.delete(mid, user_id="b")
        assert m.get(mid, user_id="a") is not None


def test_deleting_a_member_of_a_merge_the_store_has_not_applied_rebuilds_it(
        tmp_path: Path, store: FlakyStore) -> None:
    m = memory(tmp_path, store)
    a = m.add("I like tea", user_id="u", infer=False).events[0].memory
    b = m.add("I like coffee", user_id="u", infer=False).events[0].memory
    assert a is not None and b is not None
    store.down = True
    sid = new_id()

    def merge(engine: Engine) -> ChangeSet:
        changes, now = ChangeSet("u"), utcnow()
        text = rule_summary([a.content, b.content], 400)
        summary = a.model_copy(update={"id": sid, "content": text,
                                       "content_hash": content_hash(text),
                                       "metadata": {MERGED_FROM: [a.id, b.id]}})
        changes.put(summary, engine.embedder.embed([text])[0], None, now, fresh=True)
        for r in (a, b):
            changes.put(r.model_copy(update={"status": MemoryStatus.MERGED,
                                             "metadata": {MERGED_INTO: sid}}),
                        engine.embedder.embed([r.content])[0], r, now)
        return changes

    m.write_changes("u", merge)  # queued: the store is down
    receipt = m.delete(a.id, user_id="u").receipt
    assert receipt is not None
    assert [(d.memory_id, d.action) for d in receipt.derived] == [(sid, "rebuilt")]
    store.down = False
    m.close()
    with memory(tmp_path, store) as again:
        assert again.get(sid, user_id="u") is None  # the summary that held the tea is gone
        held = [r.content for r in again.get_all(user_id="u").items]
        assert not any("tea" in text for text in held), held


def test_a_repeat_after_a_delete_the_store_has_not_applied_is_added_again(
        tmp_path: Path, store: FlakyStore) -> None:
    m = memory(tmp_path, store)
    mid = m.add("I like tea", user_id="u", infer=False).events[0].memory_id
    store.down = True
    m.delete(mid, user_id="u")  # queued
    again = m.add("I like tea", user_id="u", infer=False).events
    assert [e.op for e in again] == ["ADD"]  # not a NOOP against the deleted row
    store.down = False
    m.close()
    with memory(tmp_path, store) as reopened:
        assert [r.content for r in reopened.get_all(user_id="u").items] == ["I like tea"]


def test_a_langgraph_put_after_a_delete_the_store_has_not_applied_is_kept(
        tmp_path: Path, store: FlakyStore) -> None:
    from memray.integrations.langgraph import MemrayStore

    m = memory(tmp_path, store)
    graph, ns = MemrayStore(m), ("memories", "u")
    graph.put(ns, "k", {"text": "I like tea"})
    store.down = True
    graph.delete(ns, "k")  # queued
    assert graph.get(ns, "k") is None
    graph.put(ns, "k", {"text": "I like tea"})
    store.down = False
    m.close()
    with memory(tmp_path, store) as reopened:
        item = MemrayStore(reopened).get(ns, "k")
        assert item is not None and item.value == {"text": "I like tea"}

"""The per-user hot set answers exactly as the store does and never serves stale data."""

from __future__ import annotations

from pathlib import Path

from memray import Memory, MemoryConfig
from memray.embed.cache import CachedEmbedder

QUERIES = ["What do I drink?", "Where do I live?", "When am I free?", "pets", "music"]
FACTS = ["I drink green tea", "I live in Hangzhou", "I'm only free after 9 pm",
         "I have a cat named Mochi", "I listen to jazz", "I like oolong tea",
         "My sister lives in Paris", "I play chess on weekends"]


def cfg(path: Path, hot: str) -> MemoryConfig:
    # Dense only: keyword scores need the hot set, and these tests compare the hot set's
    # answers with the store's, which must be the same memories in the same order.
    return MemoryConfig.model_validate({"data_dir": str(path),
                                        "recall": {"hot_set": hot, "w_lexical": 0.0}})


def answers(m: Memory, user: str) -> list[list[tuple[str, float]]]:
    return [[(h.memory.content, round(h.similarity, 4)) for h in
             m.search(q, user_id=user, threshold=-1, top_k=5)] for q in QUERIES]


def test_hot_set_agrees_with_the_store(tmp_path: Path, embedder: CachedEmbedder) -> None:
    with Memory(cfg(tmp_path, "off"), embedder=embedder) as cold:
        cold.add([{"role": "user", "content": f} for f in FACTS], user_id="u", infer=False)
        cold.add("I drink coffee", user_id="other", infer=False)
        want = answers(cold, "u")
    with Memory(cfg(tmp_path, "on"), embedder=embedder) as hot:
        assert answers(hot, "u") == want
        assert answers(hot, "u") == want  # served from the hot set now
        assert hot._backend.hot is not None and hot._backend.hot._entries  # it was really used
        assert [h.memory.content for h in hot.search("drink", user_id="other")] == [
            "I drink coffee"]


def test_writes_are_seen_at_once(tmp_path: Path, embedder: CachedEmbedder) -> None:
    with Memory(cfg(tmp_path, "auto"), embedder=embedder) as m:
        assert m._backend.hot is not None  # auto: on for milvus-lite
        mid = m.add("I live in Shanghai", user_id="u", infer=False).events[0].memory_id
        assert m.search("Where do I live?", user_id="u")[0].memory.content == \
            "I live in Shanghai"
        m.update(mid, "I live in Hangzhou", user_id="u")
        assert m.search("Where do I live?", user_id="u")[0].memory.content == \
            "I live in Hangzhou"
        m.delete(mid, user_id="u")
        assert m.search("Where do I live?", user_id="u", threshold=-1) == []


def test_another_instance_writes_are_seen(tmp_path: Path, embedder: CachedEmbedder) -> None:
    with Memory(cfg(tmp_path, "on"), embedder=embedder) as a, \
            Memory(cfg(tmp_path, "on"), embedder=embedder) as b:
        a.add("I live in Shanghai", user_id="u", infer=False)
        assert len(a.search("Where do I live?", user_id="u")) == 1
        b.add("I moved to Hangzhou", user_id="u", infer=False)
        assert len(a.search("Where do I live?", user_id="u")) == 2
        b.delete_all(user_id="u")
        assert a.search("Where do I live?", user_id="u", threshold=-1) == []


def test_writes_patch_the_hot_set_instead_of_reloading(
        tmp_path: Path, embedder: CachedEmbedder) -> None:
    with Memory(cfg(tmp_path / "hot", "on"), embedder=embedder) as hot, \
            Memory(cfg(tmp_path / "cold", "off"), embedder=embedder) as cold:
        for m in (hot, cold):
            m.add([{"role": "user", "content": f} for f in FACTS], user_id="u", infer=False)
        assert hot._backend.hot is not None
        assert answers(hot, "u") == answers(cold, "u")
        loads = hot._backend.hot.loads
        for m in (hot, cold):  # add, update, supersede (via extraction), delete
            mid = m.add("I live in Shanghai", user_id="u", infer=False).events[0].memory_id
            m.update(mid, "I live in Suzhou", user_id="u")
            m.add([{"role": "user", "content": "I moved to Hangzhou"}], user_id="u")
            first = m.get_all(user_id="u").items[0].id
            m.delete(first, user_id="u")
        assert [[c for c, _ in a] for a in answers(hot, "u")] == \
            [[c for c, _ in a] for a in answers(cold, "u")]
        assert hot._backend.hot.loads == loads  # followed every write without reloading
        assert "I live in Shanghai" not in str(answers(hot, "u"))


def test_a_verbatim_add_checks_repeats_in_the_hot_set_and_asks_the_store_nothing(
        tmp_path: Path, embedder: CachedEmbedder) -> None:
    with Memory(cfg(tmp_path, "auto"), embedder=embedder) as m:
        m.add("I drink green tea", user_id="u", infer=False)
        m.add("I drink coffee", user_id="other", infer=False)
        m.search("drink", user_id="u")  # the user's set is held from here on
        store = m._backend.live.store
        asked: list[str] = []
        for name in ("query", "rows", "list_ids", "search", "replace", "delete"):
            real = getattr(store, name)
            setattr(store, name, lambda *a, _n=name, _f=real, **k: (asked.append(_n),
                                                                     _f(*a, **k))[1])
        added = m.add("I live in Hangzhou", user_id="u", infer=False).events
        again = m.add("I drink green tea", user_id="u", infer=False).events
        also = m.add("I live in Hangzhou", user_id="u", infer=False).events
        other = m.add("I drink green tea", user_id="other", infer=False).events
    assert [e.op for e in added] == ["ADD"]
    assert [e.op for e in again] == [e.op for e in also] == ["NOOP"]
    assert [e.op for e in other] == ["ADD"]  # another user's memory is no repeat
    # u: no lookup at all (hot set, fresh id inserted); other was never searched: one query
    assert asked == ["query"]


def test_an_extracted_new_fact_is_inserted_without_a_lookup(
        tmp_path: Path, embedder: CachedEmbedder) -> None:
    with Memory(cfg(tmp_path, "auto"), embedder=embedder) as m:
        m.add("I drink green tea", user_id="u", infer=False)
        store = m._backend.live.store
        asked: list[str] = []
        for name in ("insert", "replace", "delete"):
            real = getattr(store, name)
            setattr(store, name, lambda *a, _n=name, _f=real, **k: (asked.append(_n),
                                                                     _f(*a, **k))[1])
        added = m.add("I'm allergic to peanuts", user_id="u").events  # the rule extractor
    assert [e.op for e in added] == ["ADD"]
    assert asked == ["insert"]  # its id is new: no replace, so no query before a delete

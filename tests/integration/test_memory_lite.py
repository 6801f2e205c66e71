"""`Memory` end to end on the embedded default: milvus-lite and the bundled MiniLM model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memray import (
    DimensionMismatchError,
    EmbedderConfig,
    InvalidInputError,
    Memory,
    MemoryConfig,
    MemoryNotFoundError,
    RecallConfig,
    StoreUnavailableError,
)
from memray.embed.cache import CachedEmbedder
from memray.embed.hashing import HashingEmbedder

HOSTILE = ['u" or user_id != "', "a\\", "line\nbreak", "x" * 10_000, "中文 用户"]


@pytest.fixture
def mem(tmp_path: Path, embedder: CachedEmbedder) -> Iterator[Memory]:
    with Memory(MemoryConfig(data_dir=str(tmp_path / "d")), embedder=embedder) as m:
        yield m


def _contents(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [h.memory.content for h in hits]


def test_recall_across_instances_after_restart(tmp_path: Path, embedder: CachedEmbedder) -> None:
    cfg = MemoryConfig(data_dir=str(tmp_path / "d"))
    with Memory(cfg, embedder=embedder) as first:
        first.add([{"role": "user", "content": "I am allergic to peanuts"},
                   {"role": "assistant", "content": "Noted, no peanuts."},
                   {"role": "user", "content": "My daughter is called Mia"}],
                  user_id="alice", session_id="s1", infer=False)
    with Memory(cfg, embedder=embedder) as second:
        hits = second.search("Can I put peanut butter in the recipe?", user_id="alice")
        assert _contents(hits)[0] == "I am allergic to peanuts"
        assert "Noted, no peanuts." not in _contents(hits)  # assistant turns are not stored
        assert second.version(user_id="alice") == 1


def test_hostile_user_ids_are_isolated(mem: Memory) -> None:
    for i, user in enumerate(HOSTILE):
        mem.add(f"secret number {i} belongs to this user", user_id=user, infer=False)
    mem.add("secret number 99 belongs to bob", user_id="bob", infer=False)
    for i, user in enumerate(HOSTILE):
        hits = mem.search("secret number", user_id=user, threshold=-1)
        assert _contents(hits) == [f"secret number {i} belongs to this user"]
        page = mem.get_all(user_id=user)
        assert [r.user_id for r in page.items] == [user]
        exported = [d for d in mem.export(user_id=user) if d["kind"] == "memory"]
        assert [d["user_id"] for d in exported] == [user]
    assert mem.delete_all(user_id=HOSTILE[0]).deleted == 1
    assert len(mem.get_all(user_id="bob").items) == 1


@pytest.mark.parametrize("bad", ["", "   ", None, 7])
def test_empty_or_non_string_user_id_is_rejected(mem: Memory, bad: object) -> None:
    with pytest.raises(ValueError):
        mem.add("hello", user_id=bad, infer=False)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        mem.search("hello", user_id=bad)  # type: ignore[arg-type]


def test_id_calls_across_users_look_like_missing_ids(mem: Memory) -> None:
    mid = mem.add("I live in Shanghai", user_id="alice", infer=False).events[0].memory_id
    missing = "01a23710-6d01-7eff-ae16-8d4bbbadae8f"
    for memory_id in (mid, missing):
        assert mem.get(memory_id, user_id="mallory") is None
        assert mem.history(memory_id, user_id="mallory") == []
        with pytest.raises(MemoryNotFoundError) as e1:
            mem.update(memory_id, "I live in Paris", user_id="mallory")
        with pytest.raises(MemoryNotFoundError) as e2:
            mem.delete(memory_id, user_id="mallory")
        assert memory_id in str(e1.value) and memory_id in str(e2.value)
    record = mem.get(mid, user_id="alice")
    assert record is not None and record.content == "I live in Shanghai"
    assert len(mem.history(mid, user_id="alice")) == 1
    with pytest.raises(InvalidInputError):
        mem.get('x" or id != "', user_id="alice")


def test_update_reembeds_and_keeps_history(mem: Memory) -> None:
    mid = mem.add("I live in Shanghai", user_id="alice", infer=False).events[0].memory_id
    event = mem.update(mid, "I live in Hangzhou", user_id="alice")
    assert event.op == "UPDATE" and event.previous is not None
    assert event.previous.content == "I live in Shanghai"
    hits = mem.search("Which city do I live in?", user_id="alice")
    assert _contents(hits)[0] == "I live in Hangzhou"
    assert [e.op for e in mem.history(mid, user_id="alice")] == ["ADD", "UPDATE"]
    assert mem.version(user_id="alice") == 2


def test_deleted_memories_never_come_back(tmp_path: Path, embedder: CachedEmbedder) -> None:
    cfg = MemoryConfig(data_dir=str(tmp_path / "d"))
    with Memory(cfg, embedder=embedder) as mem:
        ids = [e.memory_id for e in mem.add(
            [{"role": "user", "content": "I work nine to six"},
             {"role": "user", "content": "I like jazz"}], user_id="alice", infer=False).events]
        mem.update(ids[0], "I work nine to five", user_id="alice")
        gone = mem.delete(ids[0], user_id="alice")
        assert gone.op == "DELETE" and gone.previous is not None
        _assert_gone(mem, "alice", "nine", ids[0])
        assert _contents(mem.search("music", user_id="alice")) == ["I like jazz"]
        with pytest.raises(MemoryNotFoundError):
            mem.delete(ids[0], user_id="alice")
        assert mem.delete_all(user_id="alice").deleted == 1
        _assert_gone(mem, "alice", "jazz", ids[1])
        assert list(mem.export(user_id="alice"))[1:] == []
    with Memory(cfg, embedder=embedder) as again:  # not even after a restart
        _assert_gone(again, "alice", "nine", ids[0])
        _assert_gone(again, "alice", "jazz", ids[1])


def _assert_gone(mem: Memory, user: str, word: str, mid: str) -> None:
    assert all(word not in c for c in _contents(mem.search(word, user_id=user, threshold=-1)))
    assert mem.get(mid, user_id=user) is None
    assert mem.history(mid, user_id=user) == []
    assert word not in str(list(mem.export(user_id=user)))


def test_pagination_walks_everything_once(mem: Memory) -> None:
    texts = [f"note number {i}" for i in range(23)]
    mem.add([{"role": "user", "content": t} for t in texts], user_id="pat", infer=False)
    seen, cursor, pages = [], None, 0
    while True:
        page = mem.get_all(user_id="pat", limit=5, cursor=cursor)
        seen += [r.content for r in page.items]
        pages += 1
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert pages == 5 and seen == texts
    with pytest.raises(InvalidInputError):
        mem.get_all(user_id="pat", limit=0)
    with pytest.raises(InvalidInputError):
        mem.get_all(user_id="pat", cursor="not-a-cursor")


def test_threshold_cap_and_ranking(mem: Memory) -> None:
    mem.add([{"role": "user", "content": c} for c in (
        "I drink green tea every morning", "I prefer oolong tea to coffee",
        "Tea makes me calm", "My car is a red Volvo", "I collect stamps")],
        user_id="tom", infer=False)
    hits = mem.search("What tea does he like?", user_id="tom")
    assert hits and all(h.similarity >= 0.35 for h in hits)
    assert "My car is a red Volvo" not in _contents(hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len(mem.search("What tea does he like?", user_id="tom", top_k=2, threshold=-1)) == 2
    assert len(mem.search("What tea does he like?", user_id="tom", threshold=-1)) == 5
    assert mem.search("What tea does he like?", user_id="tom", threshold=0.99) == []
    section = mem.context("What tea does he like?", user_id="tom")
    assert "may be out of date" in section
    assert section.count("\n- (") == len(hits)


def test_importance_breaks_near_ties(tmp_path: Path, embedder: CachedEmbedder) -> None:
    cfg = MemoryConfig(data_dir=str(tmp_path / "d"),
                       recall=RecallConfig(w_similarity=0.1, w_importance=0.9, w_recency=0.0,
                                         w_intent=0.0, w_lexical=0.0, w_episode=0.0))
    with Memory(cfg, embedder=embedder) as mem:
        mem.add("I like tea", user_id="u", infer=False)
        low = mem.search("I like tea", user_id="u")[0]
        assert low.score == pytest.approx((0.1 * low.similarity + 0.9 * 0.5) / 1.0, abs=1e-5)


def test_exact_repeat_is_a_noop(mem: Memory) -> None:
    first = mem.add("I like tea", user_id="u", infer=False)
    again = mem.add("  I like tea ", user_id="u", infer=False)
    assert [e.op for e in again.events] == ["NOOP"]
    assert again.events[0].memory_id == first.events[0].memory_id
    assert len(mem.get_all(user_id="u").items) == 1


def test_bad_input_writes_nothing(mem: Memory) -> None:
    with pytest.raises(InvalidInputError):
        mem.add([{"role": "user", "content": "ok"}, {"role": "robot", "content": "x"}],
                user_id="u", infer=False)
    with pytest.raises(InvalidInputError):
        mem.add([{"role": "user", "content": "ok"}, {"role": "user", "content": "y" * 5000}],
                user_id="u", infer=False)
    with pytest.raises(InvalidInputError):
        mem.search("tea", user_id="u", filters={"user_id": "someone else"})
    assert mem.get_all(user_id="u").items == []


def test_disabled_switch_makes_add_and_search_noops(
        tmp_path: Path, embedder: CachedEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = MemoryConfig(data_dir=str(tmp_path / "d"))
    with Memory(cfg, embedder=embedder) as on:
        on.add("I like tea", user_id="u", infer=False)
    monkeypatch.setenv("MEMRAY_ENABLED", "false")
    with Memory(cfg, embedder=embedder) as off:
        assert off.add("I like coffee", user_id="u", infer=False).events == []
        assert off.search("tea", user_id="u", threshold=-1) == []
        assert off.context("tea", user_id="u") == ""
    monkeypatch.delenv("MEMRAY_ENABLED")
    with Memory(cfg, embedder=embedder) as on_again:
        assert _contents(on_again.search("drinks", user_id="u", threshold=-1)) == ["I like tea"]


def test_opening_with_another_dimension_names_both(
        tmp_path: Path, embedder: CachedEmbedder) -> None:
    data = str(tmp_path / "d")
    with Memory(MemoryConfig(data_dir=data), embedder=embedder) as m:
        m.add("I like tea", user_id="u", infer=False)
    other = Memory(MemoryConfig(data_dir=data, embedder=EmbedderConfig(provider="hashing",
                                                                       dim=64)),
                   embedder=HashingEmbedder(dim=64))
    with pytest.raises(DimensionMismatchError) as err:
        other.open()
    text = str(err.value)
    assert "384" in text and "64" in text and "hashing-64" in text


def test_from_config_dict_and_yaml(tmp_path: Path) -> None:
    yaml_path = tmp_path / "m.yaml"
    yaml_path.write_text(f"data_dir: {tmp_path / 'y'}\nrecall:\n  max_results: 3\n")
    assert Memory.from_config(yaml_path).config.recall.max_results == 3
    assert Memory.from_config({"data_dir": "z"}).config.data_dir == "z"
    with pytest.raises(ValueError):
        Memory.from_config({"data_dir": "z", "unknown": 1})


def test_a_second_process_gets_a_clear_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    data = tmp_path / "d"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from memray import Memory, MemoryConfig\n"
         "from memray.embed.hashing import HashingEmbedder\n"
         f"m = Memory(MemoryConfig(data_dir={str(data)!r}), embedder=HashingEmbedder()).open()\n"
         "print('ready', flush=True)\n"
         "sys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreUnavailableError, match="open in another process"):
            Memory(MemoryConfig(data_dir=str(data)), embedder=HashingEmbedder()).open()
    finally:
        holder.communicate("", timeout=30)


def test_concurrent_identical_verbatim_adds_store_one(mem: Memory) -> None:
    import threading

    threads = [threading.Thread(target=mem.add, args=("I like tea",),
                                kwargs={"user_id": "u", "infer": False}) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.content for r in mem.get_all(user_id="u").items] == ["I like tea"]


def test_lite_flushes_single_adds_to_segments_and_keeps_deletes(
        tmp_path: Path, embedder: CachedEmbedder) -> None:
    """milvus-lite's own memtable budget (128 MB) kept every single-row add in memory,
    walked row by row by each query: adds slowed as the dir grew and the process grew
    until the flush. memray's budget flushes every few hundred rows; what was flushed and
    what was deleted across the flushes must survive a reopen exactly."""
    cfg = MemoryConfig(data_dir=str(tmp_path / "d"))
    ids = []
    with Memory(cfg, embedder=embedder) as m:
        for i in range(240):
            ids.append(m.add(f"lab note {i}: sample {i * 7} was stored in rack {i % 9}",
                             user_id="u", infer=False).events[0].memory_id)
            if i % 10 == 9:  # deletes both before and after the flushes
                m.delete(ids[i - 5], user_id="u")
        # (closing flushes too: look while open)
        assert list((tmp_path / "d" / "milvus.db").rglob("data_*.parquet")), "never flushed"
    deleted = set(ids[4::10])
    with Memory(cfg, embedder=embedder) as again:
        held = [r.id for r in again.get_all(user_id="u", limit=500).items]
        assert sorted(held) == sorted(set(ids) - deleted)
        hit = again.search("which rack holds sample 217?", user_id="u", top_k=3)
        assert "sample 217 " in " ".join(h.memory.content for h in hit)

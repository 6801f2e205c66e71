"""`AsyncMemory`: the same answers as `Memory`, with the query embedding awaited (natively
where the embedder can, so concurrent searches are in flight together)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from memray import Memory, MemoryConfig
from memray.core.aio import AsyncMemory, aembed
from memray.embed.base import Matrix
from memray.embed.hashing import HashingEmbedder
from memray.errors import InvalidInputError, StaleReadError

FACTS = ["I live in Hangzhou", "I am vegetarian and never eat pork", "I like jazz",
         "我每天早上跑步", "My sister is called Anna"]
QUERIES = ["where do I live?", "what should I cook tonight?", "music I like", "我的运动习惯",
           "who is my sister?"]


class AwaitedEmbedder(HashingEmbedder):
    """A remote-style embedder: `aembed` is a coroutine that records how many calls are in
    flight at once; `embed` (the blocking path) is counted separately."""

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.in_flight = self.most_in_flight = self.blocking = 0

    def embed(self, texts: Sequence[str]) -> Matrix:
        self.blocking += 1
        return super().embed(texts)

    async def aembed(self, texts: Sequence[str]) -> Matrix:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0.05)  # the embedding replica's batch window
        self.in_flight -= 1
        return HashingEmbedder.embed(self, texts)


def _memory(tmp_path: Path, embedder: HashingEmbedder) -> Memory:
    cfg = MemoryConfig.model_validate({"data_dir": str(tmp_path / "d")})
    m = Memory(cfg, embedder=embedder).open()
    for fact in FACTS:
        m.add(fact, user_id="alice", infer=False)
    m.add("I live in Paris", user_id="bob", infer=False)
    return m


def test_same_hits_as_the_sync_search(tmp_path: Path) -> None:
    with _memory(tmp_path, HashingEmbedder(dim=64)) as m:
        am = AsyncMemory(m)
        for q in QUERIES:
            for kwargs in ({}, {"threshold": -1.0}, {"top_k": 2},
                           {"filters": {"type": "message"}}):
                want = m.search(q, user_id="alice", **kwargs)  # type: ignore[arg-type]
                got = asyncio.run(am.search(q, user_id="alice", **kwargs))  # type: ignore[arg-type]
                assert [(h.memory.id, round(h.score, 6)) for h in got] == \
                    [(h.memory.id, round(h.score, 6)) for h in want], (q, kwargs)
                assert all(h.memory.user_id == "alice" for h in got)
        assert asyncio.run(am.context(QUERIES[0], user_id="alice")) == \
            m.context(QUERIES[0], user_id="alice")


def test_errors_are_the_sync_errors(tmp_path: Path) -> None:
    with _memory(tmp_path, HashingEmbedder(dim=64)) as m:
        am = AsyncMemory(m)
        with pytest.raises(InvalidInputError):
            asyncio.run(am.search("q", user_id=""))
        with pytest.raises(InvalidInputError):
            asyncio.run(am.search("q", user_id="alice", filters={"nope": 1}))
        with pytest.raises(StaleReadError):
            m.config.recall.min_version_wait_s = 0.05
            asyncio.run(am.search("q", user_id="alice", min_version=10**6))


def test_concurrent_searches_await_the_embedder_together(tmp_path: Path) -> None:
    embedder = AwaitedEmbedder()
    with _memory(tmp_path, embedder) as m:
        am = AsyncMemory(m)
        blocking = embedder.blocking

        async def many() -> list[list[str]]:
            found = await asyncio.gather(*(am.search(q, user_id="alice", threshold=-1)
                                           for q in QUERIES * 4))
            return [[h.memory.content for h in hits] for hits in found]

        results = asyncio.run(many())
        # 20 searches, each waiting 50 ms on its embedding: in flight together, not in turn
        assert embedder.most_in_flight >= 10
        assert embedder.blocking == blocking  # no search blocked a thread on `embed`
        for q, hits in zip(QUERIES * 4, results, strict=True):
            assert hits == [h.memory.content for h in m.search(q, user_id="alice",
                                                                threshold=-1)]
            assert "I live in Paris" not in hits  # bob's memory never reaches alice


def test_aembed_falls_back_to_a_worker_thread() -> None:
    plain = HashingEmbedder(dim=16)
    got = asyncio.run(aembed(plain, ["a", "b"]))
    assert np.allclose(got, plain.embed(["a", "b"]))

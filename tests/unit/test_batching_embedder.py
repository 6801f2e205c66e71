"""Concurrent callers share forward passes and each gets exactly its own rows."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest

from memray.embed.base import Matrix
from memray.embed.batching import BatchingEmbedder, shared_passes
from memray.embed.cache import CachedEmbedder
from memray.embed.hashing import HashingEmbedder


class Slow(HashingEmbedder):
    """A model whose pass takes a while, so callers pile up behind it."""

    def __init__(self) -> None:
        super().__init__(dim=32, model="slow")
        self.calls: list[int] = []
        self.fail_on: str | None = None

    def embed(self, texts: Sequence[str]) -> Matrix:
        self.calls.append(len(texts))
        time.sleep(0.02)
        if self.fail_on is not None and self.fail_on in texts:
            raise RuntimeError("model failed")
        return super().embed(texts)


def _concurrently(embedder: BatchingEmbedder, texts: list[list[str]]) -> list[object]:
    out: list[object] = [None] * len(texts)

    def call(i: int) -> None:
        try:
            out[i] = embedder.embed(texts[i])
        except RuntimeError as exc:
            out[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return out


def test_each_caller_gets_its_own_rows_in_fewer_passes() -> None:
    inner = Slow()
    batching = BatchingEmbedder(inner, max_batch=16)
    texts = [[f"query {i}"] if i % 3 else [f"a {i}", f"b {i}"] for i in range(40)]
    results = _concurrently(batching, texts)
    reference = HashingEmbedder(dim=32, model="slow")
    for got, asked in zip(results, texts, strict=True):
        assert isinstance(got, np.ndarray)
        np.testing.assert_array_equal(got, reference.embed(asked))
    assert sum(inner.calls) == sum(len(t) for t in texts)
    assert len(inner.calls) < len(texts) / 2  # shared passes
    assert max(inner.calls) <= 16
    # what /metrics reports, found through the cache in front as Memory finds it
    assert shared_passes(CachedEmbedder(batching, size=8)) == (len(inner.calls), len(texts))
    assert shared_passes(inner) == (0, 0)


def test_a_lone_caller_runs_at_once_and_big_batches_go_straight_through() -> None:
    inner = Slow()
    batching = BatchingEmbedder(inner, max_batch=4)
    batching.embed(["one"])
    batching.embed([f"t{i}" for i in range(10)])
    assert inner.calls == [1, 10]
    assert (batching.batches, batching.calls) == (2, 2)


def test_a_failed_pass_fails_every_caller_in_it_and_nothing_hangs() -> None:
    inner = Slow()
    inner.fail_on = "poison"
    batching = BatchingEmbedder(inner, max_batch=64)
    blocker = threading.Thread(target=batching.embed, args=(["first"],))
    blocker.start()  # the poison and the others queue behind this pass
    time.sleep(0.005)
    results = _concurrently(batching, [["poison"], ["ok 1"], ["ok 2"]])
    blocker.join()
    assert any(isinstance(r, RuntimeError) for r in results)
    with pytest.raises(RuntimeError):
        batching.embed(["poison"])
    np.testing.assert_array_equal(batching.embed(["fine"]),
                                  HashingEmbedder(dim=32, model="slow").embed(["fine"]))


class Overlapping(HashingEmbedder):
    """A model that records how many passes run at once; each pass waits (up to wait_s)
    for a second one to start beside it."""

    def __init__(self, wait_s: float) -> None:
        super().__init__(dim=32, model="overlap")
        self._lock = threading.Lock()
        self._running = 0
        self.peak = 0
        self._two = threading.Event()
        self._wait_s = wait_s
        self.sizes: list[int] = []

    def embed(self, texts: Sequence[str]) -> Matrix:
        with self._lock:
            self.sizes.append(len(texts))
            self._running += 1
            self.peak = max(self.peak, self._running)
            if self._running >= 2:
                self._two.set()
        try:
            self._two.wait(timeout=self._wait_s)
            return super().embed(texts)
        finally:
            with self._lock:
                self._running -= 1


def test_parallel_passes_run_side_by_side_and_never_more_than_asked() -> None:
    inner = Overlapping(wait_s=20)  # a lone pass would hold up the test for 20 s
    batching = BatchingEmbedder(inner, max_batch=4, parallel=2)
    texts = [[f"q {i}"] for i in range(12)]
    results = _concurrently(batching, texts)
    reference = HashingEmbedder(dim=32, model="overlap")
    for got, asked in zip(results, texts, strict=True):
        assert isinstance(got, np.ndarray)
        np.testing.assert_array_equal(got, reference.embed(asked))
    assert inner.peak == 2
    # a caller whose texts are in a running pass waits for it, and runs no empty pass
    assert min(inner.sizes) >= 1 and sum(inner.sizes) == len(texts)
    assert batching.batches == len(inner.sizes) <= batching.calls == len(texts)


def test_one_pass_at_a_time_by_default() -> None:
    inner = Overlapping(wait_s=0.01)
    batching = BatchingEmbedder(inner, max_batch=2)
    _concurrently(batching, [[f"q {i}"] for i in range(12)])
    assert inner.peak == 1
    assert batching.calls == 12


def test_parallel_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="parallel must be at least 1"):
        BatchingEmbedder(HashingEmbedder(dim=8, model="x"), parallel=0)


def test_callers_whose_texts_are_in_a_running_pass_wait_for_it() -> None:
    """With two passes allowed, a caller woken while its texts are in the other pass
    waits; it must not run (empty) passes of its own meanwhile."""
    inner = Slow()
    batching = BatchingEmbedder(inner, max_batch=8, parallel=2)
    texts = [[f"q {i}"] for i in range(40)]
    results = _concurrently(batching, texts)
    assert all(isinstance(r, np.ndarray) for r in results)
    assert sum(inner.calls) == len(texts)
    assert batching.batches == len(inner.calls)
    assert batching.calls == len(texts)

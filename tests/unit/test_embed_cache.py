from __future__ import annotations

import numpy as np
import pytest

from memray.embed.cache import CachedEmbedder
from memray.embed.hashing import HashingEmbedder


class Counting(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(dim=16)
        self.calls: list[list[str]] = []

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.calls.append(list(texts))
        return super().embed(texts)


def test_misses_are_batched_and_hits_served_from_cache() -> None:
    inner = Counting()
    cache = CachedEmbedder(inner, size=10)
    first = cache.embed(["a b", "c", "a b"])
    assert inner.calls == [["a b", "c"]]
    again = cache.embed(["c", "a b"])
    assert inner.calls == [["a b", "c"]]
    np.testing.assert_array_equal(again, first[[1, 0]])
    assert cache.hits == 3 and cache.misses == 2
    assert np.linalg.norm(first, axis=1) == pytest.approx(np.ones(3), abs=1e-6)


def test_lru_evicts_oldest_and_returned_arrays_are_copies() -> None:
    inner = Counting()
    cache = CachedEmbedder(inner, size=2)
    out = cache.embed(["x"])
    out[0, :] = 0  # mutating a result must not poison the cache
    cache.embed(["y", "z"])  # evicts "x"
    cache.embed(["x"])
    assert inner.calls[-1] == ["x"]
    assert np.linalg.norm(cache.embed(["x"])) > 0.99
    assert cache.embed([]).shape == (0, 16)

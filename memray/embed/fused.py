"""`FusedEmbedder`: several models as one vector, so one vector field and one cosine hold
what each model reads.

Each model's unit vector is scaled by the square root of its weight (weights summing to
1) and the parts are concatenated: the result has unit length and its cosine with another
fused vector is the weighted sum of the models' cosines. A model name such as
`all-MiniLM-L6-v2*0.5+use-multilingual-v3*0.5` names the parts and their weights (no
weight: equal shares); it is recorded with every vector, so a change of weights is a new
model and goes through the migration job like any other.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from memray.embed.base import Embedder, Matrix
from memray.errors import ConfigError


def parse_fused(name: str) -> list[tuple[str, float]]:
    """'a*0.4+b*0.6' -> [('a', 0.4), ('b', 0.6)]; weights default to equal shares and are
    normalised to sum to 1. ConfigError for an empty part or a weight that is not > 0."""
    parts: list[tuple[str, float | None]] = []
    for item in name.split("+"):
        model, _, weight = item.strip().partition("*")
        if not model.strip():
            raise ConfigError(f"fused embedder name {name!r} has an empty part")
        try:
            w = float(weight) if weight else None
        except ValueError as exc:
            raise ConfigError(f"fused embedder weight {weight!r} in {name!r} is not a "
                              "number") from exc
        if w is not None and not (w > 0 and math.isfinite(w)):
            raise ConfigError(f"fused embedder weight {weight!r} in {name!r} must be > 0")
        parts.append((model.strip(), w))
    given = [w for _, w in parts if w is not None]
    if given and len(given) != len(parts):
        raise ConfigError(f"fused embedder name {name!r}: give every part a weight or none")
    total = sum(given) if given else float(len(parts))
    return [(m, (w if w is not None else 1.0) / total) for m, w in parts]


class FusedEmbedder:
    def __init__(self, name: str, parts: Sequence[tuple[Embedder, float]]) -> None:
        if len(parts) < 2:
            raise ConfigError("a fused embedder needs at least two models")
        self._name = name
        self._parts = list(parts)

    @property
    def model(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return sum(e.dim for e, _ in self._parts)

    def open(self) -> None:
        for embedder, _ in self._parts:
            embedder.open()

    def close(self) -> None:
        for embedder, _ in self._parts:
            embedder.close()

    def embed(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        blocks = []
        for embedder, weight in self._parts:
            block = np.asarray(embedder.embed(texts), dtype=np.float32)
            norms = np.maximum(np.linalg.norm(block, axis=1, keepdims=True), 1e-12)
            blocks.append(block / norms * np.float32(math.sqrt(weight)))
        return np.concatenate(blocks, axis=1)

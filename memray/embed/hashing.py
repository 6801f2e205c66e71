"""`HashingEmbedder`: deterministic bag-of-words vectors. A test and demo stand-in only.

It has no notion of meaning (paraphrases do not match); use it where the embedding model
is not what is being tested, or where torch is not installed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from memray.embed.base import Matrix

_TOKEN = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    def __init__(self, *, dim: int = 64, model: str = "hashing") -> None:
        self._dim, self._name = dim, f"{model}-{dim}"

    @property
    def model(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    def open(self) -> None:
        return None

    def close(self) -> None:
        return None

    def _one(self, text: str) -> Matrix:
        vec = np.zeros(self._dim, dtype=np.float32)
        for token in _TOKEN.findall(text.casefold()) or [text]:
            h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "big")
            vec[h % self._dim] += 1.0 if (h >> 32) & 1 else -1.0
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm else vec

    def embed(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return np.stack([self._one(t) for t in texts])

"""Following a migration made by another process: the migrate job records the live
embedder in the shared log; every `Memory` re-reads it at most every `model_check_s`
seconds and, when it changed, switches to the new (model, collection) pair itself, so no
process embeds with one model to search a collection of another, and none needs a
restart."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

from memray.config import EmbedderConfig

LIVE_EMBEDDER = "embedder.live"  # meta key: the embedder the alias now serves


@dataclass(frozen=True)
class LiveEmbedder:
    """What a migration made live: the model's own name (as recorded with each memory)
    and dimension, and the config that builds it."""

    model: str
    dim: int
    config: EmbedderConfig

    def dumps(self) -> str:
        return json.dumps({"model": self.model, "dim": self.dim,
                           "config": self.config.model_dump(mode="json")})

    @classmethod
    def loads(cls, raw: str) -> LiveEmbedder:
        data = json.loads(raw)
        return cls(data["model"], int(data["dim"]),
                   EmbedderConfig.model_validate(data["config"]))


class Throttle:
    """`due()` is True at most once every `interval_s` seconds (never when it is 0)."""

    def __init__(self, interval_s: float) -> None:
        self._interval = interval_s
        self._next = 0.0
        self._lock = threading.Lock()

    def due(self) -> bool:
        if self._interval <= 0:
            return False
        now = time.monotonic()
        with self._lock:
            if now < self._next:
                return False
            self._next = now + self._interval
            return True

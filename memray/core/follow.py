"""Following a migration made by another process: the migrate job records the live
embedder in the shared log; every `Memory` re-reads it at most every `model_check_s`
seconds and, when it changed, switches to the new (model, collection) pair itself, so no
process embeds with one model to search a collection of another, and none needs a
restart."""

from __future__ import annotations

import threading
import time

LIVE_EMBEDDER = "embedder.live"  # meta key: the EmbedderConfig JSON the alias now serves


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

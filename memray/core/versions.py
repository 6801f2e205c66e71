"""Keeping a process current with a shared log: which users' versions moved since this
process last looked (their store reads must then be Strong), and a background drain of
the outbox (ops queued by a write whose store call failed, or by a process that died)."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable

from memray.errors import MemrayError

log = logging.getLogger(__name__)


class SeenVersions:
    """The last version this process saw per user (LRU, at most `size` users)."""

    def __init__(self, size: int = 100_000) -> None:
        self._seen: OrderedDict[str, int] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def moved(self, user_id: str, version: int) -> bool:
        """Record `version`; True when it differs from the last one seen (or none was)."""
        with self._lock:
            before = self._seen.get(user_id)
            self._seen[user_id] = version
            self._seen.move_to_end(user_id)
            if len(self._seen) > self._size:
                self._seen.popitem(last=False)
        return before != version


class OutboxDrainer:
    """Calls `drain` every `interval_s` seconds on a daemon thread until `stop()`; 0
    disables it. Failures are logged once per round and retried next round."""

    def __init__(self, drain: Callable[[], None], interval_s: float) -> None:
        self._drain, self._interval = drain, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._interval <= 0:
            return
        self._thread = threading.Thread(target=self._run, name="memray-outbox", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._drain()
            except MemrayError as exc:  # the log or store is down: try again next round
                log.warning("outbox drain failed, retrying in %.1f s: %s", self._interval, exc)

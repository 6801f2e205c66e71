"""Session memory: facts kept for one conversation only (consent 1). In process, never
persisted, gone when the process ends or `Memory.close()` is called."""

from __future__ import annotations

import threading
from collections import OrderedDict

from memray.models import MemoryRecord


class SessionMemory:
    """At most `max_sessions` sessions (least recently used evicted), `per_session` facts each."""

    def __init__(self, max_sessions: int = 10_000, per_session: int = 200) -> None:
        self._data: OrderedDict[tuple[str, str], list[MemoryRecord]] = OrderedDict()
        self._max, self._per = max_sessions, per_session
        self._lock = threading.Lock()

    def add(self, user_id: str, session: str, records: list[MemoryRecord]) -> None:
        with self._lock:
            items = self._data.setdefault((user_id, session), [])
            known = {r.content_hash for r in items}
            items.extend(r for r in records if r.content_hash not in known)
            del items[: max(0, len(items) - self._per)]
            self._data.move_to_end((user_id, session))
            while len(self._data) > self._max:
                self._data.popitem(last=False)

    def get(self, user_id: str, session: str) -> list[MemoryRecord]:
        with self._lock:
            return list(self._data.get((user_id, session), []))

    def drop_user(self, user_id: str) -> None:
        with self._lock:
            for key in [k for k in self._data if k[0] == user_id]:
                del self._data[key]

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

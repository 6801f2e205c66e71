"""Session memory: facts kept for one conversation only (consent 1), and the consent-1
turns that wait for extraction. In process, never persisted, gone when the process ends
or `Memory.close()` is called."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

from memray.extract.base import Turn
from memray.models import MemoryRecord

Key = tuple[str, str]


class SessionMemory:
    """At most `max_sessions` sessions (least recently used evicted), `per_session` facts
    and `per_session` waiting turns each."""

    def __init__(self, max_sessions: int = 10_000, per_session: int = 200) -> None:
        self._data: OrderedDict[Key, list[MemoryRecord]] = OrderedDict()
        self._turns: OrderedDict[Key, list[Turn]] = OrderedDict()
        self._max, self._per = max_sessions, per_session
        self._lock = threading.Lock()

    def add(self, user_id: str, session: str, records: list[MemoryRecord]) -> None:
        with self._lock:
            items = self._data.setdefault((user_id, session), [])
            known = {r.content_hash for r in items}
            items.extend(r for r in records if r.content_hash not in known)
            self._trim(self._data, (user_id, session))

    def _trim(self, table: OrderedDict[Key, list[MemoryRecord]] | OrderedDict[Key, list[Turn]],
              key: Key) -> None:
        del table[key][: max(0, len(table[key]) - self._per)]
        table.move_to_end(key)
        while len(table) > self._max:
            table.popitem(last=False)

    def get(self, user_id: str, session: str) -> list[MemoryRecord]:
        with self._lock:
            return list(self._data.get((user_id, session), []))

    def forget(self, user_id: str, session: str, match: Callable[[MemoryRecord], bool]) -> None:
        """Drop the session's facts that `match`."""
        with self._lock:
            items = self._data.get((user_id, session))
            if items is not None:
                items[:] = [r for r in items if not match(r)]

    def hold(self, user_id: str, session: str, turns: Sequence[Turn]) -> int:
        """Keep consent-1 turns until their round is extracted; returns how many wait."""
        with self._lock:
            held = self._turns.setdefault((user_id, session), [])
            held.extend(turns)
            self._trim(self._turns, (user_id, session))
            return len(held)

    def take(self, user_id: str, session: str) -> list[Turn]:
        """The waiting consent-1 turns, oldest first; they wait no longer."""
        with self._lock:
            return self._turns.pop((user_id, session), [])

    def drop_user(self, user_id: str) -> None:
        with self._lock:
            for table in (self._data, self._turns):
                for key in [k for k in table if k[0] == user_id]:
                    del table[key]

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._turns.clear()

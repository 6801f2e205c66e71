"""`WriteGate`: writes pass together; a backend switch (migration) waits for them to
finish and holds new ones back while it runs. Reads never wait on it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class WriteGate:
    """Shared entries are reentrant within a thread: a write that holds the gate (a
    doctor repair, an update) may enter it again through the committer without waiting
    behind a switch that is itself waiting for that write."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._writers = 0
        self._closed = False
        self._local = threading.local()

    @contextmanager
    def shared(self) -> Iterator[None]:
        depth: int = getattr(self._local, "depth", 0)
        if depth:
            self._local.depth = depth + 1
            try:
                yield
            finally:
                self._local.depth = depth
            return
        with self._cond:
            self._cond.wait_for(lambda: not self._closed)
            self._writers += 1
        self._local.depth = 1
        try:
            yield
        finally:
            self._local.depth = 0
            with self._cond:
                self._writers -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._closed)
            self._closed = True  # no new writer gets in
            self._cond.wait_for(lambda: self._writers == 0)
        try:
            yield
        finally:
            with self._cond:
                self._closed = False
                self._cond.notify_all()

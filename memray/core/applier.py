"""Applying committed changes to the vector store, in commit order, exactly once in effect.

Every write goes: commit (events + store ops, one SQLite transaction) -> drain the outbox
into the store. One lock serialises drains, so a replayed `replace` can never land after
a later `delete` of the same memory (which would bring a deleted memory back).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Protocol

from memray.errors import StoreError
from memray.models import MemoryEvent
from memray.store.base import VectorStore
from memray.store.events import EventLog, StoreOp, Tombstone

log = logging.getLogger(__name__)
_BULK_ROWS = 2000


class ChangeHook(Protocol):
    """Told about store changes, so a cache of the store can follow them."""

    def changed(self, user_id: str) -> None:
        """The user's rows changed (in ways the hook was not shown)."""

    def applied(self, user_id: str, ops: Sequence[StoreOp], before: int, after: int) -> None:
        """`ops` took the user's rows from memory version `before` to `after`."""


class Applier:
    def __init__(self, store: VectorStore, events: EventLog,
                 on_change: ChangeHook | None = None) -> None:
        self._store, self._events = store, events
        self._on_change = on_change
        self._lock = threading.Lock()

    def write(self, user_id: str, events: Sequence[MemoryEvent], ops: Sequence[StoreOp], *,
              purge_ids: Sequence[str] = (), purge_user: bool = False,
              clear_turns: Sequence[int] = (), tombstones: Sequence[Tombstone] = (),
              marks: Sequence[tuple[str, str]] = (), apply: bool = True) -> None:
        """Durably commit, then apply. Raises StoreError only if the commit itself failed;
        if the store is down the ops stay queued and are retried by the next drain.
        `apply=False` leaves the ops queued for a later `drain()` (bulk writers)."""
        with self._lock:
            before = self._events.version(user_id)
            own = self._events.commit(user_id, events, ops, purge_ids=purge_ids,
                                      purge_user=purge_user, clear_turns=clear_turns,
                                      tombstones=tombstones, marks=marks)
            if not apply:
                if self._on_change is not None:
                    self._on_change.changed(user_id)
                return
            after = self._events.version(user_id)
            if self._drain_locked(set(own)) and self._on_change is not None and after != before:
                # Applied in full: a cache at `before` may move to `after` with these ops.
                self._on_change.applied(user_id, ops, before, after)

    def notify(self, user_id: str) -> None:
        """The user's rows were changed directly (a bulk import): caches drop them."""
        if self._on_change is not None:
            self._on_change.changed(user_id)

    def drain(self) -> bool:
        """Apply every queued op; True when the outbox is empty afterwards."""
        with self._lock:
            return self._drain_locked(set())

    def _drain_locked(self, own: set[int]) -> bool:
        """Apply queued ops in order. Caches hear of ops not in `own` (replays) here;
        `write` tells them about its own ops once all are applied. Consecutive replaces
        (of any users) go to the store as one call: a bulk write costs one round trip."""
        pending = self._events.pending()
        i = 0
        while i < len(pending):
            j = i + 1
            if pending[i].op.kind == "replace":
                while (j < len(pending) and pending[j].op.kind == "replace"
                       and sum(len(p.op.rows) for p in pending[i:j + 1]) <= _BULK_ROWS):
                    j += 1
            group = pending[i:j]
            try:
                self._apply([p.op for p in group])
            except StoreError as exc:
                log.warning("store write queued for retry (outbox seq %d): %s",
                            group[0].seq, exc)
                return False
            self._events.done([p.seq for p in group])
            for item in group:
                if self._on_change is not None and item.seq not in own:
                    self._on_change.changed(item.op.user_id)
            i = j
        return True

    def _apply(self, ops: Sequence[StoreOp]) -> None:
        op = ops[0]
        if op.kind == "replace":
            self._store.replace([row for o in ops for row in o.rows])
        elif op.kind == "delete":
            self._store.delete(op.user_id, op.ids)
        else:
            self._store.delete_user(op.user_id)

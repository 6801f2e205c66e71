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
from memray.store.events import EventLog, StoreOp

log = logging.getLogger(__name__)


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
              clear_turns: Sequence[int] = ()) -> None:
        """Durably commit, then apply. Raises StoreError only if the commit itself failed;
        if the store is down the ops stay queued and are retried by the next drain."""
        with self._lock:
            before = self._events.version(user_id)
            own = self._events.commit(user_id, events, ops, purge_ids=purge_ids,
                                      purge_user=purge_user, clear_turns=clear_turns)
            after = self._events.version(user_id)
            if self._drain_locked(set(own)) and self._on_change is not None and after != before:
                # Applied in full: a cache at `before` may move to `after` with these ops.
                self._on_change.applied(user_id, ops, before, after)

    def drain(self) -> bool:
        """Apply every queued op; True when the outbox is empty afterwards."""
        with self._lock:
            return self._drain_locked(set())

    def _drain_locked(self, own: set[int]) -> bool:
        """Apply queued ops in order. Caches hear of ops not in `own` (replays) here;
        `write` tells them about its own ops once all are applied."""
        for item in self._events.pending():
            try:
                self._apply(item.op)
            except StoreError as exc:
                log.warning("store write queued for retry (outbox seq %d): %s", item.seq, exc)
                return False
            self._events.done([item.seq])
            if self._on_change is not None and item.seq not in own:
                self._on_change.changed(item.op.user_id)
        return True

    def _apply(self, op: StoreOp) -> None:
        if op.kind == "replace":
            self._store.replace(op.rows)
        elif op.kind == "delete":
            self._store.delete(op.user_id, op.ids)
        else:
            self._store.delete_user(op.user_id)

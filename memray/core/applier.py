"""Applying committed changes to the vector store, in commit order, exactly once in effect.

Every write goes: commit (events + store ops, one SQLite transaction) -> drain the outbox
into the store. One lock serialises drains, so a replayed `replace` can never land after
a later `delete` of the same memory (which would bring a deleted memory back).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from memray.errors import StoreError
from memray.models import MemoryEvent
from memray.store.base import VectorStore
from memray.store.events import EventLog, StoreOp

log = logging.getLogger(__name__)


class Applier:
    def __init__(self, store: VectorStore, events: EventLog,
                 on_change: Callable[[str], None] | None = None) -> None:
        self._store, self._events = store, events
        self._on_change = on_change
        self._lock = threading.Lock()

    def write(self, user_id: str, events: Sequence[MemoryEvent], ops: Sequence[StoreOp], *,
              purge_ids: Sequence[str] = (), purge_user: bool = False,
              clear_turns: Sequence[int] = ()) -> None:
        """Durably commit, then apply. Raises StoreError only if the commit itself failed;
        if the store is down the ops stay queued and are retried by the next drain."""
        with self._lock:
            self._events.commit(user_id, events, ops, purge_ids=purge_ids,
                                purge_user=purge_user, clear_turns=clear_turns)
            self._drain_locked()

    def drain(self) -> bool:
        """Apply every queued op; True when the outbox is empty afterwards."""
        with self._lock:
            return self._drain_locked()

    def _drain_locked(self) -> bool:
        for item in self._events.pending():
            try:
                self._apply(item.op)
            except StoreError as exc:
                log.warning("store write queued for retry (outbox seq %d): %s", item.seq, exc)
                return False
            self._events.done([item.seq])
            if self._on_change is not None:
                self._on_change(item.op.user_id)
        return True

    def _apply(self, op: StoreOp) -> None:
        if op.kind == "replace":
            self._store.replace(op.rows)
        elif op.kind == "delete":
            self._store.delete(op.user_id, op.ids)
        else:
            self._store.delete_user(op.user_id)

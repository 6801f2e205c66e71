"""Applying committed changes to the vector store, in commit order, exactly once in effect.

Every write goes: commit (events + store ops, one transaction of the event log) -> apply
the user's queued ops to the store. Both happen under the user's lock, and so does every
replay, so a replayed `replace` can never land after a later `delete` of the same memory
(which would bring a deleted memory back). There is no process-wide lock: users are
independent, and with a shared log any process may replay any user's ops.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
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
    """Commits a user's changes and applies them to the store under that user's lock
    (`EventLog.user_lock`: across processes when the log is shared), so one user's ops
    reach the store in commit order while other users' writes run in parallel."""

    def __init__(self, store: VectorStore, events: EventLog,
                 on_change: ChangeHook | None = None,
                 check: Callable[[], None] | None = None) -> None:
        """`check` runs under the user's lock before each commit and may refuse it (a
        migration made another model live: ModelChangedError)."""
        self._store, self._events = store, events
        self._on_change, self._check = on_change, check

    def write(self, user_id: str, events: Sequence[MemoryEvent], ops: Sequence[StoreOp], *,
              purge_ids: Sequence[str] = (), purge_user: bool = False,
              clear_turns: Sequence[int] = (), tombstones: Sequence[Tombstone] = (),
              marks: Sequence[tuple[str, str]] = (), apply: bool = True) -> int:
        """Durably commit, then apply; returns the user's new memory version. Raises
        StoreError only if the commit itself failed; if the store is down the ops stay
        queued and are retried by the next drain (of any process, for a shared log).
        `apply=False` leaves the ops queued for a later `drain()` (bulk writers)."""
        with self._events.user_lock(user_id):
            if self._check is not None:
                self._check()
            before = self._events.version(user_id)
            own = self._events.commit(user_id, events, ops, purge_ids=purge_ids,
                                      purge_user=purge_user, clear_turns=clear_turns,
                                      tombstones=tombstones, marks=marks)
            after = self._events.version(user_id)
            if not apply:
                self.notify(user_id)
                return after
            applied = self._drain_user(user_id, set(own))
            if applied and after != before and self._on_change is not None:
                # Applied in full: a cache at `before` may move to `after` with these ops
                # (the user's lock kept every other writer out in between).
                self._on_change.applied(user_id, ops, before, after)
            return after

    def notify(self, user_id: str) -> None:
        """The user's rows were changed directly (a bulk import): caches drop them."""
        if self._on_change is not None:
            self._on_change.changed(user_id)

    def drain(self) -> bool:
        """Apply every queued op whose user no other writer holds; True when nothing was
        left behind (no store failure, no user skipped)."""
        complete = True
        for user_id in self._events.pending_users():
            with self._events.try_user_lock(user_id) as got:
                complete = (self._drain_user(user_id, set()) if got else False) and complete
        return complete

    def drain_user(self, user_id: str) -> bool:
        """Apply the user's queued ops now (waits for the user's lock)."""
        with self._events.user_lock(user_id):
            return self._drain_user(user_id, set())

    def _drain_user(self, user_id: str, own: set[int]) -> bool:
        """Apply the user's queued ops in order; the caller holds the user's lock. Caches
        hear of ops not in `own` (replays) here; `write` tells them about its own.
        Consecutive replaces go to the store as one call."""
        pending = self._events.pending(user_id)
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
            if any(p.seq not in own for p in group):
                self.notify(user_id)
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

"""The committer: the only code that writes the event log's changes or the vector store.

Every write goes: a change set (core/changes.py) -> under the user's lock, one commit of
the event log (history, tombstones, marks, turns processed, the store ops queued in the
outbox, the version bumped) -> the user's queued ops applied to the store. Every replay
of the outbox happens under the user's lock too, so a replayed `replace` can never land
after a later `delete` of the same memory (which would bring a deleted memory back).
There is no process-wide lock: users are independent, and with a shared log any process
may replay any user's ops.

A bulk writer (the backfill, the nightly job) commits each user's change set under that
user's lock with `apply=False`, then `drain_users` applies many users' rows in a few
large store calls, each user's ops still under its lock and in commit order.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Any, Protocol

from memray.core.changes import ChangeSet
from memray.core.gate import WriteGate
from memray.core.versions import SeenVersions
from memray.errors import StoreError
from memray.models import DeletionReceipt
from memray.store.base import VectorStore
from memray.store.events import EventLog, Pending, StoreOp

log = logging.getLogger(__name__)
_BULK_ROWS = 2000
# Users whose locks one bulk drain holds at once, at most (and at most the log's
# lock_capacity): a store call costs ~0.3 s on milvus-lite whatever its size up to a few
# thousand rows, so groups are cut by rows, not by users.
_BULK_USERS = 500


class ChangeHook(Protocol):
    """Told about store changes, so a cache of the store can follow them."""

    def changed(self, user_id: str) -> None:
        """The user's rows changed (in ways the hook was not shown)."""

    def applied(self, user_id: str, ops: Sequence[StoreOp], before: int, after: int) -> None:
        """`ops` took the user's rows from memory version `before` to `after`."""


class DeletionHook(Protocol):
    """Runs around a commit that deletes (core/deletions.py): the cascade, then the
    receipt from what each store held before and holds after."""

    def expand(self, changes: ChangeSet) -> None: ...

    def before(self, changes: ChangeSet) -> Any: ...

    def settle(self, changes: ChangeSet, seen: Any) -> DeletionReceipt: ...


class Committer:
    """Commits change sets and applies them to the store under each user's lock
    (`EventLog.user_lock`: across processes when the log is shared), inside the write
    gate (a migration's switch waits for writes in flight and holds new ones back)."""

    def __init__(self, store: VectorStore, events: EventLog, *, gate: WriteGate | None = None,
                 on_change: ChangeHook | None = None, check: Callable[[], None] | None = None,
                 seen: SeenVersions | None = None) -> None:
        """`check` runs under the user's lock before each commit and may refuse it (a
        migration made another model live: ModelChangedError). `seen`: this process's
        view of users' versions when other processes write to the same log."""
        self._store, self._events = store, events
        self._gate = gate or WriteGate()
        self._on_change, self._check, self._seen = on_change, check, seen
        # Set once the backend is built (it needs an engine over this committer).
        self.deletions: DeletionHook | None = None
        self._local = threading.local()

    @property
    def store(self) -> VectorStore:
        """The store this committer writes (for the reads a writer makes under the lock)."""
        return self._store

    # -- locking ---------------------------------------------------------------------------
    def locked(self, user_id: str) -> AbstractContextManager[None]:
        """Held around one user's read-decide-commit: two writes of one user never
        interleave, across processes when the log is shared; other users run in
        parallel. Reads made under it see every write of the user so far: when another
        process wrote the user since this one last looked, the store is read Strong.
        Reentrant within a thread."""
        return self._locked(user_id)

    def _held(self) -> dict[str, int | None]:
        """The users whose lock this thread holds -> their version (None until first
        needed; read once: only this thread's commits move it while the lock is held)."""
        held: dict[str, int | None] | None = getattr(self._local, "held", None)
        if held is None:
            held = self._local.held = {}
        return held

    def version(self, user_id: str) -> int:
        """The user's memory version: known without a log read while this thread holds
        the user's lock, else read."""
        held = self._held()
        if user_id not in held:
            return self._events.version(user_id)
        known = held[user_id]
        if known is None:
            known = held[user_id] = self._events.version(user_id)
        return known

    @contextmanager
    def _locked(self, user_id: str) -> Iterator[None]:
        held = self._held()
        if user_id in held:  # reentrant: the outer hold checked whether another wrote
            yield
            return
        with self._gate.shared(), self._events.user_lock(user_id):
            held[user_id] = None
            try:
                seen = self._seen
                if seen is not None and seen.moved(user_id, self.version(user_id)):
                    self._store.touch(user_id)
                yield
            finally:
                del held[user_id]

    # -- committing -----------------------------------------------------------------------
    def commit(self, changes: ChangeSet, *, apply: bool = True) -> int:
        """Durably commit `changes`, then apply them; returns the user's memory version
        after it. Raises StoreError only if the commit itself failed; if the store is down
        the ops stay queued and are retried by the next drain (of any process, for a
        shared log). `apply=False` leaves the ops queued for `drain_users` (bulk)."""
        uid = changes.user_id
        with self._locked(uid):
            if self._check is not None:
                self._check()
            hook = self.deletions if apply and (changes.deletes or changes.delete_user) \
                else None
            if hook is not None:
                hook.expand(changes)
                seen = hook.before(changes)
            before = self.version(uid)
            ops = changes.store_ops()
            events = changes.logged_events()
            own = self._events.commit(uid, events, ops, purge_ids=list(changes.deletes),
                                      purge_user=changes.delete_user,
                                      clear_turns=changes.clear_turns,
                                      tombstones=changes.tombstones, marks=changes.marks)
            # Every log bumps the version exactly for a real change, and the user's lock
            # keeps every other writer out: no second read is needed.
            real = bool(events or ops or changes.deletes or changes.delete_user)
            after = self._held()[uid] = before + 1 if real else before
            if not apply:
                self.notify(uid)
                return after
            applied = self._drain_user(uid, set(own), frozenset(changes.fresh))
            if applied and after != before and self._on_change is not None:
                # Applied in full: a cache at `before` may move to `after` with these ops.
                self._on_change.applied(uid, ops, before, after)
            if hook is not None:
                changes.receipt = hook.settle(changes, seen)
            return after

    def notify(self, user_id: str) -> None:
        """The user's rows changed in ways a cache was not shown: caches drop them."""
        if self._on_change is not None:
            self._on_change.changed(user_id)

    # -- applying the outbox ---------------------------------------------------------------
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

    def drain_users(self, user_ids: Sequence[str]) -> bool:
        """Apply these users' queued ops, many users' leading rows in one store call:
        a bulk writer's commits. Each user's ops stay under its lock and in order; a
        user another writer holds is left to that writer. True when nothing was left."""
        complete = True
        todo = list(dict.fromkeys(user_ids))
        most = max(1, min(_BULK_USERS, self._events.lock_capacity))
        while todo:
            complete = self._drain_group(todo, most) and complete
        return complete

    def _drain_group(self, todo: list[str], most: int) -> bool:
        """Take users off `todo` until their leading rows fill a bulk store call (or
        `most` locks are held), apply them, then each user's remaining ops in order."""
        with ExitStack() as stack:
            held: list[str] = []
            queued: dict[str, list[Pending]] = {}
            leading: dict[str, list[Pending]] = {}
            skipped = 0
            rows_so_far = 0
            while todo and len(held) < most and rows_so_far < _BULK_ROWS:
                u = todo.pop(0)
                if not stack.enter_context(self._events.try_user_lock(u)):
                    skipped += 1  # another writer holds it: it applies the user's ops
                    continue
                held.append(u)
                queued[u] = self._events.pending(u)
                leading[u] = self._leading_replaces(queued[u])
                rows_so_far += sum(len(p.op.rows) for p in leading[u])
            rows = [row for u in held for p in leading[u] for row in p.op.rows]
            try:
                for j in range(0, len(rows), _BULK_ROWS):
                    self._store.replace(rows[j:j + _BULK_ROWS])
            except StoreError as exc:
                log.warning("bulk store write queued for retry (%d users): %s", len(held), exc)
                return False
            self._events.done([p.seq for u in held for p in leading[u]])
            complete = skipped == 0
            for u in held:
                self.notify(u)
                if len(leading[u]) < len(queued[u]):  # a delete after the rows: in order
                    complete = self._drain_user(u, set()) and complete
            return complete

    @staticmethod
    def _leading_replaces(pending: Sequence[Pending]) -> list[Pending]:
        n = 0
        while n < len(pending) and pending[n].op.kind == "replace":
            n += 1
        return list(pending[:n])

    def _drain_user(self, user_id: str, own: set[int],
                    fresh: frozenset[str] = frozenset()) -> bool:
        """Apply the user's queued ops in order; the caller holds the user's lock. Caches
        hear of ops not in `own` (replays) here; `commit` tells them about its own.
        Consecutive replaces go to the store as one call; one of `own` whose rows are all
        `fresh` is inserted without looking for the ids first. A replay (after a crash
        between the insert and `done`) replaces, so it never leaves a second copy."""
        pending = self._events.pending(user_id)
        i = 0
        while i < len(pending):
            j = i + 1
            if pending[i].op.kind == "replace":
                while (j < len(pending) and pending[j].op.kind == "replace"
                       and sum(len(p.op.rows) for p in pending[i:j + 1]) <= _BULK_ROWS):
                    j += 1
            group = pending[i:j]
            new = bool(fresh) and all(p.seq in own and {r.record.id for r in p.op.rows}
                                      <= fresh for p in group)
            try:
                self._apply([p.op for p in group], new=new)
            except StoreError as exc:
                log.warning("store write queued for retry (outbox seq %d): %s",
                            group[0].seq, exc)
                return False
            self._events.done([p.seq for p in group])
            if any(p.seq not in own for p in group):
                self.notify(user_id)
            i = j
        return True

    def _apply(self, ops: Sequence[StoreOp], *, new: bool = False) -> None:
        op = ops[0]
        if op.kind == "replace":
            rows = [row for o in ops for row in o.rows]
            (self._store.insert if new else self._store.replace)(rows)
        elif op.kind == "delete":
            self._store.delete(op.user_id, op.ids)
        else:
            self._store.delete_user(op.user_id)

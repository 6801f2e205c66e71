"""`Edits`: the writes that are not extraction, each one change set for the committer.

A verbatim add (each user message one memory; an exact repeat of an active memory is a
NOOP), an update of one memory's content, a delete, a delete of everything of a user, and
a change set built by an integration (the LangGraph store). Each runs under the user's
write lock, so what it reads is not changed before it commits. Arguments arrive checked
(`Memory` validates them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from memray.core.backend import Backend
from memray.core.changes import ChangeSet
from memray.core.engine import Engine
from memray.core.lookup import committed, committed_query
from memray.core.messages import Message
from memray.core.policies import redact
from memray.core.records import new_record
from memray.core.resolve import Scope
from memray.errors import MemoryNotFoundError
from memray.models import (
    AddResult,
    DeletionReceipt,
    MemoryEvent,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
    content_hash,
    utcnow,
)
from memray.store.base import Where
from memray.store.rows import to_ms

_ACTIVE = (MemoryStatus.ACTIVE.value,)


class Edits:
    def __init__(self, backend: Backend) -> None:
        self._backend = backend

    def add_verbatim(self, scope: Scope, turns: Sequence[Message]) -> AddResult:
        """Each message (non-empty, the user's) as one memory of type "message",
        embedded in one batch; consent 1 keeps them in this session only."""
        with self._backend.committer.locked(scope.user_id):
            decided = self._decide(scope, turns)
            fresh = [new for _, new in decided if new is not None]
            if fresh and scope.consent == 1:
                return self._session_only(scope, fresh)
            embedder = self._backend.live.embedder
            vectors = dict(zip((r.id for r in fresh),
                               embedder.embed([r.index_text for r in fresh]) if fresh else [],
                               strict=True))
            changes, now = ChangeSet(scope.user_id), utcnow()
            for old, new in decided:
                if old is not None:
                    changes.noop(old, now, "already stored")
                elif new is not None:
                    changes.put(new, vectors[new.id], None, now, fresh=True)
            version = self._backend.committer.commit(changes) if fresh else \
                self._backend.committer.version(scope.user_id)
            return AddResult(events=changes.events, version=version)

    def _decide(self, scope: Scope, turns: Sequence[Message],
                ) -> list[tuple[MemoryRecord | None, MemoryRecord | None]]:
        """In the order given, each distinct message: (the stored exact repeat, None) or
        (None, the new memory)."""
        uid, now = scope.user_id, utcnow()
        chars = self._backend.config.write.reply_context_chars
        model = self._backend.live.embedder.model
        hashes: dict[str, tuple[int, str, Message]] = {}
        for m in turns:
            text = redact(m.content.strip())
            hashes.setdefault(content_hash(text), (m.index, text, m))
        where = Where(content_hashes=tuple(hashes), statuses=_ACTIVE, alive_at_ms=to_ms(now))
        known = {r.content_hash: r for r in self._active(uid, where)}
        decided: list[tuple[MemoryRecord | None, MemoryRecord | None]] = []
        for h, (index, text, msg) in hashes.items():
            if h in known:
                decided.append((known[h], None))
                continue
            reply = redact(" ".join((msg.reply_to or "").split()))[:chars] if chars else ""
            decided.append((None, new_record(
                user_id=uid, content=text, embedding_model=model, at=now,
                type=MemoryType.MESSAGE, agent_id=scope.agent_id, session_id=scope.session_id,
                source_turn_ids=(str(index),), metadata=dict(scope.metadata),
                occurred_at=msg.timestamp, reply_to=reply)))
        return decided

    def _active(self, uid: str, where: Where) -> list[MemoryRecord]:
        """Active rows matching `where`: from the hot set when it holds the user at the
        current version (the caller holds the user's lock, so it stays current), else
        from the store, with the writes it has not applied yet laid over it."""
        _, store, hot = self._backend.live
        if hot is not None and hot.holding(uid):
            held = hot.query(uid, self._backend.committer.version(uid), where)
            if held is not None:
                return held
        return committed_query(store, self._backend.events, uid, where)

    def _session_only(self, scope: Scope, fresh: list[MemoryRecord]) -> AddResult:
        """Consent 1: held in process for this session, never stored."""
        fresh = [r.model_copy(update={"consent": 1}) for r in fresh]
        self._backend.sessions.add(scope.user_id, scope.session_id or "", fresh)
        return AddResult(events=[MemoryEvent(op="ADD", memory_id=r.id, user_id=scope.user_id,
                                             memory=r, at=r.created_at,
                                             reason="session only (consent 1)")
                                 for r in fresh])

    def update(self, uid: str, mid: str, text: str) -> MemoryEvent:
        """Replace the memory's content, re-embedded; MemoryNotFoundError if none."""
        committer = self._backend.committer
        with committer.locked(uid):
            old, now = self._require(uid, mid), utcnow()
            embedder = self._backend.live.embedder
            new = old.model_copy(update={"content": text, "content_hash": content_hash(text),
                                         "updated_at": now, "last_confirmed_at": now,
                                         "embedding_model": embedder.model})
            changes = ChangeSet(uid)
            changes.put(new, embedder.embed([new.index_text])[0], old, now)
            version = committer.commit(changes)
        return changes.events[0].model_copy(update={"version": version})

    def delete(self, uid: str, mid: str) -> MemoryEvent:
        """Delete the memory and purge its history; MemoryNotFoundError if none."""
        committer = self._backend.committer
        with committer.locked(uid):
            changes = ChangeSet(uid)
            changes.delete(self._require(uid, mid), utcnow())
            version = committer.commit(changes)
        return changes.events[0].model_copy(update={"version": version,
                                                    "receipt": changes.receipt})

    def delete_all(self, uid: str) -> DeletionReceipt:
        """Delete every memory, logged turn, queued add and history event of the user;
        the receipt names the memories there were."""
        committer = self._backend.committer
        with committer.locked(uid):
            changes = ChangeSet(uid)
            changes.forget_user(utcnow())
            committer.commit(changes)
        self._backend.sessions.drop_user(uid)
        assert changes.receipt is not None  # a committed delete_user always has one
        return changes.receipt

    def write_changes(self, uid: str, build: Callable[[Engine], ChangeSet | None]) -> int | None:
        """Commit what `build` returns, built under the user's lock with the live engine."""
        committer = self._backend.committer
        with committer.locked(uid):
            changes = build(self._backend.engine())
            if changes is None or changes.empty:
                return None
            if changes.user_id != uid:
                raise ValueError(f"a change set of {changes.user_id!r} built for {uid!r}")
            return committer.commit(changes)

    def _require(self, uid: str, mid: str) -> MemoryRecord:
        found = committed(self._backend.live.store, self._backend.events, uid, mid)
        if found is None:
            raise MemoryNotFoundError(f"no memory {mid} for this user")
        return found

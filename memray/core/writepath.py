"""The write path behind `add(..., infer=True)`:

turns logged durably (PII redacted) -> the trigger decides whether to extract now (a
completed round, every N turns, or at once on a correction / forget / remember command)
-> the extractor proposes facts and commands -> policies drop what must not be kept ->
the resolver plans ADD / UPDATE / DELETE / NOOP -> one commit changes the history, the
outbox and the turn log together, then the store.

If extraction fails (an LLM timeout, invalid JSON), nothing is written and the turns stay
logged, so the next call retries them.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from functools import partial

from memray.core import policies
from memray.core.committer import Committer
from memray.core.ids import new_id
from memray.core.messages import Message
from memray.core.resolve import LIVE_STATUSES, Resolver, Scope, about, forgotten
from memray.core.session import SessionMemory
from memray.extract.base import Extractor, Forget, Turn
from memray.models import AddResult, MemoryEvent, MemoryRecord, utcnow
from memray.store.base import VectorStore, Where
from memray.store.events import EventLog


def _matches(forget: Forget, record: MemoryRecord) -> bool:
    return forgotten(record.slot, about(record), forget)


class WritePath:
    def __init__(self, *, store: VectorStore, events: EventLog, committer: Committer,
                 extractor: Extractor, resolver: Resolver, sessions: SessionMemory,
                 every_n_turns: int, max_existing: int = 10) -> None:
        self._store, self._events, self._committer = store, events, committer
        self._extractor, self._resolver, self._sessions = extractor, resolver, sessions
        self._every_n, self._max_existing = every_n_turns, max_existing

    def add(self, scope: Scope, messages: Sequence[Message], *, round_complete: bool,
            force: bool = False) -> AddResult:
        if scope.consent == 0:
            return AddResult()
        if scope.consent == 1:
            return self._add_session_only(scope, messages, round_complete=round_complete,
                                          force=force)
        with self.user_lock(scope.user_id):
            session = scope.session_id or ""
            turns = [(new_id(), m.role, policies.redact(m.content))
                     for m in messages if m.content.strip()]
            if turns:
                self._events.log_turns(scope.user_id, session, turns)
            pending = self._events.pending_turns(scope.user_id, session)
            urgent = any(role == "user" and self._extractor.is_urgent(text)
                         for _, role, text in turns)
            if not (force or urgent or round_complete or len(pending) >= self._every_n):
                return AddResult(pending_turns=len(pending),
                                 version=self._committer.version(scope.user_id))
            return self._extract(scope, pending)

    def _add_session_only(self, scope: Scope, messages: Sequence[Message], *,
                          round_complete: bool, force: bool) -> AddResult:
        """Consent 1: the turns wait in process, never in the turn log, and what they say
        becomes session memory only. A later consent-2 round never sees them."""
        session = scope.session_id or ""
        turns = [Turn(new_id(), m.role, policies.redact(m.content))
                 for m in messages if m.content.strip()]
        waiting = self._sessions.hold(scope.user_id, session, turns)
        urgent = any(t.role == "user" and self._extractor.is_urgent(t.content) for t in turns)
        if not (force or urgent or round_complete or waiting >= self._every_n):
            return AddResult(pending_turns=waiting)
        held = self._sessions.take(scope.user_id, session)
        if not held:
            return AddResult()
        extraction = self._extractor.extract(held, [])
        for forget in extraction.forgets:  # a forget said here reaches this session's facts
            self._sessions.forget(scope.user_id, session, partial(_matches, forget))
        records = self._resolver.session_records(scope, extraction.facts, utcnow())
        self._sessions.add(scope.user_id, session, records)
        return AddResult(events=[MemoryEvent(op="ADD", memory_id=r.id, user_id=scope.user_id,
                                             memory=r, at=r.created_at,
                                             reason="session only (consent 1)")
                                 for r in records])

    def user_lock(self, user_id: str) -> AbstractContextManager[None]:
        """Two writes of one user never interleave (they would extract the same turns
        twice): the committer's lock of the user (core/committer.py)."""
        return self._committer.locked(user_id)

    def _extract(self, scope: Scope, pending: list[tuple[int, str, str, str]]) -> AddResult:
        if not pending:
            return AddResult(version=self._committer.version(scope.user_id))
        turns = [Turn(tid, role, text) for _, tid, role, text in pending]
        extraction = self._extractor.extract(turns, self._existing(scope.user_id, turns))
        now = utcnow()
        changes = self._resolver.plan(scope, extraction, now)
        changes.clear_turns = [seq for seq, *_ in pending]
        changes.kind = "forget"
        version = self._committer.commit(changes)
        return AddResult(events=changes.events, version=version, receipt=changes.receipt)

    def _existing(self, user_id: str, turns: list[Turn]) -> list[MemoryRecord]:
        """The user's memories nearest to what they said, for extractors that read them."""
        user_text = " ".join(t.content for t in turns if t.role == "user")[:2000]
        if not (self._extractor.wants_existing and user_text.strip()):
            return []
        hits = self._store.search(user_id, self._resolver.embed_one(user_text),
                                  self._max_existing, Where(statuses=LIVE_STATUSES))
        return [record for record, _ in hits]

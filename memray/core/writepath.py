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

import threading
import zlib
from collections.abc import Sequence
from datetime import datetime

from memray.core import policies
from memray.core.applier import Applier
from memray.core.ids import new_id
from memray.core.messages import Message
from memray.core.resolve import LIVE_STATUSES, Plan, Resolver, Scope
from memray.core.session import SessionMemory
from memray.extract.base import Extraction, Extractor, Turn
from memray.models import AddResult, MemoryEvent, MemoryRecord, utcnow
from memray.store.base import VectorStore, Where
from memray.store.events import EventLog


class WritePath:
    def __init__(self, *, store: VectorStore, events: EventLog, applier: Applier,
                 extractor: Extractor, resolver: Resolver, sessions: SessionMemory,
                 every_n_turns: int, max_existing: int = 10) -> None:
        self._store, self._events, self._applier = store, events, applier
        self._extractor, self._resolver, self._sessions = extractor, resolver, sessions
        self._every_n, self._max_existing = every_n_turns, max_existing
        self._locks = [threading.Lock() for _ in range(64)]

    def add(self, scope: Scope, messages: Sequence[Message], *, round_complete: bool,
            force: bool = False) -> AddResult:
        if scope.consent == 0:
            return AddResult()
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
                return AddResult(pending_turns=len(pending))
            return self._extract(scope, pending)

    def user_lock(self, user_id: str) -> threading.Lock:
        """Two writes of one user never interleave (they would extract the same turns
        twice); writes of different users mostly run in parallel (striped locks)."""
        return self._locks[zlib.crc32(user_id.encode("utf-8")) % len(self._locks)]

    def _extract(self, scope: Scope, pending: list[tuple[int, str, str, str]]) -> AddResult:
        if not pending:
            return AddResult()
        turns = [Turn(tid, role, text) for _, tid, role, text in pending]
        extraction = self._extractor.extract(turns, self._existing(scope.user_id, turns))
        now = utcnow()
        seqs = [seq for seq, *_ in pending]
        if scope.consent == 1:
            return self._session_only(scope, extraction, seqs, now)
        plan = self._resolver.plan(scope, extraction, now)
        self._commit(scope.user_id, plan, seqs)
        return AddResult(events=plan.events)

    def _existing(self, user_id: str, turns: list[Turn]) -> list[MemoryRecord]:
        """The user's memories nearest to what they said, for extractors that read them."""
        user_text = " ".join(t.content for t in turns if t.role == "user")[:2000]
        if not (self._extractor.wants_existing and user_text.strip()):
            return []
        hits = self._store.search(user_id, self._resolver.embed_one(user_text),
                                  self._max_existing, Where(statuses=LIVE_STATUSES))
        return [record for record, _ in hits]

    def _session_only(self, scope: Scope, extraction: Extraction, seqs: list[int],
                      now: datetime) -> AddResult:
        records = self._resolver.session_records(scope, extraction.facts, now)
        self._sessions.add(scope.user_id, scope.session_id or "", records)
        self._applier.write(scope.user_id, [], [], clear_turns=seqs)
        return AddResult(events=[MemoryEvent(op="ADD", memory_id=r.id, user_id=scope.user_id,
                                             memory=r, at=r.created_at,
                                             reason="session only (consent 1)")
                                 for r in records])

    def _commit(self, uid: str, plan: Plan, seqs: list[int]) -> None:
        self._applier.write(uid, plan.logged_events(), plan.store_ops(uid),
                            purge_ids=list(plan.deleted), clear_turns=seqs,
                            tombstones=plan.tombstones)

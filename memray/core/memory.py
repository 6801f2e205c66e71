"""`Memory`: the public, in-process entry point (embedded default or a Milvus server).

A facade: each method checks its arguments and forwards to the part that does the work,
the backend (core/backend.py: what is open, models, the write gate), the write path
(core/writepath.py: extraction), the edits (core/edits.py: verbatim adds, updates,
deletes) and recall (core/recall.py: the read path). `AsyncMemory` (core/aio.py) offers
the same methods as coroutines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from memray import tracing
from memray.config import MemoryConfig
from memray.core import validate
from memray.core.backend import Backend
from memray.core.changes import ChangeSet
from memray.core.deletions import Deletions
from memray.core.doctor import Doctor, DoctorReport
from memray.core.edits import Edits
from memray.core.engine import Engine
from memray.core.lookup import committed
from memray.core.messages import Message, normalize
from memray.core.profile import Profile, Profiles, llm_summarizer
from memray.core.prompt import prompt_section
from memray.core.recall import ONCE_TRUE, Recall
from memray.core.resolve import Scope
from memray.embed.base import Embedder
from memray.embed.batching import shared_passes
from memray.models import (
    AddResult,
    DeletionCheck,
    DeletionReceipt,
    MemoryEvent,
    MemoryRecord,
    Page,
    SearchHit,
    utcnow,
)
from memray.settings import Settings, load_settings
from memray.store.base import VectorStore, Where
from memray.store.events import EventLog, TurnLog
from memray.store.rows import to_ms


class Memory:
    """Long-term memory for one application, many users.

    Nothing is opened in the constructor: the first call (or `open()`) loads the embedding
    model, opens the store and replays any write that a crash left unapplied.
    Thread-safe. Every method takes `user_id` and never touches another user's data.
    """

    def __init__(self, config: MemoryConfig | None = None, *, embedder: Embedder | None = None,
                 store: VectorStore | None = None, events: EventLog | None = None,
                 clock: Callable[[], datetime] | None = None) -> None:
        """`clock`: when a search is asked (what "last week" in a question counts from,
        what has expired, recency); default the system's. Writes keep the system's."""
        config = config or MemoryConfig()
        self._settings = load_settings()
        self.enabled = self._settings.enabled if config.enabled is None else config.enabled
        self._backend = Backend(config, self._settings, embedder=embedder, store=store,
                                events=events)
        self._edits = Edits(self._backend)
        self._recall = Recall(self._backend, clock or utcnow)

    @classmethod
    def from_config(cls, source: MemoryConfig | dict[str, Any] | str | Path) -> Memory:
        """From a config, a dict or a YAML file path."""
        return cls(MemoryConfig.load(source))

    @property
    def settings(self) -> Settings:
        """The MEMRAY_* environment settings read when this `Memory` was made."""
        return self._settings

    @property
    def config(self) -> MemoryConfig:
        """The config in force (a migration's switch replaces its embedder section)."""
        return self._backend.config

    @config.setter
    def config(self, config: MemoryConfig) -> None:
        """A new config takes effect at the next call for what is read per call (recall
        settings, limits); what is open (store, log, embedder) stays until reopened."""
        self._backend.config = config

    # -- lifecycle ---------------------------------------------------------------------
    def open(self) -> Memory:
        self._backend.open()
        return self

    def close(self) -> None:
        self._backend.close()

    def __enter__(self) -> Memory:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def engine(self) -> Engine:
        """The open store, event log and committer, for batch jobs (memray.batch)."""
        return self._backend.engine()

    def turn_log(self) -> TurnLog:
        """The open log's turns and async-add queue (the API queues async adds there)."""
        return self._backend.events

    def switch_backend(self, embedder: Embedder, store: VectorStore,
                       final: Callable[[], None], *, config: MemoryConfig | None = None) -> None:
        """Make (embedder, store) the live pair: the last step of a migration.

        Writes wait while this runs: pending store ops are applied, then `final` runs
        (the last catch-up, the checks and the alias switch; an exception aborts and
        nothing is switched). Searches keep running on the old pair until the swap.
        """
        self._backend.switch(embedder, store, final, config=config)

    # -- write -------------------------------------------------------------------------
    @tracing.memory_operation("upsert_memory")
    def add(self, messages: str | Sequence[dict[str, Any]], *, user_id: str,
            session_id: str | None = None, agent_id: str | None = None,
            metadata: dict[str, Any] | None = None, infer: bool = True,
            consent: int | None = None, timestamp: Any = None) -> AddResult:
        """Remember what the user said.

        `infer=True` logs the turns and, once the round is complete (the messages end with
        an assistant turn, or `messages` is a bare string), every `write.extract_every_n_turns`
        turns, or at once on a correction / forget / remember command, extracts facts and
        resolves them against the user's memories (ADD / UPDATE / DELETE / NOOP events).
        Until then `.pending_turns` says how many turns wait; `flush()` forces extraction.
        `infer=False` stores each non-empty user message as one memory (type "message"),
        embedding them in one batch; an exact repeat of an active memory is a NOOP.
        PII is redacted from what is stored. `consent`: 0 keep nothing, 1 this session
        only (in process), 2 persistent (default `write.default_consent`).
        A message may carry its own `timestamp` (datetime, ISO-8601 or epoch seconds;
        `timestamp=` here is the time of messages without one) and `reply_to` (the text of
        the turn it answers; by default the message before it in the call): memories keep
        the time as `occurred_at` (distinct from `created_at`), and a verbatim memory is
        indexed with its date and the start of the turn it answers.
        Everything is validated before anything is written.
        """
        uid = validate.user_id(user_id)
        sid = validate.scope_id(session_id, "session_id", required=False)
        aid = validate.scope_id(agent_id, "agent_id", required=False)
        meta = validate.metadata(metadata)
        level = validate.consent(self.config.write.default_consent if consent is None
                                 else consent)
        msgs = normalize(messages, max_messages=self.config.max_messages, timestamp=timestamp)
        for m in msgs:  # the user's words become memories; other turns are only context
            limit = self.config.max_content_chars * (1 if m.role == "user" else 10)
            if m.content.strip():
                validate.content(m.content, limit)
        if not self.enabled or level == 0:
            return AddResult()
        self._backend.follow_model()
        times = [m.timestamp for m in msgs if m.timestamp is not None and m.role == "user"]
        scope = Scope(uid, sid, aid, meta, level, max(times) if times else None)
        bare = isinstance(messages, str)
        # The retry must not log the turns again: they are logged, so extract them.
        return self._backend.write(lambda: self._add(scope, msgs, infer=infer, bare=bare),
                                   lambda: self._add(scope, [], infer=infer, bare=True)
                                   if infer else self._add(scope, msgs, infer=infer, bare=bare))

    def _add(self, scope: Scope, msgs: list[Message], *, infer: bool,
             bare: bool) -> AddResult:
        if infer:
            complete = bare or bool(msgs and msgs[-1].role == "assistant")
            return self._backend.writer.add(scope, msgs, round_complete=complete)
        turns = [m for m in msgs if m.role == "user" and m.content.strip()]
        return self._edits.add_verbatim(scope, turns) if turns else AddResult()

    def flush(self, *, user_id: str, session_id: str | None = None) -> AddResult:
        """Extract the session's logged turns now, even mid-round."""
        uid = validate.user_id(user_id)
        sid = validate.scope_id(session_id, "session_id", required=False)
        if not self.enabled:
            return AddResult()
        scope = Scope(uid, sid, None, {}, self.config.write.default_consent)
        return self._backend.write(
            lambda: self._backend.writer.add(scope, [], round_complete=True, force=True))

    def session_memories(self, *, user_id: str, session_id: str) -> list[MemoryRecord]:
        """Facts kept for this session only (consent 1); never persisted."""
        uid = validate.user_id(user_id)
        sid = validate.scope_id(session_id, "session_id")
        assert sid is not None
        return self._backend.sessions.get(uid, sid)

    def write_changes(self, user_id: str,
                      build: Callable[[Engine], ChangeSet | None]) -> int | None:
        """The way for an integration that keeps its own items (the LangGraph store) to
        change memory: `build` runs under the user's write lock with the live engine
        (read through its store, embed with its embedder) and returns the change set to
        commit, or None for nothing; if a migration made another model live meanwhile,
        it runs once more with the new one. Returns the user's version after the
        commit (None: nothing was committed)."""
        uid = validate.user_id(user_id)
        self._backend.follow_model()
        return self._backend.write(lambda: self._edits.write_changes(uid, build))

    @tracing.memory_operation("update_memory")
    def update(self, memory_id: str, content: str, *, user_id: str) -> MemoryEvent:
        """Replace a memory's content (re-embedded); raises MemoryNotFoundError."""
        uid, mid = validate.user_id(user_id), validate.memory_id(memory_id)
        text = validate.content(content, self.config.max_content_chars)
        self._backend.follow_model()
        return self._backend.write(lambda: self._edits.update(uid, mid, text))

    @tracing.memory_operation("delete_memory")
    def delete(self, memory_id: str, *, user_id: str) -> MemoryEvent:
        """Delete one memory and purge its history; raises MemoryNotFoundError."""
        uid, mid = validate.user_id(user_id), validate.memory_id(memory_id)
        return self._backend.write(lambda: self._edits.delete(uid, mid))

    @tracing.memory_operation("delete_memory")
    def delete_all(self, *, user_id: str) -> DeletionReceipt:
        """Delete every memory of the user and purge the user's history, logged turns and
        queued adds; returns the receipt (`.deleted`: how many memories there were)."""
        uid = validate.user_id(user_id)
        return self._backend.write(lambda: self._edits.delete_all(uid))

    # -- read --------------------------------------------------------------------------
    @tracing.memory_operation("search_memory")
    def search(self, query: str, *, user_id: str, top_k: int | None = None,
               filters: dict[str, Any] | None = None, threshold: float | None = None,
               min_version: int | None = None, as_of: datetime | str | None = None,
               timezone: str | None = None) -> list[SearchHit]:
        """The user's active memories relevant to `query`, best first.

        Candidates from inside the user's partition: the `recall.candidate_k` (or `top_k`,
        if larger) nearest memories, the best keyword (BM25) matches, and memories of the
        topics the query asks about (core/intent.py; a verbatim memory is classified from
        its text). The relevant ones (core/ranking.py `decide`: similarity the model can
        vouch for, a topic match, or a keyword match, then a floor relative to the best)
        are ranked by similarity, importance, recency, topic and keyword match, and at
        most `top_k` (default `recall.max_results`) returned. `threshold` replaces that
        decision with a plain cosine floor (-1: everything, ranked).
        Filters: type, agent_id, session_id, created_after, created_before (aware
        datetimes or ISO strings), min_importance. `min_version` (from a write's result):
        read at least that version of the user's memories, waiting up to
        `recall.min_version_wait_s`; StaleReadError if not reached. `as_of` (an aware
        datetime or ISO string): what was true then instead, superseded memories included
        while they held (`valid_since` .. `valid_to`), never deleted ones. `timezone` (an
        IANA name, default `recall.timezone`): the user's zone, whose calendar days
        "yesterday" and "last week" in the query and the days memories were said are
        read in; an unknown name is InvalidInputError.
        """
        plan = self._recall.plan(query, user_id=user_id, top_k=top_k, filters=filters,
                                 threshold=threshold, min_version=min_version, as_of=as_of,
                                 timezone=timezone, enabled=self.enabled)
        if plan is None:
            return []
        return self._recall.found(plan, plan.embedder.embed([plan.text])[0])

    @tracing.memory_operation("search_memory")
    def context(self, query: str, *, user_id: str, session_id: str | None = None,
                min_version: int | None = None, as_of: datetime | str | None = None,
                timezone: str | None = None) -> str:
        """A prompt section of the memories `search` recalls, plus this session's
        session-only facts when `session_id` is given; "" when none apply. With `as_of`,
        a fact that stopped holding says until when. `timezone`: as in `search`."""
        hits = self.search(query, user_id=user_id, min_version=min_version, as_of=as_of,
                           timezone=timezone)
        session = self.session_memories(user_id=user_id, session_id=session_id) \
            if session_id is not None else []
        return prompt_section(hits, session)

    @tracing.memory_operation("search_memory")
    def get(self, memory_id: str, *, user_id: str,
            min_version: int | None = None) -> MemoryRecord | None:
        """The memory (any status) if it exists for this user, else None. `min_version`:
        as in `search`."""
        uid, mid = validate.user_id(user_id), validate.memory_id(memory_id)
        store = self._backend.live.store
        self._recall.current(uid, min_version, store)
        return committed(store, self._backend.events, uid, mid)

    @tracing.memory_operation("search_memory")
    def get_all(self, *, user_id: str, limit: int = 100, cursor: str | None = None,
                min_version: int | None = None, as_of: datetime | str | None = None) -> Page:
        """The user's memories (any status) in creation order, `limit` (1..1000) a page.
        `min_version`: as in `search`. `as_of`: only what was true then (as in `search`)."""
        uid = validate.user_id(user_id)
        size = validate.positive_int(limit, "limit", 1000)
        after = None if cursor is None else validate.memory_id(cursor)
        when = None if as_of is None else validate.moment(as_of, "as_of")
        store = self._backend.live.store
        self._recall.current(uid, min_version, store)
        if when is not None:
            held = sorted((r for r in store.query(uid, Where(
                after_id=after, statuses=ONCE_TRUE, alive_at_ms=to_ms(when)))
                if r.valid_at(when)), key=lambda r: r.id)
            return Page(items=held[:size],
                        next_cursor=held[size - 1].id if len(held) > size else None)
        ids = store.list_ids(uid, Where(after_id=after))
        page = ids[:size]
        records = sorted(store.query(uid, Where(ids=tuple(page))), key=lambda r: r.id) \
            if page else []
        return Page(items=records, next_cursor=page[-1] if len(ids) > size else None)

    @tracing.memory_operation("search_memory")
    def history(self, memory_id: str, *, user_id: str) -> list[MemoryEvent]:
        """Every recorded change of the memory, oldest first; [] once it is deleted."""
        uid, mid = validate.user_id(user_id), validate.memory_id(memory_id)
        return self._backend.events.history(uid, mid)

    def deletions(self, *, user_id: str) -> list[DeletionReceipt]:
        """The user's deletion receipts (ids and counts, no content), oldest first; kept
        after the user's `delete_all`, for the user or an auditor to check."""
        uid = validate.user_id(user_id)
        return [DeletionReceipt.model_validate_json(b)
                for b in self._backend.events.receipts(uid)]

    def verify_deletions(self, *, user_id: str) -> list[DeletionCheck]:
        """Each of the user's receipts checked again now: its digest matches, and no store
        (vectors, queued changes, history, hot set, profile) holds an id it names."""
        receipts = self.deletions(user_id=user_id)
        embedder, store, hot = self._backend.live
        check = Deletions(store, self._backend.events, embedder, hot, lambda _: None)
        return [check.recheck(r) for r in receipts]

    def export(self, *, user_id: str) -> Iterator[dict[str, Any]]:
        """Everything held about the user as JSON-ready dicts: a header, each memory
        (any status; vectors are derived data and left out), then each history event."""
        uid = validate.user_id(user_id)
        embedder, store, _ = self._backend.live
        events = self._backend.events
        yield {"kind": "user", "user_id": uid, "version": events.version(uid),
               "exported_at": utcnow().isoformat(), "embedding_model": embedder.model}
        for record in sorted(store.query(uid, Where()), key=lambda r: r.id):
            yield {"kind": "memory", **record.model_dump(mode="json")}
        for event in events.user_events(uid):
            yield {"kind": "event", **event.model_dump(mode="json")}

    def stats(self) -> dict[str, int]:
        """In-process counters for /metrics: the hot set's users held now and how often a
        user's whole set was read from the store (a search that found it held costs none);
        the embedder's forward passes and the callers they served (concurrent queries share
        a pass). Zeros for what is off or not open yet."""
        hot = self._backend.hot
        passes, calls = shared_passes(self._backend.embedder_if_open)
        return {"hot_set_users": hot.held if hot is not None else 0,
                "hot_set_loads": hot.loads if hot is not None else 0,
                "embed_passes": passes, "embed_calls": calls}

    def version(self, *, user_id: str) -> int:
        """The user's memory version: bumped by every write, so a cached copy can be checked."""
        return self._backend.events.version(validate.user_id(user_id))

    # -- profile and diagnosis (core/profile.py, core/doctor.py) -----------------------
    def profile(self, user_id: str, *, refresh: bool = False) -> Profile:
        """The user's profile (identity, preferences, constraints, current tasks, other
        facts) from their active memories: the stored one while it is current, else a
        template one built now. `refresh=True` builds it now, with the LLM's summary
        when `write.extractor` is 'llm' (the nightly job does this for every user)."""
        uid = validate.user_id(user_id)
        if not refresh:
            return Profiles(self.engine()).read(uid)
        with llm_summarizer(self.config) as summarize:
            return Profiles(self.engine()).refresh(uid, summarize)

    def doctor(self, user_id: str | None = None, *, repair: bool = False,
               candidate_days: int = 30) -> DoctorReport:
        """Check that the store agrees with the event log, for one user or (None) all;
        `repair=True` fixes what is safe through the write path and checks again
        (core/doctor.py says what each problem is and what repair does)."""
        uids = None if user_id is None else [validate.user_id(user_id)]
        if not repair:
            return Doctor(self.engine(), candidate_days=candidate_days).run(uids)
        return self._backend.write(lambda: Doctor(self.engine(), candidate_days=candidate_days)
                                   .run(uids, repair=True))

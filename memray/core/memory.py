"""`Memory`: the public, in-process entry point (embedded default or a Milvus server)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from memray import tracing
from memray.config import MemoryConfig
from memray.core import filters as search_filters
from memray.core import validate
from memray.core.changes import ChangeSet
from memray.core.committer import Committer
from memray.core.doctor import Doctor, DoctorReport
from memray.core.engine import Engine
from memray.core.factory import build_embedder, build_event_log, build_store, build_write_path
from memray.core.follow import LIVE_EMBEDDER, LiveEmbedder, Throttle
from memray.core.gate import WriteGate
from memray.core.hotset import HotSet
from memray.core.intent import OBJECT_SLOTS, memory_topics, query_topics, slot_of, topic_slots
from memray.core.messages import Message, normalize
from memray.core.policies import redact
from memray.core.profile import Profile, Profiles, llm_summarizer
from memray.core.prompt import prompt_section
from memray.core.ranking import Evidence, background, content_terms, decide, rank
from memray.core.records import new_record
from memray.core.resolve import Scope
from memray.core.session import SessionMemory
from memray.core.versions import OutboxDrainer, SeenVersions
from memray.core.writepath import WritePath
from memray.embed.base import Embedder
from memray.errors import (
    ConfigError,
    MemoryNotFoundError,
    ModelChangedError,
    StaleReadError,
    StoreError,
)
from memray.models import (
    AddResult,
    MemoryEvent,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
    Page,
    SearchHit,
    content_hash,
    utcnow,
)
from memray.settings import load_settings
from memray.store.base import StoredMemory, Vector, VectorStore, Where
from memray.store.events import EventLog, TurnLog
from memray.store.rows import to_ms

log = logging.getLogger(__name__)
T = TypeVar("T")
_ACTIVE = (MemoryStatus.ACTIVE.value,)
# Set to "open" while a process holds an embedded store, "closed" when it closes it.
_EMBEDDED_STATE = "embedded_store_state"


@dataclass(frozen=True)
class SearchPlan:
    """A search checked and ready for its query vector (see `Memory.search_plan`)."""

    uid: str
    text: str
    cap: int
    floor: float | None
    where: Where
    embedder: Embedder
    store: VectorStore
    hot: HotSet | None
    version: int


class Memory:
    """Long-term memory for one application, many users.

    Nothing is opened in the constructor: the first call (or `open()`) loads the embedding
    model, opens the store and replays any write that a crash left unapplied.
    Thread-safe. Every method takes `user_id` and never touches another user's data.
    """

    def __init__(self, config: MemoryConfig | None = None, *, embedder: Embedder | None = None,
                 store: VectorStore | None = None, events: EventLog | None = None) -> None:
        self.config = config or MemoryConfig()
        self._settings = load_settings()
        enabled = self.config.enabled
        self.enabled = self._settings.enabled if enabled is None else enabled
        self._embedder = embedder or build_embedder(self.config)
        self._store_arg, self._events_arg = store, events
        self._store: VectorStore | None = None
        self._events: EventLog | None = None
        self._committer: Committer | None = None
        self._writer: WritePath | None = None
        self._sessions = SessionMemory()
        self._hot: HotSet | None = None
        # What a search uses, replaced as one tuple so that a migration's switch never
        # pairs one model's query vector with the other model's collection.
        self._live: tuple[Embedder, VectorStore, HotSet | None] | None = None
        self._retired: list[VectorStore] = []
        self._gate = WriteGate()
        self._open_lock = threading.Lock()
        self._drainer: OutboxDrainer | None = None
        self._seen = SeenVersions()
        # An injected embedder (a Serve embedding deployment) cannot be rebuilt here: such
        # a process keeps its model until it is redeployed with the new one.
        self._model_check = Throttle(0 if embedder else self.config.store.model_check_s)

    @classmethod
    def from_config(cls, source: MemoryConfig | dict[str, Any] | str | Path) -> Memory:
        """From a config, a dict or a YAML file path."""
        return cls(MemoryConfig.load(source))

    # -- lifecycle ---------------------------------------------------------------
    def open(self) -> Memory:
        with self._open_lock:
            if self._committer is not None:
                return self
            self._embedder.open()
            model, dim = self._embedder.model, self._embedder.dim
            wanted = self.config.embedder.dim
            if wanted is not None and wanted != dim and self.config.embedder.provider != "hashing":
                raise ConfigError(f"embedder.dim is {wanted}, but the model {model} makes "
                                  f"{dim}-dimensional vectors; leave embedder.dim unset or "
                                  f"set it to {dim}")
            store = self._store_arg or build_store(self.config, self._settings,
                                                   model=model, dim=dim)
            events = self._events_arg or build_event_log(self.config, self._settings, dim=dim)
            store.open()
            try:
                events.open()
            except Exception:
                store.close()
                raise
            self._events = events
            self._install(self._embedder, store)
            assert self._committer is not None
            self._committer.drain()
            self._recover_if_crashed(store, events)
            self._drainer = OutboxDrainer(self._drain_now, self.config.store.outbox_retry_s)
            self._drainer.start()
        return self

    def _recover_if_crashed(self, store: VectorStore, events: EventLog) -> None:
        """An embedded store whose last process never closed it (killed, power lost) may
        have lost its latest writes (milvus-lite keeps them in a WAL that a crash can
        tear), while the log holds them as applied: the doctor rebuilds what is missing
        from the log before anything is read."""
        if not store.is_embedded or events.shared:
            return
        if events.get_meta(_EMBEDDED_STATE) == "open":
            log.warning("%s was not closed by the last process that used it; checking the "
                        "vector store against the event log", self.config.data_dir)
            report = self.doctor(repair=True)
            log.warning("recovered: %d problem(s) found and repaired, %d left",
                        sum(u.problems for u in report.users), report.problems)
        events.set_meta(_EMBEDDED_STATE, "open")

    def _drain_now(self) -> None:
        committer = self._committer
        if committer is not None:
            with self._gate.shared():
                committer.drain()

    def _install(self, embedder: Embedder, store: VectorStore) -> None:
        assert self._events is not None
        hot = None
        mode = self.config.recall.hot_set
        # A hot set is checked against the user's version in the log before every use, so
        # it is coherent wherever every writer bumps that version: an embedded store, or
        # a server whose writers all share this log (PostgreSQL).
        shared = self._events.shared
        if mode == "on" or (mode == "auto" and (store.is_embedded or shared)):
            hot = HotSet(dim=embedder.dim, max_users=self.config.recall.hot_set_users)
        committer = Committer(store, self._events, gate=self._gate, on_change=hot,
                              check=self._live_model_check(embedder.model) if shared else None,
                              seen=self._seen if shared else None)
        self._writer = build_write_path(self.config, store=store, events=self._events,
                                        committer=committer, embedder=embedder,
                                        sessions=self._sessions)
        self._embedder, self._store, self._hot = embedder, store, hot
        self._committer = committer
        self._live = (embedder, store, hot)

    def switch_backend(self, embedder: Embedder, store: VectorStore,
                       final: Callable[[], None], *, config: MemoryConfig | None = None) -> None:
        """Make (embedder, store) the live pair: the last step of a migration.

        Writes wait while this runs: pending store ops are applied, then `final` runs
        (the last catch-up, the checks and the alias switch; an exception aborts and
        nothing is switched). Searches keep running on the old pair until the swap.
        """
        with self._gate.exclusive():
            _, events, committer = self._parts()
            if not committer.drain():
                raise StoreError("queued writes could not be applied; not switching")
            final()
            events.set_dim(embedder.dim)
            with self._open_lock:
                old = self._store
                if config is not None:
                    self.config = config
                self._install(embedder, store)
                if old is not None:
                    self._retired.append(old)  # searches in flight may still use it

    def _live_model_check(self, model: str) -> Callable[[], None]:
        """With a shared log, every write checks under its user's lock (which a
        migration's switch waits for) that its model is still the live one."""
        def check() -> None:
            _, events, _ = self._parts()
            raw = events.get_meta(LIVE_EMBEDDER)
            if raw is not None and LiveEmbedder.loads(raw).model != model:
                raise ModelChangedError(f"the live embedding model is no longer {model}")

        return check

    def _write(self, run: Callable[[], T], retry: Callable[[], T] | None = None) -> T:
        """`run` under the write gate; if a migration elsewhere switched the model first,
        follow it and try once more (`retry`, when the retry differs)."""
        try:
            with self._gate.shared():
                return run()
        except ModelChangedError:
            self._follow_model(force=True)
            with self._gate.shared():
                return (retry or run)()

    def _follow_model(self, *, force: bool = False) -> None:
        """Switch to the embedder a migration made live, if it changed (throttled)."""
        if self._committer is None or not (force or self._model_check.due()):
            return
        _, events, _ = self._parts()
        raw = events.get_meta(LIVE_EMBEDDER)
        if raw is None:
            return
        live = LiveEmbedder.loads(raw)
        if live.model == self._embedder.model:
            return
        config = self.config.model_copy(update={"embedder": live.config})
        embedder = build_embedder(config)
        embedder.open()
        store = build_store(config, self._settings, model=embedder.model, dim=embedder.dim)
        store.open()
        try:
            self.switch_backend(embedder, store, lambda: None, config=config)
        except StoreError as exc:  # e.g. old-model writes still queued: next check retries
            store.close()
            log.warning("not switching to %s yet: %s", live.model, exc)
            return
        log.info("switched to embedder %s after a migration", live.model)

    def close(self) -> None:
        with self._open_lock:
            if self._committer is None:
                return
            assert self._store is not None and self._events is not None
            if self._drainer is not None:
                self._drainer.stop()
                self._drainer = None
            self._committer = self._writer = self._hot = self._live = None
            self._sessions.clear()
            self._store.close()
            if self._store.is_embedded and not self._events.shared:
                self._events.set_meta(_EMBEDDED_STATE, "closed")
            for retired in self._retired:
                retired.close()
            self._retired.clear()
            self._events.close()
            self._store = self._events = None

    def __enter__(self) -> Memory:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def engine(self) -> Engine:
        """The open store, event log and committer, for batch jobs (memray.batch)."""
        store, events, committer = self._parts()
        return Engine(self.config, store, events, committer, self._embedder)

    def turn_log(self) -> TurnLog:
        """The open log's turns and async-add queue (the API queues async adds there)."""
        return self._parts()[1]

    def _parts(self) -> tuple[VectorStore, EventLog, Committer]:
        if self._committer is None:
            self.open()
        assert self._store is not None and self._events is not None
        assert self._committer is not None
        return self._store, self._events, self._committer

    # -- write -------------------------------------------------------------------
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
        self._follow_model()
        times = [m.timestamp for m in msgs if m.timestamp is not None and m.role == "user"]
        scope = Scope(uid, sid, aid, meta, level, max(times) if times else None)
        bare = isinstance(messages, str)
        # The retry must not log the turns again: they are logged, so extract them.
        return self._write(lambda: self._add(scope, msgs, infer=infer, bare=bare),
                           lambda: self._add(scope, [], infer=infer, bare=True)
                           if infer else self._add(scope, msgs, infer=infer, bare=bare))

    def _add(self, scope: Scope, msgs: list[Message], *, infer: bool,
             bare: bool) -> AddResult:
        if infer:
            complete = bare or bool(msgs and msgs[-1].role == "assistant")
            return self._write_path().add(scope, msgs, round_complete=complete)
        turns = [m for m in msgs if m.role == "user" and m.content.strip()]
        return self._add_verbatim(scope, turns) if turns else AddResult()

    def flush(self, *, user_id: str, session_id: str | None = None) -> AddResult:
        """Extract the session's logged turns now, even mid-round."""
        uid = validate.user_id(user_id)
        sid = validate.scope_id(session_id, "session_id", required=False)
        if not self.enabled:
            return AddResult()
        scope = Scope(uid, sid, None, {}, self.config.write.default_consent)
        with self._gate.shared():
            return self._write_path().add(scope, [], round_complete=True, force=True)

    def _write_path(self) -> WritePath:
        self._parts()
        assert self._writer is not None
        return self._writer

    def session_memories(self, *, user_id: str, session_id: str) -> list[MemoryRecord]:
        """Facts kept for this session only (consent 1); never persisted."""
        uid = validate.user_id(user_id)
        sid = validate.scope_id(session_id, "session_id")
        assert sid is not None
        return self._sessions.get(uid, sid)

    def _add_verbatim(self, scope: Scope, turns: list[Message]) -> AddResult:
        # The same per-user lock as extraction: the exact-repeat check and the write
        # must not interleave with another write of this user.
        with self._write_path().user_lock(scope.user_id):
            return self._add_verbatim_locked(scope, turns)

    def _add_verbatim_locked(self, scope: Scope, turns: list[Message]) -> AddResult:
        store, events, committer = self._parts()
        uid, now = scope.user_id, utcnow()
        chars = self.config.write.reply_context_chars
        hashes: dict[str, tuple[int, str, Message]] = {}
        for m in turns:
            text = redact(m.content.strip())
            hashes.setdefault(content_hash(text), (m.index, text, m))
        where = Where(content_hashes=tuple(hashes), statuses=_ACTIVE, alive_at_ms=to_ms(now))
        known = {r.content_hash: r for r in store.query(uid, where)}
        # In the order given: (the stored exact repeat, None) or (None, the new memory).
        decided: list[tuple[MemoryRecord | None, MemoryRecord | None]] = []
        for h, (index, text, msg) in hashes.items():
            reply = redact(" ".join((msg.reply_to or "").split()))[:chars] if chars else ""
            decided.append((known[h], None) if h in known else (None, new_record(
                user_id=uid, content=text, embedding_model=self._embedder.model, at=now,
                type=MemoryType.MESSAGE, agent_id=scope.agent_id, session_id=scope.session_id,
                source_turn_ids=(str(index),), metadata=dict(scope.metadata),
                occurred_at=msg.timestamp, reply_to=reply)))
        fresh = [new for _, new in decided if new is not None]
        if fresh and scope.consent == 1:  # this session only: held in process, not stored
            fresh = [r.model_copy(update={"consent": 1}) for r in fresh]
            self._sessions.add(uid, scope.session_id or "", fresh)
            return AddResult(events=[MemoryEvent(op="ADD", memory_id=r.id, user_id=uid,
                                                 memory=r, at=now,
                                                 reason="session only (consent 1)")
                                     for r in fresh])
        vectors = dict(zip((r.id for r in fresh),
                           self._embedder.embed([r.index_text for r in fresh]) if fresh else [],
                           strict=True))
        changes = ChangeSet(uid)
        for old, new in decided:
            if old is not None:
                changes.noop(old, now, "already stored")
            elif new is not None:
                changes.put(new, vectors[new.id], None, now)
        version = committer.commit(changes) if fresh else events.version(uid)
        return AddResult(events=changes.events, version=version)

    def write_changes(self, user_id: str,
                      build: Callable[[Engine], ChangeSet | None]) -> int | None:
        """The way for an integration that keeps its own items (the LangGraph store) to
        change memory: `build` runs under the user's write lock with the live engine
        (read through its store, embed with its embedder) and returns the change set to
        commit, or None for nothing; if a migration made another model live meanwhile,
        it runs once more with the new one. Returns the user's version after the
        commit (None: nothing was committed)."""
        uid = validate.user_id(user_id)

        def run() -> int | None:
            with self._write_path().user_lock(uid):
                engine = self.engine()
                changes = build(engine)
                if changes is None or changes.empty:
                    return None
                if changes.user_id != uid:
                    raise ValueError(f"a change set of {changes.user_id!r} built for {uid!r}")
                return engine.committer.commit(changes)

        self._follow_model()
        return self._write(run)

    @tracing.memory_operation("update_memory")
    def update(self, memory_id: str, content: str, *, user_id: str) -> MemoryEvent:
        """Replace a memory's content (re-embedded); raises MemoryNotFoundError."""
        uid, mid = validate.user_id(user_id), validate.memory_id(memory_id)
        text = validate.content(content, self.config.max_content_chars)
        self._follow_model()
        return self._write(lambda: self._locked(uid, lambda: self._update(uid, mid, text)))

    def _locked(self, uid: str, run: Callable[[], T]) -> T:
        """`run` under the user's write lock: what it reads is not changed meanwhile."""
        with self._write_path().user_lock(uid):
            return run()

    def _update(self, uid: str, mid: str, text: str) -> MemoryEvent:
        _, _, committer = self._parts()
        old = self._require(uid, mid)
        now = utcnow()
        new = old.model_copy(update={"content": text, "content_hash": content_hash(text),
                                     "updated_at": now, "last_confirmed_at": now,
                                     "embedding_model": self._embedder.model})
        changes = ChangeSet(uid)
        changes.put(new, self._embedder.embed([new.index_text])[0], old, now)
        version = committer.commit(changes)
        return changes.events[0].model_copy(update={"version": version})

    @tracing.memory_operation("delete_memory")
    def delete(self, memory_id: str, *, user_id: str) -> MemoryEvent:
        """Delete one memory and purge its history; raises MemoryNotFoundError."""
        uid, mid = validate.user_id(user_id), validate.memory_id(memory_id)
        return self._write(lambda: self._locked(uid, lambda: self._delete(uid, mid)))

    def _delete(self, uid: str, mid: str) -> MemoryEvent:
        _, _, committer = self._parts()
        old = self._require(uid, mid)
        changes = ChangeSet(uid)
        changes.delete(old, utcnow())
        version = committer.commit(changes)
        return changes.events[0].model_copy(update={"version": version})

    @tracing.memory_operation("delete_memory")
    def delete_all(self, *, user_id: str) -> int:
        """Delete every memory of the user and purge the user's history; returns the count."""
        uid = validate.user_id(user_id)
        count = self._write(lambda: self._locked(uid, lambda: self._delete_all(uid)))
        self._sessions.drop_user(uid)
        return count

    def _delete_all(self, uid: str) -> int:
        store, _, committer = self._parts()
        count = store.count(uid)
        changes = ChangeSet(uid)
        changes.forget_user(utcnow())
        committer.commit(changes)
        return count

    # -- read --------------------------------------------------------------------
    @tracing.memory_operation("search_memory")
    def search(self, query: str, *, user_id: str, top_k: int | None = None,
               filters: dict[str, Any] | None = None, threshold: float | None = None,
               min_version: int | None = None) -> list[SearchHit]:
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
        `recall.min_version_wait_s`; StaleReadError if not reached.
        """
        plan = self.search_plan(query, user_id=user_id, top_k=top_k, filters=filters,
                                threshold=threshold, min_version=min_version)
        if plan is None:
            return []
        return self.search_found(plan, plan.embedder.embed([plan.text])[0])

    def search_plan(self, query: str, *, user_id: str, top_k: int | None = None,
                    filters: dict[str, Any] | None = None, threshold: float | None = None,
                    min_version: int | None = None) -> SearchPlan | None:
        """`search` up to its query embedding: the arguments checked and the user's version
        read (None: memory is disabled). `search_found` does the rest with the vector;
        together they are `search`, split so an async caller can await the embedding."""
        uid = validate.user_id(user_id)
        text = validate.content(query, self.config.max_content_chars)
        cap = validate.positive_int(top_k if top_k is not None else
                                    self.config.recall.max_results, "top_k", 1024)
        floor = None if threshold is None else validate.similarity(threshold, "threshold")
        where = Where(statuses=_ACTIVE, alive_at_ms=to_ms(utcnow()),
                      **search_filters.parse(filters))
        if not self.enabled:
            return None
        self._parts()
        self._follow_model()
        assert self._live is not None
        embedder, store, hot = self._live
        version = self._current(uid, min_version, store)
        return SearchPlan(uid, text, cap, floor, where, embedder, store, hot, version)

    def search_found(self, plan: SearchPlan, vector: Vector) -> list[SearchHit]:
        """The rest of `search` once `plan.text` is embedded: candidates, the relevance
        decision and the ranking."""
        _, events, _ = self._parts()
        uid, text, cap, floor, where = plan.uid, plan.text, plan.cap, plan.floor, plan.where
        embedder, store, hot, version = plan.embedder, plan.store, plan.hot, plan.version
        recall = self.config.recall
        search = self._searcher(store, events, uid, hot, version)
        limit = max(recall.candidate_k, cap)
        keyword: dict[str, float] = {}
        found = None
        if recall.w_lexical and hot is not None:  # hybrid: dense + BM25 over the hot set
            found = hot.hybrid(uid, version, vector, text, limit, where,
                               self._loader(store, events, uid))
        if found is not None:
            candidates = [(r, sim) for r, sim, _ in found]
            keyword = {r.id: lex for r, _, lex in found}
        else:
            candidates = search(vector, limit, where)
        topics = query_topics(text) if recall.intent_k else frozenset()
        if topics and len(candidates) >= limit:  # fewer: every memory is a candidate already
            candidates += self._topic_candidates(search, vector, where, topics,
                                                 {r.id for r, _ in candidates})
        topic_ids = frozenset(r.id for r, _ in candidates
                              if topics and topics & self._topics_of(r))
        if floor is not None:  # a plain floor, no exceptions; topic matches still rank up
            return rank([c for c in candidates if c[1] >= floor], recall, now=utcnow(),
                        threshold=floor, cap=cap, intent_ids=topic_ids, keyword=keyword)
        evidence = Evidence(readable=background(embedder, vector) < recall.background_max,
                            topic_ids=topic_ids, keyword=keyword,
                            query_terms=content_terms(text))
        return rank(decide(candidates, recall, evidence), recall, now=utcnow(),
                    threshold=-1.0, cap=cap, intent_ids=topic_ids, keyword=keyword)

    @staticmethod
    def _topics_of(record: MemoryRecord) -> frozenset[str]:
        """The topics of a memory; one stored verbatim is classified from its text."""
        return memory_topics(record.slot or slot_of(record.content), record.content)

    def _topic_candidates(self, search: Callable[[Vector, int, Where],
                                                 list[tuple[MemoryRecord, float]]],
                          vector: Vector, where: Where, topics: frozenset[str],
                          have: set[str]) -> list[tuple[MemoryRecord, float]]:
        """Memories of the query's topics beyond the nearest ones: extracted facts by
        slot (`intent_k` per topic), facts with an object (like:, dislike: ...) and
        verbatim memories, the nearest `candidate_k` of each, kept if of those topics."""
        recall = self.config.recall
        slots, prefixes = topic_slots(topics)
        asks: list[tuple[dict[str, Any], int]] = [
            ({"slot_prefixes": OBJECT_SLOTS}, recall.candidate_k),
            ({"types": (MemoryType.MESSAGE.value,)}, recall.candidate_k)]
        if slots or prefixes:
            asks.insert(0, ({"slots": slots, "slot_prefixes": prefixes},
                            recall.intent_k * len(topics)))
        out: list[tuple[MemoryRecord, float]] = []
        for keys, k in asks:
            narrowed = replace(where, **{key: v for key, v in keys.items()
                                         if not getattr(where, key)})
            for record, sim in search(vector, k, narrowed):
                if record.id not in have and topics & self._topics_of(record):
                    have.add(record.id)
                    out.append((record, sim))
        return out

    @staticmethod
    def _loader(store: VectorStore, events: EventLog,
                uid: str) -> Callable[[], list[StoredMemory] | None]:
        def load() -> list[StoredMemory] | None:
            if events.has_pending(uid):  # the store is behind the log: do not cache
                return None
            return store.rows(uid, Where(statuses=_ACTIVE))

        return load

    @staticmethod
    def _searcher(store: VectorStore, events: EventLog, uid: str, hot: HotSet | None,
                  version: int,
                  ) -> Callable[[Vector, int, Where], list[tuple[MemoryRecord, float]]]:
        """The user's vector search: from the hot set when one is kept at `version`
        (the user's version read once for the whole search)."""
        if hot is None:
            return lambda vec, k, where: store.search(uid, vec, k, where)
        load = Memory._loader(store, events, uid)

        def search(vec: Vector, k: int, where: Where) -> list[tuple[MemoryRecord, float]]:
            hits = hot.search(uid, version, vec, k, where, load)
            return hits if hits is not None else store.search(uid, vec, k, where)

        return search

    def _current(self, uid: str, min_version: int | None, store: VectorStore) -> int:
        """The user's version, once it is at least `min_version`; reads of a user whose
        version moved since this process last looked go Strong (another process wrote)."""
        _, events, committer = self._parts()
        wanted = None if min_version is None else validate.non_negative_int(
            min_version, "min_version")
        version = events.version(uid)
        if wanted is not None and version < wanted:
            version = self._wait_for(uid, wanted)
        if wanted is not None and events.has_pending(uid):
            committer.drain_user(uid)  # apply what the writer queued before reading it
        if self._seen.moved(uid, version):
            store.touch(uid)
        return version

    def _wait_for(self, uid: str, wanted: int) -> int:
        _, events, _ = self._parts()
        deadline = time.monotonic() + self.config.recall.min_version_wait_s
        version = events.version(uid)
        while version < wanted and time.monotonic() < deadline:
            time.sleep(0.02)
            version = events.version(uid)
        if version < wanted:
            raise StaleReadError(f"memory version {wanted} not reached for this user "
                                 f"(at {version} after "
                                 f"{self.config.recall.min_version_wait_s:g} s)")
        return version

    @tracing.memory_operation("search_memory")
    def context(self, query: str, *, user_id: str, session_id: str | None = None,
                min_version: int | None = None) -> str:
        """A prompt section of the memories `search` recalls, plus this session's
        session-only facts when `session_id` is given; "" when none apply."""
        hits = self.search(query, user_id=user_id, min_version=min_version)
        session = self.session_memories(user_id=user_id, session_id=session_id) \
            if session_id is not None else []
        return prompt_section(hits, session)

    @tracing.memory_operation("search_memory")
    def get(self, memory_id: str, *, user_id: str,
            min_version: int | None = None) -> MemoryRecord | None:
        """The memory (any status) if it exists for this user, else None. `min_version`:
        as in `search`."""
        uid, mid = validate.user_id(user_id), validate.memory_id(memory_id)
        store, _, _ = self._parts()
        self._current(uid, min_version, store)
        found = store.query(uid, Where(ids=(mid,)), limit=1)
        return found[0] if found else None

    @tracing.memory_operation("search_memory")
    def get_all(self, *, user_id: str, limit: int = 100, cursor: str | None = None,
                min_version: int | None = None) -> Page:
        """The user's memories (any status) in creation order, `limit` (1..1000) a page.
        `min_version`: as in `search`."""
        uid = validate.user_id(user_id)
        size = validate.positive_int(limit, "limit", 1000)
        after = None if cursor is None else validate.memory_id(cursor)
        store, _, _ = self._parts()
        self._current(uid, min_version, store)
        ids = store.list_ids(uid, Where(after_id=after))
        page = ids[:size]
        records = sorted(store.query(uid, Where(ids=tuple(page))), key=lambda r: r.id) \
            if page else []
        return Page(items=records, next_cursor=page[-1] if len(ids) > size else None)

    @tracing.memory_operation("search_memory")
    def history(self, memory_id: str, *, user_id: str) -> list[MemoryEvent]:
        """Every recorded change of the memory, oldest first; [] once it is deleted."""
        uid, mid = validate.user_id(user_id), validate.memory_id(memory_id)
        _, events, _ = self._parts()
        return events.history(uid, mid)

    def export(self, *, user_id: str) -> Iterator[dict[str, Any]]:
        """Everything held about the user as JSON-ready dicts: a header, each memory
        (any status; vectors are derived data and left out), then each history event."""
        uid = validate.user_id(user_id)
        store, events, _ = self._parts()
        yield {"kind": "user", "user_id": uid, "version": events.version(uid),
               "exported_at": utcnow().isoformat(), "embedding_model": self._embedder.model}
        for record in sorted(store.query(uid, Where()), key=lambda r: r.id):
            yield {"kind": "memory", **record.model_dump(mode="json")}
        for event in events.user_events(uid):
            yield {"kind": "event", **event.model_dump(mode="json")}

    def version(self, *, user_id: str) -> int:
        """The user's memory version: bumped by every write, so a cached copy can be checked."""
        uid = validate.user_id(user_id)
        _, events, _ = self._parts()
        return events.version(uid)

    def _require(self, uid: str, mid: str) -> MemoryRecord:
        record = self.get(mid, user_id=uid)
        if record is None:
            raise MemoryNotFoundError(f"no memory {mid} for this user")
        return record

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
        return self._write(lambda: Doctor(self.engine(), candidate_days=candidate_days)
                           .run(uids, repair=True))

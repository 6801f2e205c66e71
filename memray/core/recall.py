"""`Recall`: the read path behind `Memory.search`.

A search is planned (arguments checked, the user's version read, at least `min_version`
when asked), its query embedded (by the caller: the async surface awaits it), then
`found` gathers candidates from inside the user's partition (the nearest memories, the
best keyword matches over the hot set, memories of the topics the query asks about),
keeps the relevant ones (core/ranking.py `decide`) and ranks them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any
from zoneinfo import ZoneInfo

from memray.config import RecallConfig
from memray.core import search_filters, validate, when
from memray.core.backend import Backend
from memray.core.hotset import HotSet
from memray.core.intent import OBJECT_SLOTS, memory_topics, query_topics, slot_of, topic_slots
from memray.core.ranking import (
    Evidence,
    background,
    content_terms,
    decide,
    rank,
    unreadable,
)
from memray.embed.base import Embedder
from memray.errors import StaleReadError
from memray.models import MemoryRecord, MemoryStatus, MemoryType, SearchHit, utcnow
from memray.store.base import StoredMemory, Vector, VectorStore, Where
from memray.store.events import EventLog
from memray.store.rows import to_ms

ACTIVE = (MemoryStatus.ACTIVE.value,)
# What can have been true at an earlier time: active, superseded and expired memories (a
# memory's `valid_at` decides; a retired candidate's interval is empty); never deleted,
# merged (the summary stands for them) or candidates (never confirmed).
ONCE_TRUE = (MemoryStatus.ACTIVE.value, MemoryStatus.SUPERSEDED.value,
             MemoryStatus.EXPIRED.value)
Searcher = Callable[[Vector, int, Where], list[tuple[MemoryRecord, float]]]
# "in June" asked without a year, searched in the store: that month of this many years
_MONTH_YEARS = 10


@dataclass(frozen=True)
class SearchPlan:
    """A search checked and ready for its query vector (see `Recall.plan`)."""

    uid: str
    text: str
    cap: int
    floor: float | None
    where: Where
    embedder: Embedder
    store: VectorStore
    hot: HotSet | None
    version: int
    now: datetime  # when it is asked: `as_of`, else the clock
    as_of: datetime | None = None


class Recall:
    def __init__(self, backend: Backend, clock: Callable[[], datetime] = utcnow) -> None:
        self._backend = backend
        self._clock = clock  # when a question is asked: "last week" counts from it

    def plan(self, query: str, *, user_id: str, top_k: int | None = None,
             filters: dict[str, Any] | None = None, threshold: float | None = None,
             min_version: int | None = None, as_of: object = None,
             timezone: object = None, enabled: bool = True) -> SearchPlan | None:
        """`Memory.search` up to its query embedding: the arguments checked and the user's
        version read (None: memory is disabled). `found` does the rest with the vector.
        `as_of`: what was true then, read from the store (the hot set holds only what is
        active now). `timezone`: the IANA zone whose days the question and the memories
        are read in (default `recall.timezone`)."""
        cfg = self._backend.config
        uid = validate.user_id(user_id)
        text = validate.content(query, cfg.max_content_chars)
        cap = validate.positive_int(top_k if top_k is not None else cfg.recall.max_results,
                                    "top_k", 1024)
        floor = None if threshold is None else validate.similarity(threshold, "threshold")
        when = None if as_of is None else validate.moment(as_of, "as_of")
        # days are read in one zone: the question's "yesterday" and the memories' days
        zone = (ZoneInfo(cfg.recall.timezone) if timezone is None
                else validate.zone(timezone))
        now = (when or validate.moment(self._clock(), "clock")).astimezone(zone)
        where = Where(statuses=ACTIVE if when is None else ONCE_TRUE,
                      alive_at_ms=to_ms(now), **search_filters.parse(filters))
        if not enabled:
            return None
        self._backend.live  # noqa: B018 - opens on first use
        self._backend.follow_model()
        embedder, store, hot = self._backend.live
        version = self.current(uid, min_version, store)
        return SearchPlan(uid, text, cap, floor, where, embedder, store,
                          hot if when is None else None, version, now, when)

    def found(self, plan: SearchPlan, vector: Vector) -> list[SearchHit]:
        """The rest of a search once `plan.text` is embedded: candidates, the relevance
        decision and the ranking."""
        events = self._backend.events
        recall = self._backend.config.recall
        uid, text, cap, where = plan.uid, plan.text, plan.cap, plan.where
        search = _searcher(plan.store, events, uid, plan.hot, plan.version)
        if plan.as_of is not None:
            search = _valid_at(search, plan.as_of)
        now = plan.now
        limit = max(recall.candidate_k, cap)
        keyword: dict[str, float] = {}
        links: dict[str, tuple[str, ...]] = {}
        named: dict[str, float] = {}
        hybrid = None
        if recall.w_lexical and plan.hot is not None:  # dense + BM25 over the hot set
            hybrid = plan.hot.hybrid(uid, plan.version, vector, text, limit, where,
                                     _loader(plan.store, events, uid),
                                     around=recall.neighbour_k if recall.w_neighbour else 0,
                                     names=recall.w_entity > 0)
        if hybrid is not None:
            candidates = [(c.record, c.similarity) for c in hybrid]
            keyword = {c.record.id: c.keyword for c in hybrid}
            links = {c.record.id: c.linked for c in hybrid if c.linked}
            named = {c.record.id: c.named for c in hybrid if c.named}
        else:
            candidates = search(vector, limit, where)
        asked = when.asked(text, now) if recall.w_date or recall.window_k else []
        # Only a time that is over asks what was said then; "this weekend", "tomorrow" and
        # "next week" are mostly a plan's: they only rank.
        past = list(dict.fromkeys(s for s in asked if s.over_by(when.today(now)))) \
            if recall.window_k else []
        if past:
            candidates += _said_then(plan, search, vector, past, recall.window_k, candidates)
        topics = query_topics(text) if recall.intent_k else frozenset()
        if topics and len(candidates) >= limit:  # fewer: every memory is a candidate already
            candidates += self._topic_candidates(search, vector, where, topics,
                                                 {r.id for r, _ in candidates})
        topic_ids = frozenset(r.id for r, _ in candidates
                              if topics and topics & topics_of(r))
        timed = _timed(text, candidates) if recall.w_when else None
        said = _days_said(candidates, now) if asked else {}
        dated = (frozenset(i for i, days in said.items() if when.meets(asked, days))
                 if asked else None)
        # evidence for a question about what happened then (see `when.about`)
        about = frozenset(i for i, days in said.items() if when.about(past, days))
        if plan.floor is not None:  # a plain floor, no exceptions; topic matches rank up
            return rank([c for c in candidates if c[1] >= plan.floor], recall, now=now,
                        threshold=plan.floor, cap=cap, intent_ids=topic_ids, keyword=keyword,
                        when_ids=timed, date_ids=dated, links=links, named=named)
        readable = background(plan.embedder, vector) < recall.background_max
        evidence = Evidence(readable=readable, topic_ids=topic_ids, keyword=keyword,
                            query_terms=content_terms(text), dated_ids=about,
                            unread=_unread(plan, candidates, recall)
                            if readable and not _mostly_cjk(text) else frozenset())
        return rank(decide(candidates, recall, evidence), recall, now=now,
                    threshold=-1.0, cap=cap, intent_ids=topic_ids, keyword=keyword,
                    when_ids=timed, date_ids=dated, links=links, named=named)

    def _topic_candidates(self, search: Searcher, vector: Vector, where: Where,
                          topics: frozenset[str],
                          have: set[str]) -> list[tuple[MemoryRecord, float]]:
        """Memories of the query's topics beyond the nearest ones: extracted facts by
        slot (`intent_k` per topic), facts with an object (like:, dislike: ...) and
        verbatim memories, the nearest `candidate_k` of each, kept if of those topics."""
        recall = self._backend.config.recall
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
                if record.id not in have and topics & topics_of(record):
                    have.add(record.id)
                    out.append((record, sim))
        return out

    # -- versions --------------------------------------------------------------------------
    def current(self, uid: str, min_version: int | None, store: VectorStore) -> int:
        """The user's version, once it is at least `min_version`; reads of a user whose
        version moved since this process last looked go Strong (another process wrote)."""
        backend = self._backend
        events = backend.events
        wanted = None if min_version is None else validate.non_negative_int(
            min_version, "min_version")
        version = events.version(uid)
        if wanted is not None and version < wanted:
            version = self._wait_for(events, uid, wanted)
        if wanted is not None and events.has_pending(uid):
            backend.committer.drain_user(uid)  # apply what the writer queued before reading
        if backend.seen.moved(uid, version):
            store.touch(uid)
        return version

    def _wait_for(self, events: EventLog, uid: str, wanted: int) -> int:
        wait_s = self._backend.config.recall.min_version_wait_s
        deadline = time.monotonic() + wait_s
        version = events.version(uid)
        while version < wanted and time.monotonic() < deadline:
            time.sleep(0.02)
            version = events.version(uid)
        if version < wanted:
            raise StaleReadError(f"memory version {wanted} not reached for this user "
                                 f"(at {version} after {wait_s:g} s)")
        return version


def _timed(query: str, candidates: list[tuple[MemoryRecord, float]]) -> frozenset[str] | None:
    """For a question that asks when, the candidates that place something in time (None:
    it does not ask)."""
    if not when.asks_when(query):
        return None
    return frozenset(r.id for r, _ in candidates if when.anchored(r.content))


def _said_then(plan: SearchPlan, search: Searcher, vector: Vector, spans: list[when.Span],
               k: int, have: list[tuple[MemoryRecord, float]]) -> list[tuple[MemoryRecord, float]]:
    """The `k` nearest memories said on a day of `spans` that are not among `have`: from
    the hot set where it holds the user, else a store search filtered to those days (a
    search `as_of`, a user too big for the hot set, a deployment without one)."""
    zone = plan.now.tzinfo or UTC
    said = None if plan.hot is None else plan.hot.said_in(
        plan.uid, plan.version, vector, spans, zone, k, plan.where)
    if said is None:
        if plan.hot is not None:  # its `search` would load the user to filter row by row
            search = partial(plan.store.search, plan.uid)
        said = search(vector, k, replace(plan.where, said_within_ms=_ranges_ms(spans, plan.now)))
    ids = {r.id for r, _ in have}
    return [(r, sim) for r, sim in said if r.id not in ids]


def _ranges_ms(spans: list[when.Span], now: datetime) -> tuple[tuple[int, int], ...]:
    """The epoch-ms ranges of `spans`' days in `now`'s zone; a month of any year ("in
    June"), in each of the last `_MONTH_YEARS` years."""
    years = range(now.year - _MONTH_YEARS + 1, now.year + 1)
    ranges = sorted({(int(lo * 1000), int(hi * 1000))
                     for span in spans for lo, hi in span.bounds(now.tzinfo or UTC, years)})
    merged: list[tuple[int, int]] = []
    for lo, hi in ranges:  # one filter term per stretch of time, however it was asked
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return tuple(merged)


def _days_said(candidates: list[tuple[MemoryRecord, float]],
               now: datetime) -> dict[str, list[when.Span]]:
    """The days each candidate is about (`when.happened`): the day it was said (its
    message time, else its storing, in `now`'s zone) and those it counts to or names."""
    return {r.id: when.happened(r.content, r.said_at.astimezone(now.tzinfo))
            for r, _ in candidates}


def topics_of(record: MemoryRecord) -> frozenset[str]:
    """The topics of a memory; one stored verbatim is classified from its text."""
    return memory_topics(record.slot or slot_of(record.content), record.content)


def _loader(store: VectorStore, events: EventLog,
            uid: str) -> Callable[[], list[StoredMemory] | None]:
    def load() -> list[StoredMemory] | None:
        if events.has_pending(uid):  # the store is behind the log: do not cache
            return None
        return store.rows(uid, Where(statuses=ACTIVE))

    return load


def _valid_at(search: Searcher, when: datetime) -> Searcher:
    """`search` keeping what was true at `when`. Superseded memories share the candidate
    budget, so it asks for twice as many."""
    def valid(vec: Vector, k: int, where: Where) -> list[tuple[MemoryRecord, float]]:
        return [(r, sim) for r, sim in search(vec, 2 * k, where) if r.valid_at(when)][:k]

    return valid


def _mostly_cjk(text: str) -> bool:
    """Most of `text`'s letters are CJK characters: MiniLM knows some of them (学, 天), so
    a Chinese query and a Chinese memory share what it reads, where an English query and
    a Chinese memory share nothing."""
    letters = [c for c in text if c.isalpha()]
    return sum("\u3400" <= c <= "\u9fff" for c in letters) * 2 > len(letters)


def _unread(plan: SearchPlan, candidates: list[tuple[MemoryRecord, float]],
            recall: RecallConfig) -> frozenset[str]:
    """The candidates whose vectors the model did not read (`ranking.unreadable`), for a
    query it read in another script; from the hot set (none without it: the store returns
    no vectors)."""
    # ASCII text is text the model reads: most searches need no vectors looked up
    foreign = [r.id for r, _ in candidates if not r.content.isascii()]
    if plan.hot is None or not recall.judge_memories or not foreign:
        return frozenset()
    held = plan.hot.vectors(plan.uid, plan.version, foreign)
    if held is None:
        return frozenset()
    ids, rows = held
    return frozenset(i for i, no in zip(ids, unreadable(plan.embedder, rows,
                                                           recall.background_max),
                                        strict=True) if no)


def _searcher(store: VectorStore, events: EventLog, uid: str, hot: HotSet | None,
              version: int) -> Searcher:
    """The user's vector search: from the hot set when one is kept at `version` (the
    user's version read once for the whole search)."""
    if hot is None:
        return lambda vec, k, where: store.search(uid, vec, k, where)
    load = _loader(store, events, uid)

    def search(vec: Vector, k: int, where: Where) -> list[tuple[MemoryRecord, float]]:
        hits = hot.search(uid, version, vec, k, where, load)
        return hits if hits is not None else store.search(uid, vec, k, where)

    return search

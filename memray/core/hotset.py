"""A per-user hot set: one user's active memories and vectors held in process, so recall
is a small matrix product instead of a store round trip.

Coherence comes from the per-user memory version in the event log: an entry is used only
while the version it was loaded at is still current, and the committer drops a user's entry
whenever it changes that user's rows in ways it cannot follow; a write whose ops it sees
is applied to the entry in place (reloading a 10k-memory user costs about 2.4 s on
milvus-lite). Only for stores this process owns (milvus-lite); with
a shared Milvus server, other processes' writes would not be seen here.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import NamedTuple

import numpy as np

from memray.core.entities import Names, may_name
from memray.core.lexical import BM25
from memray.core.turns import adjacency
from memray.core.when import Span
from memray.models import MemoryRecord, MemoryStatus, MemoryType
from memray.store.base import StoredMemory, Vector, Where
from memray.store.events import StoreOp
from memray.store.filters import matches

Hits = list[tuple[MemoryRecord, float]]


class Candidate(NamedTuple):
    record: MemoryRecord
    similarity: float  # cosine to the query
    keyword: float  # BM25, the best row 1
    linked: tuple[str, ...]  # neighbouring turns among the candidates
    named: float  # share of the query's names the row names


def _unit(vector: Vector) -> Vector:
    v = np.asarray(vector, dtype=np.float32)
    out: Vector = v / max(float(np.linalg.norm(v)), 1e-12)
    return out


def _mask(records: Sequence[MemoryRecord], key: tuple[tuple[str, ...], ...]) -> np.ndarray:
    """Which of `records` have the types and slots of `key` (types, slots, slot prefixes)."""
    probe = Where(types=key[0], slots=key[1], slot_prefixes=key[2])
    return np.fromiter((matches(r, r.user_id, probe) for r in records), dtype=bool,
                       count=len(records))


def _said(records: Sequence[MemoryRecord]) -> np.ndarray:
    """When each record was said (its message time, else when it was stored), epoch s."""
    return np.fromiter((int(r.said_at.timestamp()) for r in records),
                       dtype=np.int64, count=len(records))


def _inside(said: np.ndarray, span: Span, zone: tzinfo) -> np.ndarray:
    """Which of the times `said` fall on a day of `span`, days read in `zone`."""
    if span.months:  # a month of any year ("in June"): its days in each year said
        if not len(said):
            return np.zeros(0, dtype=bool)
        years = said.astype("datetime64[s]").astype("datetime64[Y]").astype(np.int64) + 1970
        inside = np.zeros(len(said), dtype=bool)
        for start, end in span.bounds(zone, range(int(years.min()) - 1, int(years.max()) + 2)):
            inside |= (said >= start) & (said < end)
        return inside
    ((start, end),) = span.bounds(zone, range(0))
    return (said >= start) & (said < end)


def best_first(scores: np.ndarray, want: int, *, above: float | None = None) -> Iterator[int]:
    """Row indices by descending score, ties by index (a stable argsort's order), read
    lazily: the best `4 * want` rows are sorted first and more only if the caller reads on
    (its filter rejects rows). With `above`, only rows scoring more than it."""
    rows = np.flatnonzero(scores > above) if above is not None else np.arange(len(scores))
    done, k = 0, max(4 * want, 16)
    while done < len(rows):
        if k >= len(rows):
            top = rows
        else:  # every row at least as good as the k-th: a prefix of the full order
            kth = np.partition(scores[rows], len(rows) - k)[len(rows) - k]
            top = rows[scores[rows] >= kth]
        top = top[np.lexsort((top, -scores[top]))]
        yield from (int(i) for i in top[done:])
        done, k = len(top), k * 4


@dataclass
class _Entry:
    version: int
    records: list[MemoryRecord]
    matrix: np.ndarray  # unit rows, float32
    _lexical: BM25 | None = None  # built on the first keyword search
    _links: list[tuple[int, ...]] | None = None  # built on the first neighbour search
    _names: Names | None = None  # built on the first search by names
    # rows of each type/slot narrowing asked (by _topic_candidates), built on first use
    _narrowed: dict[tuple[tuple[str, ...], ...], np.ndarray] = field(default_factory=dict)
    _said: np.ndarray | None = None  # when each row was said (see _said), on first use
    _index: dict[str, int] | None = None  # row of each id, on first use

    def rows_of(self, ids: Collection[str]) -> tuple[list[str], np.ndarray]:
        """The ids among `ids` held here, and their unit vectors (rows in that order)."""
        if self._index is None:
            self._index = {r.id: i for i, r in enumerate(self.records)}
        held = [i for i in ids if i in self._index]
        return held, self.matrix[[self._index[i] for i in held]]

    def keyword_scores(self, query: str) -> np.ndarray:
        """BM25 of every row for `query`, scaled so the best row is 1 (all 0: no match)."""
        if self._lexical is None:
            self._lexical = BM25([r.index_text for r in self.records])
        raw = self._lexical.scores(query)
        top = float(raw.max()) if len(raw) else 0.0
        return raw / top if top > 0 else raw

    def hybrid(self, user_id: str, vector: Vector, query: str, limit: int, where: Where,
               around: int = 0, names: bool = False) -> list[Candidate]:
        """The `limit` best rows by cosine and the `limit` best by keywords, among rows
        that satisfy `where`; with `names`, also the `limit` best by cosine among the rows
        that name a name of the query (core/entities.py), and each row's share of those
        names; with `around`, also the neighbouring turns (core/turns.py) of the `around`
        best by cosine. Linked ids: the candidate's neighbours among the candidates (only
        with `around`)."""
        if not self.records:
            return []
        q = np.asarray(vector, dtype=np.float32)
        sims = self.matrix @ (q / max(float(np.linalg.norm(q)), 1e-12))
        lex = self.keyword_scores(query)
        named = self.named(query) if names else np.zeros(len(self.records), np.float32)
        orders = [best_first(sims, limit), best_first(lex, limit, above=0.0)]
        if named.any():  # the nearest among the rows that name one (others are -inf)
            orders.append(best_first(np.where(named > 0, sims, -np.inf), limit, above=-2.0))
        picked: dict[int, None] = {}
        # Rows without a query word are no keyword candidates (they would come in by row order).
        for order in orders:
            taken = 0
            for i in order:
                if taken == limit:
                    break
                if matches(self.records[i], user_id, where):
                    picked[int(i)] = None
                    taken += 1
        links = self.links() if around else None
        if links is not None:
            for i in sorted(picked, key=lambda i: -sims[i])[:around]:
                for j in links[i]:
                    if j not in picked and matches(self.records[j], user_id, where):
                        picked[j] = None
        return [Candidate(self.records[i], float(sims[i]), float(lex[i]),
                          () if links is None else tuple(self.records[j].id for j in links[i]
                                                         if j in picked),
                          float(named[i]))
                for i in picked]

    def named(self, query: str) -> np.ndarray:
        """Each row's share of the names `query` names (all 0: it names none)."""
        if not may_name(query):  # most English queries: no index to build
            return np.zeros(len(self.records), dtype=np.float32)
        if self._names is None:
            self._names = Names([r.content for r in self.records],
                                [r.type == MemoryType.MESSAGE for r in self.records])
        return self._names.share(self._names.named(query), len(self.records))

    def links(self) -> list[tuple[int, ...]]:
        """Each row's neighbouring turns (core/turns.py), built on first use."""
        if self._links is None:
            self._links = adjacency(self.records)
        return self._links

    def patched(self, ops: Sequence[StoreOp], version: int) -> _Entry:
        """A copy with `ops` applied: replaced rows swapped in (active ones only), deleted
        rows removed."""
        gone = {i for op in ops for i in op.ids}
        gone |= {r.record.id for op in ops for r in op.rows}
        fresh = [r for op in ops for r in op.rows if r.record.status == MemoryStatus.ACTIVE]
        keep = [i for i, rec in enumerate(self.records) if rec.id not in gone]
        added = [r.record for r in fresh]
        records = [self.records[i] for i in keep] + added
        rows = [_unit(r.vector) for r in fresh]
        matrix = np.vstack([self.matrix[keep], *rows]) if rows else self.matrix[keep]
        # The keyword and name indexes follow the write: rebuilt, they would cost the next
        # search ~0.5 s at 10k memories (tokenizing every row again).
        lexical = None if self._lexical is None else self._lexical.patched(
            keep, [r.index_text for r in added])
        names = None if self._names is None else self._names.patched(
            keep, [r.content for r in added],
            [r.content for r in self.records if r.id in gone],
            [r.type == MemoryType.MESSAGE for r in added])
        # copied first: searches add masks to it without the hot set's lock
        narrowed = {key: np.concatenate([rows[keep], _mask(added, key)])
                    for key, rows in dict(self._narrowed).items()}
        said = None if self._said is None else np.concatenate([self._said[keep],
                                                                _said(added)])
        return _Entry(version, records, matrix.astype(np.float32, copy=False),
                      _lexical=lexical, _names=names, _narrowed=narrowed, _said=said)

    def said_in(self, user_id: str, vector: Vector, spans: Sequence[Span], zone: tzinfo,
                limit: int, where: Where) -> Hits:
        """The `limit` nearest rows that satisfy `where` among those said on a day of
        `spans`, days read in `zone`."""
        if not self.records:
            return []
        if self._said is None:
            self._said = _said(self.records)
        inside = np.zeros(len(self.records), dtype=bool)
        for span in spans:
            inside |= _inside(self._said, span, zone)
        rows = np.flatnonzero(inside)  # few: only theirs are scored
        q = np.asarray(vector, dtype=np.float32)
        sims = self.matrix[rows] @ (q / max(float(np.linalg.norm(q)), 1e-12))
        return self._kept(((int(rows[j]), float(sims[j])) for j in best_first(sims, limit)),
                          user_id, limit, where)

    def _kept(self, order: Iterator[tuple[int, float]], user_id: str, limit: int,
              where: Where) -> Hits:
        """The first `limit` rows of `order` (row, similarity) that satisfy `where`."""
        out: Hits = []
        for i, sim in order:
            if matches(self.records[i], user_id, where):
                out.append((self.records[i], sim))
                if len(out) == limit:
                    break
        return out

    def narrowed(self, where: Where) -> np.ndarray | None:
        """The rows whose type and slot satisfy `where` (None: it asks for neither). Without
        it, a search for a type or slot few rows have reads `matches` for every row (the
        topic asks of a 10k-turn user: ~20 ms each)."""
        if not (where.types or where.slots or where.slot_prefixes):
            return None
        key = (where.types, where.slots, where.slot_prefixes)
        rows = self._narrowed.get(key)
        if rows is None:
            rows = self._narrowed[key] = _mask(self.records, key)
        return rows

    def search(self, user_id: str, vector: Vector, limit: int, where: Where) -> Hits:
        """Exact cosine top-`limit` among rows that satisfy `where`."""
        if not self.records:
            return []
        q = np.asarray(vector, dtype=np.float32)
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        sims = self.matrix @ q
        rows = self.narrowed(where)
        order = best_first(sims, limit) if rows is None else best_first(
            np.where(rows, sims, -np.inf), limit, above=-2.0)
        return self._kept(((i, float(sims[i])) for i in order), user_id, limit, where)


class HotSet:
    """LRU over users; a user's set is loaded whole (at most `max_rows` rows, else not held,
    and not read again for `oversize_retry_s`)."""

    def __init__(self, *, dim: int, max_users: int = 64, max_rows: int = 100_000,
                 oversize_retry_s: float = 300.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._dim = dim
        self._max_users, self._max_rows = max_users, max_rows
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._generation: dict[str, int] = {}
        # Users found too big to hold, and when: each search of theirs would otherwise
        # read all their rows only to throw them away. Tried again after
        # `oversize_retry_s` (deletes may have shrunk them) or when their rows are dropped.
        self._oversize: dict[str, float] = {}
        self._retry_s, self._clock = oversize_retry_s, clock
        self._lock = threading.Lock()
        self.loads = 0  # how often a user's set was read from the store

    @property
    def held(self) -> int:
        """Users held now."""
        with self._lock:
            return len(self._entries)

    def changed(self, user_id: str) -> None:
        """Drop the user's entry (it is reloaded on the next search)."""
        with self._lock:
            self._entries.pop(user_id, None)
            self._oversize.pop(user_id, None)
            self._generation[user_id] = self._generation.get(user_id, 0) + 1

    def applied(self, user_id: str, ops: Sequence[StoreOp], before: int, after: int) -> None:
        """Apply a write's ops to an entry that is exactly at version `before`, so a large
        user's set is not reloaded after every write; anything else drops the entry."""
        with self._lock:
            entry = self._entries.get(user_id)
            self._generation[user_id] = self._generation.get(user_id, 0) + 1
            if any(op.kind == "delete_user" for op in ops):
                self._oversize.pop(user_id, None)
            if entry is None:
                return
            if entry.version != before or any(op.kind == "delete_user" for op in ops):
                del self._entries[user_id]
                return
            self._entries[user_id] = entry.patched(ops, after)

    def holding(self, user_id: str, ids: Collection[str] | None = None) -> int:
        """How many of the user's rows this hot set holds (of `ids`; None: all of them):
        what a deletion receipt checks."""
        with self._lock:
            entry = self._entries.get(user_id)
            if entry is None:
                return 0
            if ids is None:
                return len(entry.records)
            return sum(1 for r in entry.records if r.id in ids)

    def query(self, user_id: str, version: int, where: Where) -> list[MemoryRecord] | None:
        """The held rows that satisfy `where` (active ones only: the set holds no others),
        or None when no set is held at `version`. Never loads one: a write asks this, and
        a write alone is no reason to read a user's rows."""
        entry = self._get(user_id, version)
        return None if entry is None else [r for r in entry.records
                                           if matches(r, user_id, where)]

    def search(self, user_id: str, version: int, vector: Vector, limit: int, where: Where,
               load: Callable[[], list[StoredMemory] | None]) -> Hits | None:
        """Hits from the hot set, or None when the user's set cannot be held."""
        entry = self._entry(user_id, version, load)
        return None if entry is None else entry.search(user_id, vector, limit, where)

    def hybrid(self, user_id: str, version: int, vector: Vector, query: str, limit: int,
               where: Where, load: Callable[[], list[StoredMemory] | None],
               around: int = 0, names: bool = False) -> list[Candidate] | None:
        """Dense and keyword candidates (see `_Entry.hybrid`), or None when not held."""
        entry = self._entry(user_id, version, load)
        return None if entry is None else entry.hybrid(user_id, vector, query, limit, where,
                                                       around, names)

    def vectors(self, user_id: str, version: int,
                ids: Collection[str]) -> tuple[list[str], np.ndarray] | None:
        """See `_Entry.rows_of`; None when no set is held at `version` (never loads one)."""
        entry = self._get(user_id, version)
        return None if entry is None else entry.rows_of(ids)

    def said_in(self, user_id: str, version: int, vector: Vector, spans: Sequence[Span],
                zone: tzinfo, limit: int, where: Where) -> Hits | None:
        """See `_Entry.said_in`; None when no set is held at `version` (never loads one:
        it follows a hybrid search that did)."""
        entry = self._get(user_id, version)
        return None if entry is None else entry.said_in(user_id, vector, spans, zone, limit,
                                                        where)

    def _entry(self, user_id: str, version: int,
               load: Callable[[], list[StoredMemory] | None]) -> _Entry | None:
        entry = self._get(user_id, version)
        return entry if entry is not None else self._load(user_id, version, load)

    def _get(self, user_id: str, version: int) -> _Entry | None:
        with self._lock:
            entry = self._entries.get(user_id)
            if entry is None or entry.version != version:
                return None
            self._entries.move_to_end(user_id)
            return entry

    def _load(self, user_id: str, version: int,
              load: Callable[[], list[StoredMemory] | None]) -> _Entry | None:
        with self._lock:
            generation = self._generation.get(user_id, 0)
            since = self._oversize.get(user_id)
            if since is not None and self._clock() - since < self._retry_s:
                return None
        rows = load()
        self.loads += 1
        if rows is not None:
            with self._lock:
                if len(rows) > self._max_rows:
                    self._oversize[user_id] = self._clock()
                else:
                    self._oversize.pop(user_id, None)
        if rows is None or len(rows) > self._max_rows:
            return None
        matrix = np.zeros((len(rows), self._dim), dtype=np.float32)
        for i, row in enumerate(rows):
            matrix[i] = _unit(row.vector)
        entry = _Entry(version, [r.record for r in rows], matrix)
        with self._lock:
            if self._generation.get(user_id, 0) != generation:
                return entry  # changed while loading: answer from it once, do not keep it
            self._entries[user_id] = entry
            self._entries.move_to_end(user_id)
            while len(self._entries) > self._max_users:
                self._entries.popitem(last=False)
        return entry

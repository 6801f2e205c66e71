"""`MemrayStore`: a LangGraph `BaseStore` over a memray `Memory`, so a graph compiled
with `store=MemrayStore(memory)` keeps its long-term items in memray (per-user
partitions, the event log, deletions that stay deleted) and recalls them with memray's
ranking.

Namespaces map to memray users (and, optionally, agents) by a template given once:

    MemrayStore(memory)                                      # ("memories", "{user_id}")
    MemrayStore(memory, namespace=("{user_id}",))
    MemrayStore(memory, namespace=("memories", "{user_id}", "{agent_id}"))

A namespace matches when it starts with the template: literal labels equal, `{user_id}`
(required) and `{agent_id}` (optional) take the label at their place, and any labels
after the template are a sub-namespace kept with the item (("memories", "u1", "prefs")
is user "u1", sub-namespace ("prefs",)). Anything else raises `InvalidNamespaceError`
saying what was expected. Every operation stays inside the one user its namespace names:
a search needs a prefix at least as long as the template; only `list_namespaces` may
span users (it reads every user's items: the application that holds a `Memory` is
trusted with all its users).

Each item is one memory: its id is fixed by (namespace, key); `metadata["langgraph"]`
holds the namespace, the key and the value (so a value round-trips exactly, up to
memray's 16 KiB metadata limit); the memory's content, the text that is embedded and
recalled, is taken from `text_fields` (LangGraph's `index` paths; default: the value's
`content`, `text` or `memory` string, else the whole value as JSON), cut to
`max_content_chars`. Items carry session_id "langgraph-store" (how searches find items
among the user's other memories) and are pinned: the nightly job never decays or merges
them. Values are stored as given: memray's PII redaction applies to what it extracts,
not to an application's own items.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)

from memray.core import validate
from memray.core.changes import ChangeSet
from memray.core.engine import Engine
from memray.core.ids import stable_id
from memray.core.lookup import committed_query
from memray.core.memory import Memory
from memray.core.records import new_record
from memray.errors import ConfigError, InvalidInputError, MemoryNotFoundError
from memray.maintain.plan import PINNED
from memray.models import (
    MemoryRecord,
    MemorySource,
    MemoryStatus,
    MemoryType,
    utcnow,
)
from memray.store.base import Where
from memray.store.rows import to_ms

SESSION = "langgraph-store"
META = "langgraph"
USER, AGENT = "{user_id}", "{agent_id}"
_DEFAULT_TEXT = ("content", "text", "memory")
_MAX_TOP_K = 1024  # Memory.search's cap


@dataclass(frozen=True)
class _Place:
    """Where a namespace points: a user, maybe an agent, and the full namespace."""

    user_id: str
    agent_id: str | None
    namespace: tuple[str, ...]


class MemrayStore(BaseStore):
    """A LangGraph store whose items are memories of a memray `Memory` (see the module
    docstring for the namespace mapping). Opens nothing itself: `memory` is opened on
    first use and closed by its owner. TTLs are not supported (`supports_ttl` False)."""

    def __init__(self, memory: Memory, *, namespace: Sequence[str] = ("memories", USER),
                 text_fields: Sequence[str] | None = None,
                 memory_type: MemoryType = MemoryType.MESSAGE) -> None:
        """`text_fields`: value paths whose text is embedded (LangGraph's `index` syntax;
        "$" the whole value); `memory_type`: the type items are stored as (a verbatim
        "message" by default: its kind of fact is read from its text, as for any
        verbatim memory)."""
        template = tuple(namespace)
        if template.count(USER) != 1 or template.count(AGENT) > 1 or any(
                not isinstance(label, str) or not label for label in template):
            raise ConfigError(f"namespace template {template!r} needs exactly one "
                              f"{USER!r}, at most one {AGENT!r}, and non-empty labels")
        self._memory, self._template = memory, template
        self._fields = None if text_fields is None else [
            (f, tokenize_path(f)) for f in text_fields]
        self._type = memory_type
        self._when: datetime | None = None

    def as_of(self, when: datetime | str) -> MemrayStore:
        """A read-only view of the items as they were at `when` (an aware datetime or ISO
        string): an item's value then, from its history; items put later, or deleted
        since (deletion purges history), are absent. Searches rank by today's text."""
        view = copy.copy(self)
        view._when = validate.moment(when, "as_of")
        return view

    # -- the BaseStore contract ----------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run `ops` in order (consecutive puts are written together, per user in one
        commit, the last put of a (namespace, key) winning); one result per op."""
        results: list[Result] = []
        puts: list[PutOp] = []
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, PutOp) and self._when is not None:
                raise InvalidInputError("an as_of view of the store is read-only")
            if isinstance(op, PutOp):
                puts.append(op)
                results.append(None)
                continue
            self._put_all(puts)
            puts = []
            results.append(self._run(op))
        self._put_all(puts)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """`batch` in a worker thread (memray's calls block)."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise TypeError(f"unknown store operation {type(op).__name__}")

    # -- namespaces ----------------------------------------------------------------------
    def _place(self, namespace: tuple[str, ...]) -> _Place:
        """The user (and agent) a namespace names; InvalidNamespaceError if none."""
        if len(namespace) < len(self._template) or namespace[:1] == ("langgraph",):
            raise self._unmapped(namespace)
        found: dict[str, str] = {}
        for label, want in zip(namespace, self._template, strict=False):
            if want in (USER, AGENT):
                found[want] = label
            elif label != want:
                raise self._unmapped(namespace)
        try:
            uid = validate.user_id(found[USER])
        except InvalidInputError as exc:
            raise InvalidNamespaceError(f"namespace {namespace!r}: {exc}") from exc
        return _Place(uid, found.get(AGENT), tuple(namespace))

    def _unmapped(self, namespace: tuple[str, ...]) -> InvalidNamespaceError:
        return InvalidNamespaceError(
            f"namespace {namespace!r} does not map to a memray user: this store expects "
            f"{self._template!r} followed by any sub-namespace labels (a search needs at "
            f"least the user's own namespace; searches across users are not supported)")

    # -- get -----------------------------------------------------------------------------
    def _get(self, op: GetOp) -> Item | None:
        place = self._place(op.namespace)
        record = self._then(self._memory.get(_item_id(place.namespace, op.key),
                                             user_id=place.user_id))
        if record is None or not _live(record, self._when) \
                or _where(record) != (place.namespace, op.key):
            return None
        namespace, key = _where(record)
        return Item(namespace=namespace, key=key, value=_value(record),
                    created_at=record.created_at, updated_at=record.updated_at)

    # -- put and delete ------------------------------------------------------------------
    def _put_all(self, puts: list[PutOp]) -> None:
        last = {(op.namespace, op.key): op for op in puts}
        for (namespace, key), op in last.items():
            if op.ttl is not None:
                raise NotImplementedError("TTL is not supported by MemrayStore; set ttl=None")
            if op.value is None:
                self._delete(self._place(namespace), key)
        by_user: dict[str, list[tuple[_Place, PutOp]]] = {}
        for (namespace, _), op in last.items():
            if op.value is not None:
                place = self._place(namespace)
                by_user.setdefault(place.user_id, []).append((place, op))
        for uid, items in by_user.items():
            self._write(uid, items)

    def _delete(self, place: _Place, key: str) -> None:
        try:
            self._memory.delete(_item_id(place.namespace, key), user_id=place.user_id)
        except MemoryNotFoundError:
            return  # LangGraph: deleting a missing item is not an error

    def _write(self, uid: str, items: list[tuple[_Place, PutOp]]) -> None:
        """One user's puts: embedded together, then one change set."""
        limit = self._memory.config.max_content_chars
        prepared = [(place, op, self._text(op)[:limit]) for place, op in items]

        def build(engine: Engine) -> ChangeSet:
            now, changes = utcnow(), ChangeSet(uid)
            ids = tuple(_item_id(p.namespace, op.key) for p, op, _ in prepared)
            old = {r.id: r for r in committed_query(engine.store, engine.events, uid,
                                                    Where(ids=ids))}
            todo = [(place, op, text, mid) for (place, op, text), mid
                    in zip(prepared, ids, strict=True)
                    if not _unchanged(old.get(mid), _meta(place, op), text)]
            if not todo:
                return changes
            vectors = engine.embedder.embed([text for *_, text, _ in todo])
            for (place, op, text, mid), vector in zip(todo, vectors, strict=True):
                record = self._record(place, op, text, mid, old.get(mid),
                                      engine.embedder.model, now)
                changes.put(record, vector, old.get(mid), now, "langgraph store put")
            return changes

        self._memory.write_changes(uid, build)

    def _record(self, place: _Place, op: PutOp, text: str, mid: str,
                old: MemoryRecord | None, model: str, now: datetime) -> MemoryRecord:
        return new_record(
            id=mid, user_id=place.user_id, content=text, embedding_model=model, at=now,
            type=self._type, agent_id=place.agent_id, session_id=SESSION,
            source=MemorySource.INFERRED, created_at=old.created_at if old else now,
            metadata=_meta(place, op))

    def _text(self, op: PutOp) -> str:
        """The text of a value that is embedded: `op.index` paths, else the store's."""
        assert op.value is not None
        value = dict(op.value)
        fields = self._fields if op.index is None or op.index is False else [
            (f, tokenize_path(f)) for f in op.index]
        if fields is None:
            found = [value[k] for k in _DEFAULT_TEXT if isinstance(value.get(k), str)
                     and value[k].strip()]
            texts = found[:1]
        else:
            texts = [t for _, path in fields for t in get_text_at_path(value, path)]
        text = "\n".join(t for t in texts if t.strip())
        return text if text.strip() else json.dumps(value, ensure_ascii=False, sort_keys=True)

    # -- search --------------------------------------------------------------------------
    def _search(self, op: SearchOp) -> list[SearchItem]:
        place = self._place(op.namespace_prefix)
        want = max(op.offset, 0) + max(op.limit, 0)
        if want == 0:
            return []
        narrowed = bool(op.filter) or len(place.namespace) > len(self._template)
        if op.query and op.query.strip():
            found = self._ranked(place, op.query, _MAX_TOP_K if narrowed else want)
        else:
            found = [(r, None) for r in self._listed(place)]
        then = [(self._then(r), score) for r, score in found]
        kept = [(r, score) for r, score in then
                if r is not None and _under(r, place.namespace)
                and _matches(_value(r), op.filter)]
        return [_item(r, score) for r, score in kept[op.offset:op.offset + op.limit]]

    def _then(self, record: MemoryRecord | None) -> MemoryRecord | None:
        """The item as it was at the view's time (as it is now, outside a view)."""
        if record is None or self._when is None:
            return record
        when = self._when
        versions = [e.memory for e in self._memory.history(record.id, user_id=record.user_id)
                    if e.at <= when and e.op != "DELETE" and e.memory is not None]
        return versions[-1] if versions else None

    def _scope(self, place: _Place) -> dict[str, str]:
        scope = {"session_id": SESSION}
        if place.agent_id is not None:
            scope["agent_id"] = place.agent_id
        return scope

    def _ranked(self, place: _Place, query: str,
                k: int) -> list[tuple[MemoryRecord, float | None]]:
        """Ranked by memray's recall (similarity, keywords, topics, importance, recency),
        every item a candidate (no relevance cut: LangGraph returns the top k)."""
        hits = self._memory.search(query, user_id=place.user_id, top_k=min(k, _MAX_TOP_K),
                                   filters=self._scope(place), threshold=-1.0,
                                   as_of=self._when)
        return [(h.memory, h.score) for h in hits if _item_of(h.memory)]

    def _listed(self, place: _Place) -> list[MemoryRecord]:
        """Without a query: the namespace's items, most recently updated first."""
        store = self._memory.engine().store
        records = store.query(place.user_id, Where(statuses=(MemoryStatus.ACTIVE.value,),
                                                   alive_at_ms=to_ms(utcnow()),
                                                   session_id=SESSION, agent_id=place.agent_id))
        return sorted((r for r in records if _item_of(r)),
                      key=lambda r: (r.updated_at, r.id), reverse=True)

    # -- list_namespaces -----------------------------------------------------------------
    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = op.match_conditions or ()
        found: set[tuple[str, ...]] = set()
        store = self._memory.engine().store
        where = Where(statuses=(MemoryStatus.ACTIVE.value,), alive_at_ms=to_ms(utcnow()),
                      session_id=SESSION)
        for uid in self._users(conditions, store.user_ids):
            found.update(ns for r in store.query(uid, where)
                         if (ns := _where(r)[0]) and all(_does_match(c, ns)
                                                         for c in conditions))
        spaces = sorted({ns[:op.max_depth] for ns in found} if op.max_depth is not None
                        else found)
        return spaces[op.offset:op.offset + op.limit]

    def _users(self, conditions: Sequence[MatchCondition],
               everyone: Callable[[], list[str]]) -> list[str]:
        """The one user a prefix condition names, else every user of the store."""
        at = self._template.index(USER)
        for c in conditions:
            if c.match_type == "prefix" and len(c.path) > at and c.path[at] != "*":
                return [validate.user_id(c.path[at])]
        users: list[str] = everyone()
        return users


def _item_id(namespace: tuple[str, ...], key: str) -> str:
    """The memory id of an item, fixed by where it is (time 0: ids say nothing of when)."""
    return stable_id(0, META, json.dumps([list(namespace), key], ensure_ascii=False))


def _meta(place: _Place, op: PutOp) -> dict[str, Any]:
    """What an item's memory keeps of it: where it is and its value, pinned (its
    application decides when it goes, never the nightly merge)."""
    assert op.value is not None
    return validate.metadata({META: {"namespace": list(place.namespace), "key": op.key,
                                     "value": dict(op.value)}, PINNED: True})


def _unchanged(old: MemoryRecord | None, meta: dict[str, Any], text: str) -> bool:
    """The same value put again: nothing to write."""
    return old is not None and _live(old) and old.metadata == meta and old.content == text


def _item_of(record: MemoryRecord) -> bool:
    return isinstance(record.metadata.get(META), dict)


def _live(record: MemoryRecord, when: datetime | None = None) -> bool:
    expires = record.expires_at
    return record.status == MemoryStatus.ACTIVE and (expires is None
                                                     or expires > (when or utcnow()))


def _where(record: MemoryRecord) -> tuple[tuple[str, ...], str]:
    """(namespace, key) of an item; ((), "") for any other memory."""
    meta = record.metadata.get(META)
    if not isinstance(meta, dict):
        return (), ""
    return tuple(meta.get("namespace", ())), str(meta.get("key", ""))


def _value(record: MemoryRecord) -> dict[str, Any]:
    meta = record.metadata.get(META)
    value = meta.get("value") if isinstance(meta, dict) else None
    return value if isinstance(value, dict) else {}


def _item(record: MemoryRecord, score: float | None = None) -> SearchItem:
    namespace, key = _where(record)
    return SearchItem(namespace=namespace, key=key, value=_value(record),
                      created_at=record.created_at, updated_at=record.updated_at, score=score)


def _under(record: MemoryRecord, prefix: tuple[str, ...]) -> bool:
    return _where(record)[0][:len(prefix)] == prefix


def _does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """A prefix or suffix condition, "*" matching any one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[:len(path)] if condition.match_type == "prefix" else \
        namespace[len(namespace) - len(path):]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True))


def _matches(value: Mapping[str, Any], filters: Mapping[str, Any] | None) -> bool:
    """LangGraph's filter: each key equals (nested dicts and lists compared within), or
    a dict of operators $eq, $ne, $gt, $gte, $lt, $lte."""
    return all(_compare(value.get(k), want) for k, want in (filters or {}).items())


def _compare(have: Any, want: Any) -> bool:
    if isinstance(want, Mapping):
        if any(str(k).startswith("$") for k in want):
            return all(_operator(have, op, arg) for op, arg in want.items())
        return isinstance(have, Mapping) and all(_compare(have.get(k), v)
                                                 for k, v in want.items())
    if isinstance(want, list | tuple):
        return (isinstance(have, list | tuple) and len(have) == len(want)
                and all(_compare(h, w) for h, w in zip(have, want, strict=True)))
    return bool(have == want)


def _operator(have: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool(have == arg)
    if op == "$ne":
        return bool(have != arg)
    if op not in ("$gt", "$gte", "$lt", "$lte"):
        raise ValueError(f"unsupported filter operator {op!r}")
    try:
        a, b = float(have), float(arg)
    except (TypeError, ValueError):
        return False
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]

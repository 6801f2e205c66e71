"""A mem0-compatible `Memory` over memray: switch by changing the import.

    from memray.compat.mem0 import Memory     # was: from mem0 import Memory
    m = Memory()                              # or Memory(memray_memory), .from_config(...)
    m.add("I'm allergic to peanuts", user_id="lin")   # {"results": [{"id", "memory", ...}]}
    m.search("snacks?", filters={"user_id": "lin"})   # {"results": [{..., "score"}]}

Signatures and return shapes follow mem0 OSS 2.2.1 (`mem0/memory/main.py`); the 1.x forms
(`user_id=` on search/get_all, `limit=`, `update(memory_id, data)`) are accepted as well.
What differs, and why, is listed in the README ("mem0 compatibility"); in short:

- every memory belongs to one user, so `user_id` is required (agent- or run-only memories
  do not exist); `run_id` maps to memray's `session_id`;
- ids are `"<user_id>:<memray id>"`, so `get/update/delete/history(memory_id)` know the
  user without a lookup across users; a bare memray id needs `user_id=`;
- filters are memray's (`agent_id`, `run_id`, `type`, `created_after`, `created_before`,
  `min_importance`), not mem0's metadata operators; anything else is an error;
- `infer=True` runs memray's extraction at once (mem0 extracts on every add too).

The response builders here are shared with the REST routes (`memray.api.mem0_routes`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from memray.config import MemoryConfig
from memray.core.ids import is_memory_id
from memray.core.memory import Memory as CoreMemory
from memray.errors import InvalidInputError, MemoryNotFoundError
from memray.models import DeletionReceipt, MemoryEvent, MemoryRecord, MemoryStatus, SearchHit

T = TypeVar("T")

__all__ = ["Mem0NotFoundError", "Memory", "public_id", "split_id"]

ID_SEP = ":"
_HISTORY_NS = uuid.UUID("6f1d3a52-8a57-4a43-9c39-6b1f0f6d1e11")
_FILTER_KEYS = {"user_id", "agent_id", "run_id", "type", "created_after", "created_before",
                "min_importance"}
_PAGE = 1000


class Mem0NotFoundError(MemoryNotFoundError, ValueError):
    """No such memory for this user. Also a ValueError, which is what mem0 raises."""


def public_id(user_id: str, memory_id: str) -> str:
    """The id this surface hands out: `"<user_id>:<memray memory id>"`."""
    return f"{user_id}{ID_SEP}{memory_id}"


def split_id(value: object, user_id: str | None = None) -> tuple[str, str]:
    """(user_id, memray id) of an id from `public_id`, or of a bare memray id when `user_id`
    is given. InvalidInputError for anything else; a compat id naming another user than
    `user_id` is refused the same way."""
    if not isinstance(value, str):
        raise InvalidInputError(f"memory_id must be a string, got {type(value).__name__}")
    owner, sep, mid = value.rpartition(ID_SEP)
    if sep and owner and is_memory_id(mid):
        if user_id is not None and owner != user_id:
            raise InvalidInputError("memory_id belongs to another user_id than the one given")
        return owner, mid
    if user_id is not None and is_memory_id(value):
        return user_id, value
    raise InvalidInputError(f"not a memory id of this API: {value[:80]!r} (expected "
                            f"'<user_id>{ID_SEP}<uuid>' as returned by add/search/get_all)")


def memory_item(record: MemoryRecord, score: float | None = None) -> dict[str, Any]:
    """A memory as mem0 returns it (`MemoryItem` fields plus the promoted ids)."""
    item: dict[str, Any] = {
        "id": public_id(record.user_id, record.id), "memory": record.content,
        "hash": record.content_hash, "metadata": record.metadata or None,
        "categories": [record.type.value],
        "created_at": record.created_at.isoformat(), "updated_at": record.updated_at.isoformat(),
        "expiration_date": record.expires_at.date().isoformat() if record.expires_at else None,
        "user_id": record.user_id,
    }
    if record.agent_id is not None:
        item["agent_id"] = record.agent_id
    if record.session_id is not None:
        item["run_id"] = record.session_id
    if score is not None:
        item["score"] = score
    return item


def hit_item(hit: SearchHit) -> dict[str, Any]:
    """A search result: `score` is the cosine similarity (memray's ranking decides order)."""
    return memory_item(hit.memory, score=round(hit.similarity, 6))


def event_item(event: MemoryEvent) -> dict[str, Any]:
    """One entry of `add`'s results: id, memory, event (ADD / UPDATE / DELETE)."""
    record = event.memory or event.previous
    content = record.content if record is not None else ""
    out: dict[str, Any] = {"id": public_id(event.user_id, event.memory_id), "memory": content,
                           "event": event.op, "data": {"memory": content}}
    if event.op == "UPDATE" and event.previous is not None:
        out["previous_memory"] = event.previous.content
    return out


def history_item(event: MemoryEvent, index: int) -> dict[str, Any]:
    """One history entry in mem0's shape (id, memory_id, old_memory, new_memory, event ...)."""
    old = event.previous.content if event.previous is not None else None
    new = event.memory.content if event.memory is not None else None
    return {"id": str(uuid.uuid5(_HISTORY_NS, f"{event.memory_id}/{index}")),
            "memory_id": public_id(event.user_id, event.memory_id), "old_memory": old,
            "new_memory": new, "event": event.op, "created_at": event.at.isoformat(),
            "updated_at": None, "is_deleted": event.op == "DELETE", "actor_id": None,
            "role": None, "user_id": event.user_id}


def scope_of(filters: dict[str, Any] | None, user_id: str | None = None,
             agent_id: str | None = None, run_id: str | None = None,
             ) -> tuple[str, dict[str, Any]]:
    """(user_id, memray search filters) from mem0's `filters` and the 1.x top-level ids.
    InvalidInputError without a user_id, or for a filter memray cannot apply."""
    given = dict(filters or {})
    unknown = set(given) - _FILTER_KEYS
    if unknown:
        raise InvalidInputError(f"unsupported filter keys {sorted(unknown)}; memray applies "
                                f"{sorted(_FILTER_KEYS)} (no metadata or AND/OR operators)")
    for key, value in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id)):
        if value is not None:
            if given.get(key, value) != value:
                raise InvalidInputError(f"{key} given twice with different values")
            given[key] = value
    uid = given.pop("user_id", None)
    if uid is None:
        raise InvalidInputError("memray scopes every memory to a user: give filters="
                                "{'user_id': ...} (or user_id=)")
    if "run_id" in given:
        given["session_id"] = given.pop("run_id")
    return uid, given


def _messages(messages: object) -> str | list[dict[str, Any]]:
    if isinstance(messages, str):
        return messages
    items = [messages] if isinstance(messages, dict) else messages
    if not isinstance(items, list) or not all(isinstance(m, dict) for m in items):
        raise InvalidInputError("messages must be str, dict, or list[dict]")
    return [{k: m[k] for k in ("role", "content", "name") if m.get(k) is not None}
            for m in items]


def _matches(record: MemoryRecord, wanted: dict[str, Any]) -> bool:
    return all(getattr(record, key) == value for key, value in wanted.items())


def _refuse(**options: Any) -> None:
    given = sorted(name for name, value in options.items() if value is not None)
    if given:
        raise InvalidInputError(f"not supported by memray: {', '.join(given)}")


class Memory:
    """mem0's `Memory` API over a memray `Memory` (injected, or built from `config`).

    Nothing is opened in the constructor; `close()` (or `with`) closes a memray `Memory`
    this object built, never an injected one. Errors are memray's (`InvalidInputError`
    is a ValueError, as mem0's validation errors are); a missing memory raises
    `Mem0NotFoundError`, both a KeyError and a ValueError.
    """

    def __init__(self, memory: CoreMemory | None = None, *,
                 config: MemoryConfig | None = None) -> None:
        if memory is not None and config is not None:
            raise InvalidInputError("give a memray Memory or a config, not both")
        self._owned = memory is None
        self._memory = memory if memory is not None else CoreMemory(config)

    @classmethod
    def from_config(cls, config: MemoryConfig | dict[str, Any] | str | Path) -> Memory:
        """From a memray config (model, dict or YAML path); mem0 config dicts do not apply."""
        return cls(CoreMemory.from_config(config))

    @property
    def memray(self) -> CoreMemory:
        """The memray `Memory` underneath, for what mem0's API has no words for."""
        return self._memory

    def close(self) -> None:
        if self._owned:
            self._memory.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def add(self, messages: str | dict[str, Any] | Sequence[dict[str, Any]], *,
            user_id: str | None = None, agent_id: str | None = None,
            run_id: str | None = None, metadata: dict[str, Any] | None = None,
            infer: bool = True, memory_type: str | None = None, prompt: str | None = None,
            timestamp: Any = None, expiration_date: Any = None) -> dict[str, Any]:
        """Remember what the user said: `{"results": [{"id", "memory", "event"}]}`.

        `infer=True` extracts facts now (memray's extractor) and resolves them against
        the user's memories; `infer=False` stores each user message verbatim. NOOPs are
        left out of the results, as in mem0."""
        _refuse(memory_type=memory_type, prompt=prompt, timestamp=timestamp,
                expiration_date=expiration_date)
        if user_id is None:
            raise InvalidInputError("memray scopes every memory to a user: user_id is required")
        result = self._memory.add(_messages(messages), user_id=user_id, session_id=run_id,
                                  agent_id=agent_id, metadata=metadata, infer=infer)
        events = list(result.events)
        if infer and result.pending_turns:  # mem0 extracts on every add, round or not
            events += self._memory.flush(user_id=user_id, session_id=run_id).events
        return {"results": [event_item(e) for e in events if e.op != "NOOP"]}

    def search(self, query: str, *, user_id: str | None = None, agent_id: str | None = None,
               run_id: str | None = None, top_k: int | None = None, limit: int | None = None,
               filters: dict[str, Any] | None = None, threshold: float | None = None,
               rerank: bool = False) -> dict[str, Any]:
        """`{"results": [memory + "score"]}`, best first. `threshold`: a cosine floor
        (memray's relevance decision when None); `limit` is the 1.x name of `top_k`."""
        uid, where = scope_of(filters, user_id, agent_id, run_id)
        hits = self._memory.search(query, user_id=uid, top_k=top_k or limit, filters=where,
                                   threshold=threshold)
        return {"results": [hit_item(h) for h in hits]}

    def get_all(self, *, user_id: str | None = None, agent_id: str | None = None,
                run_id: str | None = None, filters: dict[str, Any] | None = None,
                top_k: int | None = None, limit: int | None = None) -> dict[str, Any]:
        """`{"results": [...]}`: the user's active memories, oldest first, at most `top_k`
        (default 20, mem0's). Filters narrow by agent_id / run_id / type."""
        records = self.active(user_id=user_id, agent_id=agent_id, run_id=run_id,
                              filters=filters)
        cap = top_k or limit or 20
        return {"results": [memory_item(r) for r in records[:cap]]}

    def active(self, *, user_id: str | None = None, agent_id: str | None = None,
               run_id: str | None = None, filters: dict[str, Any] | None = None,
               ) -> list[MemoryRecord]:
        """Every active memory of the user matching the id filters, oldest first."""
        uid, where = scope_of(filters, user_id, agent_id, run_id)
        unsupported = set(where) - {"agent_id", "session_id", "type"}
        if unsupported:
            raise InvalidInputError(f"get_all filters on {sorted(unsupported)} are not "
                                    "supported; use search")
        types = where.pop("type", None)
        out: list[MemoryRecord] = []
        cursor: str | None = None
        while True:
            page = self._memory.get_all(user_id=uid, limit=_PAGE, cursor=cursor)
            out += [r for r in page.items if r.status == MemoryStatus.ACTIVE
                    and _matches(r, where) and (types is None or r.type.value in
                                                ([types] if isinstance(types, str) else types))]
            if page.next_cursor is None:
                return out
            cursor = page.next_cursor

    def get(self, memory_id: str, *, user_id: str | None = None) -> dict[str, Any] | None:
        """The memory, or None if the user has no such memory (mem0 returns None too)."""
        uid, mid = split_id(memory_id, user_id)
        record = self._memory.get(mid, user_id=uid)
        return None if record is None else memory_item(record)

    def update(self, memory_id: str, text: str | None = None,
               metadata: dict[str, Any] | None = None, *, data: str | None = None,
               user_id: str | None = None) -> dict[str, Any]:
        """Replace the content (`text`, or `data` as in mem0 1.x); metadata updates are not
        supported. `{"message": "Memory updated successfully!"}`."""
        _refuse(metadata=metadata)
        content = text if text is not None else data
        if content is None:
            raise InvalidInputError("give the new text")
        uid, mid = split_id(memory_id, user_id)
        self._not_found_as_mem0(lambda: self._memory.update(mid, content, user_id=uid))
        return {"message": "Memory updated successfully!"}

    def delete(self, memory_id: str, *, user_id: str | None = None) -> dict[str, Any]:
        """Delete one memory and its history. `{"message": "Memory deleted successfully!"}`."""
        uid, mid = split_id(memory_id, user_id)
        event = self._not_found_as_mem0(lambda: self._memory.delete(mid, user_id=uid))
        return {"message": "Memory deleted successfully!",
                "receipt": event.receipt.model_dump(mode="json") if event.receipt else None}

    def delete_all(self, user_id: str | None = None, agent_id: str | None = None,
                   run_id: str | None = None) -> dict[str, Any]:
        """Delete the user's memories (only those of `agent_id` / `run_id` when given)."""
        uid, where = scope_of(None, user_id, agent_id, run_id)
        receipts: list[DeletionReceipt | None] = []
        if not where:
            receipts.append(self._memory.delete_all(user_id=uid))
        else:
            for record in self.active(user_id=uid, filters={
                    ("run_id" if k == "session_id" else k): v for k, v in where.items()}):
                receipts.append(self._memory.delete(record.id, user_id=uid).receipt)
        return {"message": "Memories deleted successfully!",
                "receipts": [r.model_dump(mode="json") for r in receipts if r is not None]}

    def history(self, memory_id: str, *, user_id: str | None = None) -> list[dict[str, Any]]:
        """Every change of the memory, oldest first; [] once it was deleted (memray purges
        a deleted memory's history, mem0 keeps it)."""
        uid, mid = split_id(memory_id, user_id)
        return [history_item(e, i)
                for i, e in enumerate(self._memory.history(mid, user_id=uid))]

    @staticmethod
    def _not_found_as_mem0(run: Callable[[], T]) -> T:
        try:
            return run()
        except MemoryNotFoundError as exc:
            raise Mem0NotFoundError(str(exc)) from exc

"""The MCP tool set over one `Memory`: add, search, list (paged), get, update, delete,
delete all, history. Every tool names its `user_id`; an `Authorizer` decides, per call,
whether the caller may act for that user (over HTTP: the bearer key's scope, exactly as
in REST; on stdio the local operator may act for anyone). Refusals and memray errors come
back as tool errors (`isError`), never as another user's data."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from memray import __version__
from memray.core.memory import Memory
from memray.errors import InvalidInputError, MemoryNotFoundError, MemrayError, StaleReadError
from memray.models import MemoryEvent, MemoryRecord, SearchHit

log = logging.getLogger(__name__)
T = TypeVar("T")

Authorizer = Callable[[Any, str], None]
"""`(request, user_id)`: return if the caller may act for `user_id`, else raise
`PermissionError` (its text becomes the tool error). `request` is the HTTP request that
carried the call (a Starlette `Request`), or None on stdio and in process."""

UserId = Annotated[str, Field(description="The end user whose memories to use. Every "
                              "memory belongs to exactly one user; never guess it.")]
MemoryId = Annotated[str, Field(description="A memory id, as returned by add_memory, "
                                "search_memories or get_memories.")]
Content = Annotated[str, Field(description="One short statement in the user's words or as "
                               "a fact about the user, e.g. 'I am allergic to peanuts'.")]

TOOL_NAMES = ("add_memory", "search_memories", "get_memories", "get_memory", "update_memory",
              "delete_memory", "delete_all_memories", "memory_history")
_INSTRUCTIONS = (
    "Long-term memory about the user. Before answering, call search_memories with the "
    "user's request to recall relevant facts (treat them as background that may be out of "
    "date). After the user states a lasting fact, preference, constraint or correction, "
    "call add_memory with their words. Use update_memory / delete_memory when the user "
    "corrects or asks to forget something specific; delete_all_memories only when the user "
    "explicitly asks to forget everything.")


def allow_all(request: Any, user_id: str) -> None:
    """The stdio authorizer: the process owner may act for any user."""


def record_view(record: MemoryRecord) -> dict[str, Any]:
    """What a tool shows of a memory (no hashes, vectors or provenance internals)."""
    view = record.model_dump(mode="json", include={
        "id", "content", "type", "status", "importance", "confidence", "agent_id",
        "session_id", "created_at", "updated_at", "expires_at", "metadata"})
    return {**view, "valid_from": record.valid_since.isoformat(),
            "valid_to": record.valid_to.isoformat() if record.valid_to else None}


def _event_view(event: MemoryEvent) -> dict[str, Any]:
    record = event.memory or event.previous
    return {"op": event.op, "memory_id": event.memory_id,
            "content": record.content if record is not None else None,
            "previous_content": event.previous.content
            if event.op == "UPDATE" and event.previous is not None else None,
            "at": event.at.isoformat(), "version": event.version,
            **({"receipt": event.receipt.model_dump(mode="json")} if event.receipt else {})}


AsOf = Annotated[str | None, Field(description="An ISO 8601 time with an offset, e.g. "
                                  "2024-06-01T00:00:00Z: what was true then instead of now "
                                  "(facts a later correction replaced, while they held).")]


def _hit_view(hit: SearchHit) -> dict[str, Any]:
    return {**record_view(hit.memory), "similarity": round(hit.similarity, 4),
            "score": round(hit.score, 4)}


def _request_of(ctx: Context) -> Any:
    try:
        return ctx.request_context.request
    except ValueError:  # called outside a request (in-process, no transport)
        return None


class MemoryTools:
    """The tools, bound to one `Memory` and one `Authorizer`."""

    def __init__(self, memory: Memory, authorize: Authorizer) -> None:
        self._memory, self._authorize = memory, authorize

    async def _run(self, ctx: Context, user_id: str, call: Callable[[], T]) -> T:
        try:
            self._authorize(_request_of(ctx), user_id)
            return await anyio.to_thread.run_sync(call)
        except PermissionError as exc:
            raise ToolError(f"forbidden: {exc}") from exc
        except MemoryNotFoundError as exc:
            raise ToolError(f"not_found: {exc}") from exc
        except InvalidInputError as exc:
            raise ToolError(f"invalid_input: {exc}") from exc
        except StaleReadError as exc:
            raise ToolError(f"version_not_reached: {exc}") from exc
        except MemrayError as exc:
            log.error("MCP tool failed: %s: %s", type(exc).__name__, exc)
            raise ToolError(f"unavailable: {type(exc).__name__}") from exc

    async def add_memory(
            self, user_id: UserId, content: Content, ctx: Context,
            infer: Annotated[bool, Field(description="true: extract facts from the text and "
                                         "reconcile them with what is known (updates a changed "
                                         "fact instead of duplicating it); false: store the "
                                         "text verbatim.")] = True,
            session_id: Annotated[str | None, Field(description="The conversation, if any.")]
            = None,
            agent_id: Annotated[str | None, Field(description="The agent, if any.")] = None,
    ) -> dict[str, Any]:
        """Remember something the user said. Returns the changes made (ADD / UPDATE /
        DELETE / NOOP events); an empty list means nothing in it was worth keeping (small
        talk, a question, or personal data such as e-mail addresses, which are dropped)."""
        def add() -> dict[str, Any]:
            result = self._memory.add(content, user_id=user_id, session_id=session_id,
                                      agent_id=agent_id, infer=infer)
            return {"events": [_event_view(e) for e in result.events],
                    "version": result.version}
        return await self._run(ctx, user_id, add)

    async def search_memories(
            self, user_id: UserId, query: Annotated[str, Field(
                description="What to recall: the user's request or a question about them.")],
            ctx: Context,
            top_k: Annotated[int | None, Field(ge=1, le=100, description="At most this many "
                                               "results (default: the server's, about 5).")]
            = None,
            memory_type: Annotated[str | None, Field(description="Only memories of this type: "
                                              "identity, preference, constraint, fact, "
                                              "task_state, behavior, summary, message.")] = None,
            as_of: AsOf = None,
            timezone: Annotated[str | None, Field(description="The user's IANA time zone "
                                                  "(e.g. Asia/Shanghai), whose days "
                                                  "'yesterday' and 'last week' mean "
                                                  "(default: the server's).")] = None,
    ) -> dict[str, Any]:
        """Recall the user's memories relevant to a query, best first, each with its
        similarity (cosine, -1..1) and dates. Irrelevant memories are left out, so an empty
        list means nothing relevant is known."""
        filters = {"type": memory_type} if memory_type else None
        return await self._run(ctx, user_id, lambda: {"results": [
            _hit_view(h) for h in self._memory.search(query, user_id=user_id, top_k=top_k,
                                                       filters=filters, as_of=as_of,
                                                       timezone=timezone)]})

    async def get_memories(
            self, user_id: UserId, ctx: Context,
            limit: Annotated[int, Field(ge=1, le=200, description="Page size.")] = 20,
            cursor: Annotated[str | None, Field(description="next_cursor of the previous "
                                                "page; omit for the first page.")] = None,
            as_of: AsOf = None,
    ) -> dict[str, Any]:
        """List all of the user's memories (any status), oldest first, one page at a time.
        Returns items and next_cursor (null on the last page)."""
        def page() -> dict[str, Any]:
            got = self._memory.get_all(user_id=user_id, limit=limit, cursor=cursor,
                                       as_of=as_of)
            return {"items": [record_view(r) for r in got.items],
                    "next_cursor": got.next_cursor}
        return await self._run(ctx, user_id, page)

    async def get_memory(self, user_id: UserId, memory_id: MemoryId,
                         ctx: Context) -> dict[str, Any]:
        """One memory by id (an error if the user has no such memory)."""
        def get() -> dict[str, Any]:
            record = self._memory.get(memory_id, user_id=user_id)
            if record is None:
                raise MemoryNotFoundError(f"no memory {memory_id} for this user")
            return record_view(record)
        return await self._run(ctx, user_id, get)

    async def update_memory(self, user_id: UserId, memory_id: MemoryId, content: Content,
                            ctx: Context) -> dict[str, Any]:
        """Replace a memory's content when the user corrects it. The history keeps the
        previous content."""
        return await self._run(ctx, user_id, lambda: _event_view(
            self._memory.update(memory_id, content, user_id=user_id)))

    async def delete_memory(self, user_id: UserId, memory_id: MemoryId,
                            ctx: Context) -> dict[str, Any]:
        """Forget one memory for good (its history is purged too)."""
        return await self._run(ctx, user_id, lambda: _event_view(
            self._memory.delete(memory_id, user_id=user_id)))

    async def delete_all_memories(
            self, user_id: UserId, ctx: Context,
            confirm: Annotated[bool, Field(description="Must be true: the user explicitly "
                                           "asked to forget everything.")] = False,
    ) -> dict[str, Any]:
        """Forget everything about the user. Irreversible; only when the user asks."""
        if not confirm:
            raise ToolError("invalid_input: set confirm=true only when the user explicitly "
                            "asked to forget everything")
        def run() -> dict[str, Any]:
            receipt = self._memory.delete_all(user_id=user_id)
            return {"deleted": receipt.deleted, "version": self._memory.version(user_id=user_id),
                    "receipt": receipt.model_dump(mode="json")}

        return await self._run(ctx, user_id, run)

    async def memory_history(self, user_id: UserId, memory_id: MemoryId,
                             ctx: Context) -> dict[str, Any]:
        """How a memory changed over time, oldest first (empty once deleted)."""
        return await self._run(ctx, user_id, lambda: {"events": [
            _event_view(e) for e in self._memory.history(memory_id, user_id=user_id)]})


_HINTS = {
    "add_memory": ToolAnnotations(title="Remember", read_only_hint=False,
                                  destructive_hint=False, idempotent_hint=False),
    "search_memories": ToolAnnotations(title="Recall", read_only_hint=True),
    "get_memories": ToolAnnotations(title="List memories", read_only_hint=True),
    "get_memory": ToolAnnotations(title="Get a memory", read_only_hint=True),
    "update_memory": ToolAnnotations(title="Correct a memory", read_only_hint=False,
                                     destructive_hint=True, idempotent_hint=True),
    "delete_memory": ToolAnnotations(title="Forget a memory", read_only_hint=False,
                                     destructive_hint=True, idempotent_hint=True),
    "delete_all_memories": ToolAnnotations(title="Forget everything", read_only_hint=False,
                                           destructive_hint=True, idempotent_hint=True),
    "memory_history": ToolAnnotations(title="Memory history", read_only_hint=True),
}


def build_server(memory: Memory, *, authorize: Authorizer = allow_all) -> MCPServer:
    """An MCP server whose tools act on `memory` (which must outlive it); `authorize`
    is asked before every tool call touches a user."""
    server: MCPServer = MCPServer("memray", version=__version__, instructions=_INSTRUCTIONS,
                                  log_level="WARNING")
    tools = MemoryTools(memory, authorize)
    for name in TOOL_NAMES:
        server.add_tool(getattr(tools, name), name=name, annotations=_HINTS[name],
                        structured_output=True)
    return server

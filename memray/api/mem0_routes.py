"""The REST paths and payloads that mem0's hosted client (`MemoryClient`, mem0ai 2.2.1)
calls, so a mem0 user switches by pointing `host=` at memray:

    GET    /v1/ping/                          key check at construction
    POST   /v3/memories/add/                  add
    POST   /v3/memories/search/               search
    POST   /v3/memories/?page=&page_size=     get_all
    GET    /v1/memories/{id}/                 get
    PUT    /v1/memories/{id}/                 update
    DELETE /v1/memories/{id}/                 delete
    DELETE /v1/memories/?user_id=             delete_all
    GET    /v1/memories/{id}/history/         history

Keys and scopes are REST's (`Authorization: Token <key>` is what the client sends; Bearer
works too): the user comes from `filters` / `user_id` or from the memory id
(`"<user_id>:<uuid>"`, see `memray.compat.mem0`), and the key must allow that user.
Routes only resolve the user, check scope and call the shared compat layer.

The bodies, parameters and answers are declared as the routes check and send them, so the
OpenAPI document says what these paths do (schemathesis holds them to it,
tests/integration/test_openapi_schemathesis.py); errors are the API's `{error, detail}`,
which mem0's client raises as its own exceptions by status.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from memray.api import schemas as s
from memray.api.auth import ApiKey, require_scope
from memray.api.deps import Key
from memray.api.errors import ApiError
from memray.compat import mem0 as compat
from memray.models import MemoryType

router = APIRouter(tags=["mem0 compatibility"])
_BODY = ConfigDict(extra="forbid")


async def _mem0(request: Request) -> compat.Memory:
    return compat.Memory(request.app.state.memory)


Mem0 = Annotated[compat.Memory, Depends(_mem0)]


def _boolean(value: Any) -> Any:
    if not isinstance(value, bool):
        raise ValueError("must be a JSON boolean")
    return value


# As in the REST API's schemas: JSON types as declared (`"top_k": "5"` or
# `"show_expired": 0` is a 422; pydantic's lax mode would take them).
OnlyFalse = Annotated[Literal[False], BeforeValidator(_boolean)]
Similarity = Annotated[float, Field(ge=-1, le=1), s.JSON_NUMBER]
Types = MemoryType | Annotated[list[MemoryType], Field(min_length=1)]
_TYPES = "A memory type, or a non-empty list of them."

# A memory id of these paths: `"<user_id>:<uuid>"`, or a bare memray id. The user id as
# `schemas.NON_BLANK` has it, and without "/" (added to each excluded set): no path
# segment carries one, %2F is decoded before routing.
_OWNER = s.NON_BLANK[1:-1].replace("\x00", "\x00/")
MEM0_ID = f"^(?:{_OWNER}:)?{s.MEMORY_ID[1:-1]}$"
MemoryId = Annotated[str, Path(
    pattern=MEM0_ID, max_length=s.MAX_REST_ID_CHARS + 37,
    description="`<user_id>:<uuid>` as add, search and get_all return it (the user id "
                "not blank, without NUL or `/`). A bare memray id (a lower-case UUID) is read "
                "as a memory of the key's user when the key is for exactly one user; other "
                "keys get a 403 for it.")]
ScopeQuery = Annotated[str | None, Query(min_length=1, max_length=s.MAX_REST_ID_CHARS,
                                         pattern=s.NON_BLANK)]


# -- request bodies ----------------------------------------------------------------------

class Mem0Message(BaseModel):
    """A chat message; other keys are accepted and ignored (mem0's messages carry more)."""

    role: Literal["user", "assistant", "system", "tool"]
    content: str = Field(pattern=s.NO_NUL, description="No NUL. A user turn: at most the "
                         "server's `max_content_chars` (2000 by default); other turns ten "
                         "times that. Blank turns are skipped.")
    name: str | None = None


Messages = Annotated[str, Field(pattern=s.NO_NUL)] | Mem0Message | list[Mem0Message]


class Mem0Ids(BaseModel):
    """Whose memories: every memory belongs to one user, so `user_id` is required."""

    model_config = _BODY

    user_id: s.ScopeId
    agent_id: s.ScopeId | None = None
    run_id: s.ScopeId | None = Field(None, description="memray's `session_id`.")


class _AddCommon(BaseModel):
    model_config = _BODY

    messages: Messages = Field(description="A string is one user turn; a message, or a "
                               "list of them (at most the server's `max_messages`: 413).")
    metadata: dict[str, Any] | None = None
    infer: s.StrictBool = True
    version: str | None = Field(None, description="Accepted and ignored (older clients).")
    output_format: str | None = Field(None, description="Accepted and ignored.")


class Mem0AddBody(_AddCommon, Mem0Ids):
    """The ids at the top level (mem0 1.x, and what `MemoryClient.add(user_id=)` sends)."""


class Mem0AddBodyV3(_AddCommon):
    """The ids in `filters` (mem0's v3 API), none at the top level."""

    filters: Mem0Ids


class Mem0ListFilters(Mem0Ids):
    """What get_all narrows by (dates and importance are search's); a null is the same as
    leaving it out."""

    type: Types | None = Field(None, description=_TYPES)


class Mem0SearchFilters(Mem0ListFilters):
    """memray's filters (no metadata, no AND/OR/NOT); a null is the same as leaving it
    out."""

    created_after: s.IsoTime | None = None
    created_before: s.IsoTime | None = None
    min_importance: Similarity | None = None


class Mem0SearchBody(BaseModel):
    model_config = _BODY

    query: s.Text
    filters: Mem0SearchFilters
    top_k: Annotated[int, Field(ge=1, le=1000), s.JSON_NUMBER] | None = None
    threshold: Similarity | None = Field(None, description="A cosine floor.")
    rerank: s.StrictBool = Field(False, description="Accepted; memray always ranks its own "
                                 "way.")
    show_expired: OnlyFalse = Field(False, description="Only false: expired memories are "
                                    "never recalled.")


class Mem0ListBody(BaseModel):
    model_config = _BODY

    filters: Mem0ListFilters
    show_expired: OnlyFalse = Field(False, description="Only false: get_all lists active "
                                    "memories.")


class Mem0UpdateBody(BaseModel):
    model_config = _BODY

    text: s.Text


# -- answers (documented; the routes return mem0's shapes as built in compat.mem0) -------

class Mem0Memory(BaseModel):
    """A memory as mem0 returns it."""

    id: str = Field(description="`<user_id>:<uuid>`.")
    memory: str
    hash: str
    metadata: dict[str, Any] | None
    categories: list[str] = Field(description="The memray memory type.")
    created_at: datetime
    updated_at: datetime
    expiration_date: date | None
    user_id: str
    agent_id: str | None = Field(None, description="Present when set.")
    run_id: str | None = Field(None, description="memray's `session_id`; present when set.")


class Mem0Hit(Mem0Memory):
    score: float = Field(description="Cosine similarity; the order is memray's ranking.")


class Mem0Results(BaseModel):
    results: list[Mem0Hit]


class Mem0EventData(BaseModel):
    memory: str


class Mem0Event(BaseModel):
    id: str = Field(description="`<user_id>:<uuid>`.")
    memory: str
    event: Literal["ADD", "UPDATE", "DELETE"]
    data: Mem0EventData
    previous_memory: str | None = Field(None, description="On UPDATE.")


class Mem0AddResult(BaseModel):
    status: Literal["SUCCEEDED"] = Field(description="Always: memray answers in full at "
                                         "once (no event to poll).")
    results: list[Mem0Event] = Field(description="What changed; NOOPs are left out.")


class Mem0Page(BaseModel):
    count: int = Field(description="Every active memory the filters match.")
    next: str | None = Field(description="The next page's URL.")
    previous: str | None = Field(description="The previous page's URL.")
    results: list[Mem0Memory]


class Mem0Done(BaseModel):
    message: str


class Mem0Deleted(Mem0Done):
    receipt: s.DeletionReceipt | None = Field(None, description="memray's deletion receipt.")


class Mem0DeletedAll(Mem0Done):
    receipts: list[s.DeletionReceipt] = Field(default_factory=list,
                                              description="memray's deletion receipts.")


class Mem0History(BaseModel):
    id: str
    memory_id: str = Field(description="`<user_id>:<uuid>`.")
    old_memory: str | None
    new_memory: str | None
    event: Literal["ADD", "UPDATE", "DELETE"]
    created_at: datetime
    updated_at: None
    is_deleted: bool
    actor_id: None
    role: None
    user_id: str


class Mem0Ping(BaseModel):
    status: Literal["ok"]
    org_id: str = Field(description="`memray`.")
    project_id: str = Field(description="The key's name.")
    user_email: None


def _ok(model: Any, *errors: int) -> dict[int | str, dict[str, Any]]:
    return {200: {"model": model, "description": "Successful Response"},
            **s.error_responses(*errors)}


# -- routes ------------------------------------------------------------------------------

def _owner(key: ApiKey, memory_id: str) -> tuple[str, str]:
    """(user_id, memray id) of a path id (`MemoryId`, checked): a bare memray id is the
    key's user's when the key is for exactly one user, else a 403."""
    if ":" in memory_id:
        user_id, mid = compat.split_id(memory_id)
    elif len(key.users) == 1 and not key.admin and key.user_prefix is None:
        user_id, mid = key.users[0], memory_id
    else:
        raise ApiError(403, "forbidden", "a bare memory id names no user, and this key is "
                       "not for exactly one: give '<user_id>:<id>' as add, search and "
                       "get_all return it")
    require_scope(key, user_id)
    return user_id, mid


def _filters(filters: BaseModel) -> dict[str, Any]:
    dumped: dict[str, Any] = filters.model_dump(mode="json", exclude_none=True)
    return dumped


@router.get("/v1/ping/", responses=_ok(Mem0Ping))
def ping(key: Key) -> Any:
    """The client checks its key here and needs both ids set; memray has no organisations
    or projects, so they name the server and the key."""
    return {"status": "ok", "org_id": "memray", "project_id": key.name, "user_email": None}


@router.post("/v3/memories/add/", responses=_ok(Mem0AddResult, 502))
async def add(body: Annotated[Mem0AddBody | Mem0AddBodyV3, Body()], key: Key, mem0: Mem0,
              request: Request) -> Any:
    """The ids at the top level (`user_id`: mem0 1.x, `MemoryClient.add(user_id=)`) or in
    `filters` (mem0's v3 API), not both."""
    ids = body.filters if isinstance(body, Mem0AddBodyV3) else body
    require_scope(key, ids.user_id)
    messages = body.messages
    most = request.app.state.limits.max_messages
    if isinstance(messages, list) and len(messages) > most:
        raise ApiError(413, "too_many_messages", f"at most {most} messages")
    given = messages if isinstance(messages, str) else [
        m.model_dump(include={"role", "content", "name"}, exclude_none=True)
        for m in (messages if isinstance(messages, list) else [messages])]
    result = await run_in_threadpool(lambda: mem0.add(
        given, user_id=ids.user_id, agent_id=ids.agent_id, run_id=ids.run_id,
        metadata=body.metadata, infer=body.infer))
    return {"status": "SUCCEEDED", **result}


@router.post("/v3/memories/search/", responses=_ok(Mem0Results))
async def search(body: Mem0SearchBody, key: Key, mem0: Mem0) -> Any:
    require_scope(key, body.filters.user_id)
    return await run_in_threadpool(lambda: mem0.search(
        body.query, filters=_filters(body.filters), top_k=body.top_k,
        threshold=body.threshold))


@router.post("/v3/memories/", responses=_ok(Mem0Page))
async def get_all(body: Mem0ListBody, key: Key, mem0: Mem0, request: Request,
                  page: Annotated[int, Query(ge=1)] = 1,
                  page_size: Annotated[int, Query(ge=1, le=1000)] = 100) -> Any:
    require_scope(key, body.filters.user_id)
    records = await run_in_threadpool(lambda: mem0.active(filters=_filters(body.filters)))
    start = (page - 1) * page_size
    more, earlier = len(records) > start + page_size, page > 1

    def link(to: int) -> str:
        return str(request.url.include_query_params(page=to, page_size=page_size))

    return {"count": len(records), "next": link(page + 1) if more else None,
            "previous": link(page - 1) if earlier else None,
            "results": [compat.memory_item(r) for r in records[start:start + page_size]]}


@router.get("/v1/memories/{memory_id}/", responses=_ok(Mem0Memory, 404))
async def get(memory_id: MemoryId, key: Key, mem0: Mem0) -> Any:
    user_id, mid = _owner(key, memory_id)
    item = await run_in_threadpool(lambda: mem0.get(mid, user_id=user_id))
    if item is None:
        raise ApiError(404, "not_found", "Memory not found!")
    return item


@router.put("/v1/memories/{memory_id}/", responses=_ok(Mem0Memory, 404))
async def update(memory_id: MemoryId, body: Mem0UpdateBody, key: Key, mem0: Mem0) -> Any:
    user_id, mid = _owner(key, memory_id)
    await run_in_threadpool(lambda: mem0.update(mid, body.text, user_id=user_id))
    item = await run_in_threadpool(lambda: mem0.get(mid, user_id=user_id))
    if item is None:  # deleted meanwhile
        raise ApiError(404, "not_found", "Memory not found!")
    return item


@router.delete("/v1/memories/{memory_id}/", responses=_ok(Mem0Deleted, 404))
async def delete(memory_id: MemoryId, key: Key, mem0: Mem0,
                 delete_linked: Annotated[bool, Query(description="Accepted and ignored.")]
                 = False) -> Any:
    user_id, mid = _owner(key, memory_id)
    return await run_in_threadpool(lambda: mem0.delete(mid, user_id=user_id))


@router.delete("/v1/memories/", responses=_ok(Mem0DeletedAll))
async def delete_all(key: Key, mem0: Mem0, user_id: s.UserIdQuery,
                     agent_id: ScopeQuery = None, run_id: ScopeQuery = None) -> Any:
    require_scope(key, user_id)
    return await run_in_threadpool(lambda: mem0.delete_all(user_id, agent_id, run_id))


@router.get("/v1/memories/{memory_id}/history/", responses=_ok(list[Mem0History]))
async def history(memory_id: MemoryId, key: Key, mem0: Mem0) -> Any:
    """Every change, oldest first; `[]` for a memory the user does not have (or deleted:
    memray purges a deleted memory's history)."""
    user_id, mid = _owner(key, memory_id)
    return await run_in_threadpool(lambda: mem0.history(mid, user_id=user_id))

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
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field

from memray.api.auth import ApiKey, require_scope
from memray.api.deps import Key
from memray.api.errors import ApiError
from memray.compat import mem0 as compat
from memray.errors import InvalidInputError

router = APIRouter(tags=["mem0 compatibility"])
_BODY = ConfigDict(extra="forbid")


async def _mem0(request: Request) -> compat.Memory:
    return compat.Memory(request.app.state.memory)


Mem0 = Annotated[compat.Memory, Depends(_mem0)]


class AddBody(BaseModel):
    model_config = _BODY

    messages: str | dict[str, Any] | list[dict[str, Any]]
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    filters: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    infer: bool = True
    version: str | None = Field(None, description="Accepted and ignored (older clients).")
    output_format: str | None = Field(None, description="Accepted and ignored.")


class SearchBody(BaseModel):
    model_config = _BODY

    query: str
    filters: dict[str, Any] | None = None
    top_k: int | None = Field(None, ge=1, le=1000)
    threshold: float | None = Field(None, ge=-1, le=1, description="A cosine floor.")
    rerank: bool = Field(False, description="Accepted; memray always ranks its own way.")
    show_expired: bool = Field(False, description="Only false: expired memories are never "
                               "recalled.")


class ListBody(BaseModel):
    model_config = _BODY

    filters: dict[str, Any]
    show_expired: bool = False


class UpdateBody(BaseModel):
    model_config = _BODY

    text: str


def _user(key: ApiKey, filters: dict[str, Any] | None, **ids: Any) -> str:
    user_id, _ = compat.scope_of(filters, ids.get("user_id"), ids.get("agent_id"),
                                 ids.get("run_id"))
    require_scope(key, user_id)
    return user_id


def _owner(key: ApiKey, memory_id: str) -> tuple[str, str]:
    """(user_id, memray id) of a path id; a bare memray id works for a one-user key."""
    only = key.users[0] if len(key.users) == 1 and not key.admin \
        and key.user_prefix is None else None
    user_id, mid = compat.split_id(memory_id, None if ":" in memory_id else only)
    require_scope(key, user_id)
    return user_id, mid


def _refuse_expired(show_expired: bool) -> None:
    if show_expired:
        raise InvalidInputError("show_expired=true is not supported: memray never returns "
                                "expired memories here")


@router.get("/v1/ping/")
def ping(key: Key) -> dict[str, Any]:
    """The client checks its key here and needs both ids set; memray has no organisations
    or projects, so they name the server and the key."""
    return {"status": "ok", "org_id": "memray", "project_id": key.name, "user_email": None}


@router.post("/v3/memories/add/")
async def add(body: AddBody, key: Key, mem0: Mem0) -> Any:
    user_id = _user(key, body.filters, user_id=body.user_id, agent_id=body.agent_id,
                    run_id=body.run_id)
    agent_id = body.agent_id or (body.filters or {}).get("agent_id")
    run_id = body.run_id or (body.filters or {}).get("run_id")
    result = await run_in_threadpool(lambda: mem0.add(
        body.messages, user_id=user_id, agent_id=agent_id, run_id=run_id,
        metadata=body.metadata, infer=body.infer))
    return {"status": "SUCCEEDED", **result}


@router.post("/v3/memories/search/")
async def search(body: SearchBody, key: Key, mem0: Mem0) -> Any:
    _refuse_expired(body.show_expired)
    _user(key, body.filters)
    return await run_in_threadpool(lambda: mem0.search(
        body.query, filters=body.filters, top_k=body.top_k, threshold=body.threshold))


@router.post("/v3/memories/")
async def get_all(body: ListBody, key: Key, mem0: Mem0, request: Request,
                  page: Annotated[int, Query(ge=1)] = 1,
                  page_size: Annotated[int, Query(ge=1, le=1000)] = 100) -> Any:
    _refuse_expired(body.show_expired)
    _user(key, body.filters)
    records = await run_in_threadpool(lambda: mem0.active(filters=body.filters))
    start = (page - 1) * page_size
    more, earlier = len(records) > start + page_size, page > 1

    def link(to: int) -> str:
        return str(request.url.include_query_params(page=to, page_size=page_size))

    return {"count": len(records), "next": link(page + 1) if more else None,
            "previous": link(page - 1) if earlier else None,
            "results": [compat.memory_item(r) for r in records[start:start + page_size]]}


@router.get("/v1/memories/{memory_id}/")
async def get(memory_id: str, key: Key, mem0: Mem0) -> Any:
    user_id, mid = _owner(key, memory_id)
    item = await run_in_threadpool(lambda: mem0.get(mid, user_id=user_id))
    if item is None:
        raise ApiError(404, "not_found", "Memory not found!")
    return item


@router.put("/v1/memories/{memory_id}/")
async def update(memory_id: str, body: UpdateBody, key: Key, mem0: Mem0) -> Any:
    user_id, mid = _owner(key, memory_id)
    await run_in_threadpool(lambda: mem0.update(mid, body.text, user_id=user_id))
    return await run_in_threadpool(lambda: mem0.get(mid, user_id=user_id))


@router.delete("/v1/memories/{memory_id}/")
async def delete(memory_id: str, key: Key, mem0: Mem0,
                 delete_linked: bool = False) -> Any:
    user_id, mid = _owner(key, memory_id)
    return await run_in_threadpool(lambda: mem0.delete(mid, user_id=user_id))


@router.delete("/v1/memories/")
async def delete_all(key: Key, mem0: Mem0, user_id: str | None = None,
                     agent_id: str | None = None, run_id: str | None = None) -> Any:
    uid = _user(key, None, user_id=user_id)
    return await run_in_threadpool(lambda: mem0.delete_all(uid, agent_id, run_id))


@router.get("/v1/memories/{memory_id}/history/")
async def history(memory_id: str, key: Key, mem0: Mem0) -> Any:
    user_id, mid = _owner(key, memory_id)
    return await run_in_threadpool(lambda: mem0.history(mid, user_id=user_id))

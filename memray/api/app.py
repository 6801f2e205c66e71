"""`build_api(memory, keys)`: the REST API v1 as a FastAPI app. Routes only authenticate,
check scope and call `Memory`; errors are mapped by `errors.error_response`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from pydantic import AwareDatetime, BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memray.api import schemas as s
from memray.api.auth import KeySource, require_scope
from memray.api.deps import AsyncMem, Key
from memray.api.errors import ApiError, error_response
from memray.api.guard import Guard
from memray.api.jobs import JobQueue
from memray.api.mcp_routes import mcp_router
from memray.api.mem0_routes import router as mem0_router
from memray.api.ui_routes import router as ui_router
from memray.api.user_routes import router as user_router
from memray.core.aio import AsyncMemory
from memray.core.memory import Memory
from memray.errors import MemrayError


class ApiLimits(BaseModel):
    max_body_bytes: int = Field(1_000_000, gt=0, description="Larger bodies: 413 (counted "
                                "as the body streams, on every route).")
    max_messages: int = Field(200, gt=0, description="More messages in one add: 413.")
    max_url_chars: int = Field(8192, gt=0, description="Longer path + query string: 414.")
    rate_per_s: float | None = Field(None, gt=0, description="Requests per second per API "
                                     "key (a token bucket; over it: 429 with Retry-After). "
                                     "None: no limit.")
    rate_burst: int = Field(20, gt=0, description="Requests a key may send at once before "
                            "`rate_per_s` applies.")


def _add_kwargs(req: s.AddRequest) -> dict[str, Any]:
    messages: Any = req.messages if isinstance(req.messages, str) else [
        m.model_dump(mode="json", exclude_none=True) for m in req.messages]
    return {"messages": messages, "user_id": req.user_id, "session_id": req.session_id,
            "agent_id": req.agent_id, "metadata": req.metadata, "infer": req.infer,
            "consent": req.consent,
            "timestamp": req.timestamp.isoformat() if req.timestamp else None}


def build_api(memory: Memory, keys: KeySource, *, limits: ApiLimits | None = None,
              job_lease_s: float = 120.0) -> FastAPI:
    """The app; `memory` must outlive it. Async adds are queued in `memory`'s log (shared
    by every replica in cluster mode); a job whose process died is taken over after
    `job_lease_s` seconds. Call `app.state.jobs.close()` on shutdown."""
    app = FastAPI(title="memray", version="1", description="Long-term memory for AI agents.")
    s.document_errors(app)
    app.state.memory, app.state.keys = memory, keys
    app.state.async_memory = AsyncMemory(memory)
    app.state.limits = limits or ApiLimits()

    def run_add(request: dict[str, Any]) -> dict[str, Any]:
        return memory.add(**request).model_dump(mode="json")

    app.state.jobs = JobQueue(memory.turn_log(), run_add, lease_s=job_lease_s)
    app.state.jobs.open()
    for exc_type in (ApiError, RequestValidationError, StarletteHTTPException, MemrayError,
                     Exception):
        app.add_exception_handler(exc_type, _handler)
    _install_metrics(app)
    # Outermost: limits and the audit line apply to every router below, /mcp and /ui too.
    app.add_middleware(Guard, keys=lambda: app.state.keys, limits=lambda: app.state.limits)
    app.include_router(router)
    app.include_router(mem0_router)  # mem0's MemoryClient paths (memray/api/mem0_routes.py)
    app.include_router(user_router)  # profile and doctor (memray/api/user_routes.py)
    app.include_router(ui_router)  # the memory page at /ui (memray/api/ui_routes.py)
    app.include_router(mcp_router(memory, keys))  # MCP over streamable HTTP at /mcp
    _declare_limits(app)
    return app


def _declare_limits(app: FastAPI) -> None:
    """The OpenAPI document states the operator's `max_messages` as `maxItems` of every
    add's message list, so a request the schema allows is never a 413 for its count."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        doc = build()
        most = app.state.limits.max_messages
        for schema in doc.get("components", {}).get("schemas", {}).values():
            messages = schema.get("properties", {}).get("messages") or {}
            for option in messages.get("anyOf", []):
                if option.get("type") == "array":
                    option["maxItems"] = most
        return doc

    app.openapi = openapi  # type: ignore[method-assign]


def _install_metrics(app: FastAPI) -> None:
    registry = CollectorRegistry()
    requests = Counter("memray_requests", "HTTP requests", ["route", "status"],
                       registry=registry)
    latency = Histogram("memray_request_seconds", "Request latency", ["route"],
                        registry=registry)
    # Whether a replica's searches find their users held: loads per search is the miss
    # rate (each replica holds its own hot set; user-affine routing raises its hits).
    # Callers per forward pass: how well concurrent queries share the model's fixed cost.
    for name, what in (("hot_set_users", "Users whose memories this process holds"),
                       ("hot_set_loads", "Times a user's memories were read whole from "
                        "the store"),
                       ("embed_passes", "Forward passes of the embedding model"),
                       ("embed_calls", "Embedding calls served by those passes")):
        Gauge(f"memray_{name}", what, registry=registry).set_function(_stat(app, name))
    app.state.registry = registry
    app.add_middleware(_Metrics, requests=requests, latency=latency)


def _stat(app: FastAPI, name: str) -> Callable[[], float]:
    def read() -> float:
        return float(app.state.memory.stats()[name])

    return read


class _Metrics:
    """Requests and latency per route: plain ASGI (no task and stream per request, as
    `@app.middleware` would cost). The guard in front of it has already bounded the body."""

    def __init__(self, app: ASGIApp, *, requests: Counter, latency: Histogram) -> None:
        self.app, self._requests, self._latency = app, requests, latency

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start, status = time.perf_counter(), [500]

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            name = getattr(scope.get("route"), "path", "unmatched")  # set by the router
            self._latency.labels(name).observe(time.perf_counter() - start)
            self._requests.labels(name, str(status[0])).inc()


async def _jobs(request: Request) -> JobQueue:
    jobs: JobQueue = request.app.state.jobs
    return jobs


MinVersion = Annotated[int | None, Query(ge=0, description="Read at least this memory "
                                         "version of the user; 409 if not reached.")]
Jobs = Annotated[JobQueue, Depends(_jobs)]
router = APIRouter()


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/metrics", responses={200: {"content": {"text/plain": {}},
                                           "description": "Prometheus text format."}})
def metrics(request: Request) -> Response:
    return Response(generate_latest(request.app.state.registry),
                    media_type="text/plain; version=0.0.4")


@router.post("/v1/memories", response_model=s.AddResponse | s.JobResponse,
             responses={202: {"model": s.JobResponse},
                        **s.error_responses(502)})
async def add(req: s.AddRequest, key: Key, memory: AsyncMem, jobs: Jobs,
              request: Request) -> Any:
    require_scope(key, req.user_id)
    most = request.app.state.limits.max_messages
    if not isinstance(req.messages, str) and len(req.messages) > most:
        raise ApiError(413, "too_many_messages", f"at most {most} messages")
    if req.idempotency_key:
        seen = await run_in_threadpool(jobs.find, req.user_id, req.idempotency_key)
        if seen is not None:
            return _job_reply(seen, req.run_async)
    if req.run_async:
        job = await run_in_threadpool(jobs.enqueue, req.user_id, req.idempotency_key,
                                      _add_kwargs(req))
        return JSONResponse(s.JobResponse(**job).model_dump(mode="json"), status_code=202)
    result = await memory.add(**_add_kwargs(req))
    body = result.model_dump(mode="json")
    if req.idempotency_key:
        await run_in_threadpool(jobs.record, req.user_id, req.idempotency_key, body)
    return s.AddResponse.model_validate(body)


@router.get("/v1/jobs/{job_id}", response_model=s.JobResponse,
            responses=s.error_responses(404))
async def job(job_id: s.JobIdPath, user_id: s.UserIdQuery, key: Key, jobs: Jobs) -> Any:
    require_scope(key, user_id)
    found = await run_in_threadpool(jobs.get, job_id)
    if found is None or found[0] != user_id:
        raise ApiError(404, "not_found", f"no job {job_id} for this user")
    return found[1]


@router.post("/v1/memories/search", response_model=s.SearchResponse,
             responses=s.error_responses(409))
async def search(req: s.SearchRequest, key: Key, memory: AsyncMem) -> Any:
    require_scope(key, req.user_id)
    hits = await memory.search(
        req.query, user_id=req.user_id, top_k=req.top_k,
        filters=req.filters.model_dump(mode="json", exclude_none=True) if req.filters else None,
        threshold=req.threshold, min_version=req.min_version, as_of=req.as_of,
        timezone=req.timezone)
    return {"results": hits}


@router.post("/v1/context", response_model=s.ContextResponse,
             responses=s.error_responses(409))
async def context(req: s.ContextRequest, key: Key, memory: AsyncMem) -> Any:
    require_scope(key, req.user_id)
    text = await memory.context(req.query, user_id=req.user_id, session_id=req.session_id,
                                min_version=req.min_version, as_of=req.as_of,
                                timezone=req.timezone)
    return {"context": text}


@router.get("/v1/memories", response_model=s.ListResponse,
            responses=s.error_responses(409))
async def list_memories(key: Key, memory: AsyncMem, user_id: s.UserIdQuery,
                        cursor: s.CursorQuery = None,
                        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
                        min_version: MinVersion = None,
                        as_of: Annotated[AwareDatetime | None,
                                         Query(description=s.AS_OF)] = None) -> Any:
    require_scope(key, user_id)
    page = await memory.get_all(user_id=user_id, limit=limit, cursor=cursor,
                                min_version=min_version, as_of=as_of)
    return {"items": page.items, "next_cursor": page.next_cursor}


@router.get("/v1/memories/{memory_id:memray_id}/history", response_model=list[s.MemoryEvent])
async def history(memory_id: s.MemoryIdPath, user_id: s.UserIdQuery, key: Key,
                  memory: AsyncMem) -> Any:
    require_scope(key, user_id)
    return await memory.history(memory_id, user_id=user_id)


@router.get("/v1/memories/{memory_id:memray_id}", response_model=s.MemoryRecord,
            responses=s.error_responses(404, 409))
async def get(memory_id: s.MemoryIdPath, user_id: s.UserIdQuery, key: Key,
              memory: AsyncMem, min_version: MinVersion = None) -> Any:
    require_scope(key, user_id)
    record = await memory.get(memory_id, user_id=user_id, min_version=min_version)
    if record is None:
        raise ApiError(404, "not_found", f"no memory {memory_id} for this user")
    return record


@router.put("/v1/memories/{memory_id:memray_id}", response_model=s.MemoryEvent,
            responses=s.error_responses(404))
async def update(memory_id: s.MemoryIdPath, user_id: s.UserIdQuery, req: s.UpdateRequest,
                 key: Key, memory: AsyncMem) -> Any:
    require_scope(key, user_id)
    return await memory.update(memory_id, req.content, user_id=user_id)


@router.delete("/v1/memories/{memory_id:memray_id}", response_model=s.MemoryEvent,
               responses=s.error_responses(404))
async def delete(memory_id: s.MemoryIdPath, user_id: s.UserIdQuery, key: Key,
                 memory: AsyncMem) -> Any:
    require_scope(key, user_id)
    return await memory.delete(memory_id, user_id=user_id)


@router.delete("/v1/users/{user_id}/memories", response_model=s.DeleteAllResponse)
async def delete_all(user_id: s.UserIdPath, key: Key, memory: AsyncMem) -> Any:
    require_scope(key, user_id)
    receipt = await memory.delete_all(user_id=user_id)
    return {"deleted": receipt.deleted, "version": await memory.version(user_id=user_id),
            "receipt": receipt}


@router.get("/v1/users/{user_id}/deletions", response_model=list[s.DeletionReceipt])
async def deletions(user_id: s.UserIdPath, key: Key, memory: AsyncMem) -> Any:
    """The user's deletion receipts (ids and counts per store, no content), oldest first."""
    require_scope(key, user_id)
    return await memory.deletions(user_id=user_id)


@router.get("/v1/users/{user_id}/deletions/verify", response_model=list[s.DeletionCheck])
async def verify_deletions(user_id: s.UserIdPath, key: Key, memory: AsyncMem) -> Any:
    """Each receipt checked again now: its digest matches and no store holds its ids."""
    require_scope(key, user_id)
    return await memory.verify_deletions(user_id=user_id)


@router.get("/v1/users/{user_id}/export")
async def export(user_id: s.UserIdPath, key: Key, memory: AsyncMem) -> Any:
    require_scope(key, user_id)
    return await memory.export(user_id=user_id)


def _job_reply(job: dict[str, Any], run_async: bool) -> Any:
    if run_async or job["result"] is None:
        return JSONResponse(s.JobResponse(**job).model_dump(mode="json"), status_code=202)
    return s.AddResponse.model_validate(job["result"])


async def _handler(request: Request, exc: Exception) -> Response:
    if isinstance(exc, StarletteHTTPException) and exc.status_code == 405:
        exc = StarletteHTTPException(405, exc.detail, headers={"Allow": _allowed(request)})
    return error_response(exc)


def _allowed(request: Request) -> str:
    """Every method served at the request's path: Starlette's 405 names only the methods
    of the first route that matched the path, not those of the others at that path."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        if route.matches(request.scope)[0] != Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return ", ".join(sorted(methods))

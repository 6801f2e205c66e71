"""`build_api(memory, keys)`: the REST API v1 as a FastAPI app. Routes only authenticate,
check scope and call `Memory`; errors are mapped by `errors.error_response`."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Header, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response

from memray.api import schemas as s
from memray.api.auth import ApiKey, KeyRing, require_scope
from memray.api.errors import ApiError, error_response
from memray.api.jobs import JobQueue
from memray.core.memory import Memory
from memray.errors import MemrayError


class ApiLimits(BaseModel):
    max_body_bytes: int = Field(1_000_000, gt=0, description="Larger bodies: 413.")
    max_messages: int = Field(200, gt=0, description="More messages in one add: 413.")


def _add_kwargs(req: s.AddRequest) -> dict[str, Any]:
    messages: Any = req.messages if isinstance(req.messages, str) else [
        m.model_dump() for m in req.messages]
    return {"messages": messages, "user_id": req.user_id, "session_id": req.session_id,
            "agent_id": req.agent_id, "metadata": req.metadata, "infer": req.infer,
            "consent": req.consent}


def build_api(memory: Memory, keys: KeyRing, *, limits: ApiLimits | None = None,
              job_lease_s: float = 120.0) -> FastAPI:
    """The app; `memory` must outlive it. Async adds are queued in `memory`'s log (shared
    by every replica in cluster mode); a job whose process died is taken over after
    `job_lease_s` seconds. Call `app.state.jobs.close()` on shutdown."""
    app = FastAPI(title="memray", version="1", description="Long-term memory for AI agents.")
    app.state.memory, app.state.keys = memory, keys
    app.state.limits = limits or ApiLimits()

    def run_add(request: dict[str, Any]) -> dict[str, Any]:
        return memory.add(**request).model_dump(mode="json")

    app.state.jobs = JobQueue(memory.turn_log(), run_add, lease_s=job_lease_s)
    app.state.jobs.open()
    for exc_type in (ApiError, RequestValidationError, StarletteHTTPException, MemrayError,
                     Exception):
        app.add_exception_handler(exc_type, _handler)
    _install_metrics(app)
    app.include_router(router)
    return app


def _install_metrics(app: FastAPI) -> None:
    registry = CollectorRegistry()
    requests = Counter("memray_requests", "HTTP requests", ["route", "status"],
                       registry=registry)
    latency = Histogram("memray_request_seconds", "Request latency", ["route"],
                        registry=registry)
    app.state.registry = registry
    limit = app.state.limits.max_body_bytes

    @app.middleware("http")
    async def measure(request: Request,
                      call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        size = request.headers.get("content-length")
        if size is not None and (not size.isdigit() or int(size) > limit):
            return error_response(ApiError(413, "payload_too_large", f"body over {limit} bytes"))
        start = time.perf_counter()
        response = await call_next(request)
        name = getattr(request.scope.get("route"), "path", "unmatched")
        latency.labels(name).observe(time.perf_counter() - start)
        requests.labels(name, str(response.status_code)).inc()
        return response


def _principal(request: Request, authorization: Annotated[str | None, Header()] = None,
               x_api_key: Annotated[str | None, Header()] = None) -> ApiKey:
    token = x_api_key
    if authorization and authorization.lower().startswith("bearer "):
        token = authorization[7:].strip()
    keys: KeyRing = request.app.state.keys
    return keys.authenticate(token)


def _memory(request: Request) -> Memory:
    memory: Memory = request.app.state.memory
    return memory


def _jobs(request: Request) -> JobQueue:
    jobs: JobQueue = request.app.state.jobs
    return jobs


Key = Annotated[ApiKey, Depends(_principal)]
MinVersion = Annotated[int | None, Query(ge=0, description="Read at least this memory "
                                         "version of the user; 409 if not reached.")]
Mem = Annotated[Memory, Depends(_memory)]
Jobs = Annotated[JobQueue, Depends(_jobs)]
router = APIRouter()


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/metrics")
def metrics(request: Request) -> Response:
    return Response(generate_latest(request.app.state.registry),
                    media_type="text/plain; version=0.0.4")


@router.post("/v1/memories", response_model=s.AddResponse | s.JobResponse,
             responses={202: {"model": s.JobResponse}})
async def add(req: s.AddRequest, key: Key, memory: Mem, jobs: Jobs, request: Request) -> Any:
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
    result = await run_in_threadpool(lambda: memory.add(**_add_kwargs(req)))
    body = result.model_dump(mode="json")
    if req.idempotency_key:
        await run_in_threadpool(jobs.record, req.user_id, req.idempotency_key, body)
    return s.AddResponse.model_validate(body)


@router.get("/v1/jobs/{job_id}", response_model=s.JobResponse)
async def job(job_id: str, user_id: str, key: Key, jobs: Jobs) -> Any:
    require_scope(key, user_id)
    found = await run_in_threadpool(jobs.get, job_id)
    if found is None or found[0] != user_id:
        raise ApiError(404, "not_found", f"no job {job_id} for this user")
    return found[1]


@router.post("/v1/memories/search", response_model=s.SearchResponse)
async def search(req: s.SearchRequest, key: Key, memory: Mem) -> Any:
    require_scope(key, req.user_id)
    hits = await run_in_threadpool(lambda: memory.search(
        req.query, user_id=req.user_id, top_k=req.top_k, filters=req.filters,
        threshold=req.threshold, min_version=req.min_version))
    return {"results": hits}


@router.post("/v1/context", response_model=s.ContextResponse)
async def context(req: s.ContextRequest, key: Key, memory: Mem) -> Any:
    require_scope(key, req.user_id)
    text = await run_in_threadpool(lambda: memory.context(
        req.query, user_id=req.user_id, session_id=req.session_id,
        min_version=req.min_version))
    return {"context": text}


@router.get("/v1/memories", response_model=s.ListResponse)
async def list_memories(key: Key, memory: Mem, user_id: str, cursor: str | None = None,
                        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
                        min_version: MinVersion = None) -> Any:
    require_scope(key, user_id)
    page = await run_in_threadpool(lambda: memory.get_all(
        user_id=user_id, limit=limit, cursor=cursor, min_version=min_version))
    return {"items": page.items, "next_cursor": page.next_cursor}


@router.get("/v1/memories/{memory_id}/history", response_model=list[s.MemoryEvent])
async def history(memory_id: str, user_id: str, key: Key, memory: Mem) -> Any:
    require_scope(key, user_id)
    return await run_in_threadpool(lambda: memory.history(memory_id, user_id=user_id))


@router.get("/v1/memories/{memory_id}", response_model=s.MemoryRecord)
async def get(memory_id: str, user_id: str, key: Key, memory: Mem,
              min_version: MinVersion = None) -> Any:
    require_scope(key, user_id)
    record = await run_in_threadpool(lambda: memory.get(memory_id, user_id=user_id,
                                                        min_version=min_version))
    if record is None:
        raise ApiError(404, "not_found", f"no memory {memory_id} for this user")
    return record


@router.put("/v1/memories/{memory_id}", response_model=s.MemoryEvent)
async def update(memory_id: str, user_id: str, req: s.UpdateRequest, key: Key,
                 memory: Mem) -> Any:
    require_scope(key, user_id)
    return await run_in_threadpool(lambda: memory.update(memory_id, req.content,
                                                         user_id=user_id))


@router.delete("/v1/memories/{memory_id}", response_model=s.MemoryEvent)
async def delete(memory_id: str, user_id: str, key: Key, memory: Mem) -> Any:
    require_scope(key, user_id)
    return await run_in_threadpool(lambda: memory.delete(memory_id, user_id=user_id))


@router.delete("/v1/users/{user_id}/memories", response_model=s.DeleteAllResponse)
async def delete_all(user_id: str, key: Key, memory: Mem) -> Any:
    require_scope(key, user_id)
    deleted = await run_in_threadpool(lambda: memory.delete_all(user_id=user_id))
    return {"deleted": deleted,
            "version": await run_in_threadpool(lambda: memory.version(user_id=user_id))}


@router.get("/v1/users/{user_id}/export")
async def export(user_id: str, key: Key, memory: Mem) -> Any:
    require_scope(key, user_id)
    return await run_in_threadpool(lambda: list(memory.export(user_id=user_id)))


def _job_reply(job: dict[str, Any], run_async: bool) -> Any:
    if run_async or job["result"] is None:
        return JSONResponse(s.JobResponse(**job).model_dump(mode="json"), status_code=202)
    return s.AddResponse.model_validate(job["result"])


async def _handler(request: Request, exc: Exception) -> Response:
    return error_response(exc)

"""Request and response bodies. Unknown fields are rejected (422)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memray.models import MemoryEvent, MemoryRecord, SearchHit

__all__ = ["MemoryEvent", "MemoryRecord", "SearchHit"]

_STRICT = ConfigDict(extra="forbid", populate_by_name=True)


class ChatMessage(BaseModel):
    model_config = _STRICT

    role: Literal["user", "assistant", "system", "tool"]
    content: str


class AddRequest(BaseModel):
    model_config = _STRICT

    user_id: str
    messages: str | list[ChatMessage]
    session_id: str | None = None
    agent_id: str | None = None
    metadata: dict[str, Any] | None = None
    infer: bool = True
    consent: int | None = Field(None, ge=0, le=2)
    run_async: bool = Field(False, alias="async", description="202 once durably queued.")
    idempotency_key: str | None = Field(None, min_length=1, max_length=200)


class SearchRequest(BaseModel):
    model_config = _STRICT

    user_id: str
    query: str
    top_k: int | None = Field(None, ge=1, le=1024)
    filters: dict[str, Any] | None = None
    threshold: float | None = Field(None, ge=-1, le=1)
    min_version: int | None = Field(None, ge=0, description="Read at least this memory "
                                    "version of the user (from a write's `version`); 409 "
                                    "if the log does not reach it within the bounded wait.")


class ContextRequest(BaseModel):
    model_config = _STRICT

    user_id: str
    query: str
    session_id: str | None = None
    min_version: int | None = Field(None, ge=0, description="As in search.")


class UpdateRequest(BaseModel):
    model_config = _STRICT

    content: str


class AddResponse(BaseModel):
    events: list[MemoryEvent]
    pending_turns: int = 0
    version: int = Field(0, description="The user's memory version after this add.")


class JobResponse(BaseModel):
    job_id: str
    status: Literal["queued", "done", "failed"]
    result: AddResponse | None = None
    error: str | None = None


class SearchResponse(BaseModel):
    results: list[SearchHit]


class ContextResponse(BaseModel):
    context: str


class ListResponse(BaseModel):
    items: list[MemoryRecord]
    next_cursor: str | None


class DeleteAllResponse(BaseModel):
    deleted: int
    version: int = Field(description="The user's memory version after the deletion.")

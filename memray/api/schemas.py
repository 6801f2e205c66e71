"""Request and response bodies, path and query parameters, and the `{error, detail}`
error responses, declared as the API checks them, so the OpenAPI document says what the
API does. Unknown fields are rejected (422)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import FastAPI, Path, Query
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
)
from starlette.convertors import Convertor, register_url_convertor

from memray.core import validate
from memray.core.validate import MAX_SCOPE_BYTES, ZONES
from memray.errors import InvalidInputError
from memray.models import (
    DeletionCheck,
    DeletionReceipt,
    MemoryEvent,
    MemoryRecord,
    MemoryType,
    SearchHit,
)

__all__ = ["DeletionCheck", "DeletionReceipt", "MemoryEvent", "MemoryRecord", "SearchHit"]

_STRICT = ConfigDict(extra="forbid", populate_by_name=True)


def _not_str_or_bool(value: Any) -> Any:
    if isinstance(value, str | bool):
        raise ValueError("must be a JSON number, not a string or boolean")
    return value


def _iso_only(value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError("must be an ISO-8601 date-time string")
    return value


# JSON types as the schema states them: `"async": 0`, `"top_k": "5"` or `"timestamp": 0`
# are a 422 (pydantic's lax mode would take them); `1.0` stays an integer, as in JSON Schema.
StrictBool = Annotated[bool, Field(strict=True)]
JSON_NUMBER = BeforeValidator(_not_str_or_bool)  # after the bounds, so they stay in the schema
Version = Annotated[int, Field(ge=0), JSON_NUMBER]
IsoTime = Annotated[AwareDatetime, BeforeValidator(_iso_only)]
AS_OF = ("What was true at this time (ISO 8601 with an offset) instead of now: memories "
         "superseded by a later correction are included while they held, deleted ones never.")

# What `str.strip()` removes (core/validate.py): Unicode White_Space plus U+001C..U+001F.
# Written out, since `\s` differs between the regex dialects that read this pattern
# (ECMA counts U+FEFF, Python counts U+001C..U+001F, Rust neither).
_BLANK = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
NON_BLANK = f"^[^\x00]*[^\x00{_BLANK}][^\x00]*$"
NO_NUL = "^[^\x00]*$"
MEMORY_ID = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
# Over REST an id must fit in a URL: three of them (mem0's delete_all takes user, agent
# and run ids as query parameters), each character percent-encoded as up to 12 ASCII
# characters (4 UTF-8 bytes), stay under the guard's default 8,192 (`max_url_chars`), so a
# request the schema allows is never a 414. The Python API takes up to MAX_SCOPE_BYTES.
MAX_REST_ID_CHARS = 200
_SCOPE = (f"Not blank, no NUL, at most {MAX_REST_ID_CHARS} characters, so that any id fits "
          "in a URL under the server's default 8,192-character limit (the Python API takes "
          f"up to {MAX_SCOPE_BYTES} bytes).")
_MID = "A memory id as memray issues them: a lower-case UUID (v7)."



class MemoryIdConvertor(Convertor[str]):
    """`{memory_id:memray_id}` in a route path: only a memory id matches, so a path that
    is not one (`/v1/memories/search`) is not taken for one; a wrong method on it is a
    405 with `Allow`, not another route's 401 or 422."""

    regex = MEMORY_ID[1:-1]

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("memray_id", MemoryIdConvertor())

ScopeId = Annotated[str, Field(min_length=1, max_length=MAX_REST_ID_CHARS, pattern=NON_BLANK,
                               description=_SCOPE)]
UserIdQuery = Annotated[str, Query(min_length=1, max_length=MAX_REST_ID_CHARS,
                                   pattern=NON_BLANK, description=_SCOPE)]
UserIdPath = Annotated[str, Path(min_length=1, max_length=MAX_REST_ID_CHARS, pattern=NON_BLANK,
                                 description=_SCOPE)]
MemoryIdPath = Annotated[str, Path(pattern=MEMORY_ID, description=_MID)]
JobIdPath = Annotated[str, Path(pattern=MEMORY_ID, description="The `job_id` an "
                                "asynchronous add returned (a lower-case UUID).")]
CursorQuery = Annotated[str | None, Query(pattern=MEMORY_ID, description="The `next_cursor` "
                                          "of the previous page (a memory id).")]
Text = Annotated[str, Field(pattern=NON_BLANK, description="Not blank, no NUL; at most the "
                            "server's `max_content_chars` (2000 by default) characters.")]


class ValidationIssue(BaseModel):
    loc: list[str | int]
    msg: str
    type: str | None = None


class ErrorBody(BaseModel):
    """Every error: a stable code and what was wrong."""

    error: str = Field(description="unauthorized, forbidden, not_found, validation_error, "
                       "invalid_input, version_not_reached, payload_too_large, "
                       "too_many_messages, extraction_failed, store_unavailable, http_error.")
    detail: str | list[ValidationIssue] | None = Field(
        description="A message; for validation_error, where and what.")


_WHY = {
    400: "The body is not JSON.",
    401: "Missing or unknown API key.",
    403: "The key may not act for that user (says nothing about any memory).",
    404: "No such memory (or job) for this user; another user's id reads the same.",
    409: "`min_version` not reached within the bounded wait.",
    413: "Body over the server's limit, or too many messages.",
    414: "Path and query string over the server's limit.",
    422: "Invalid input (schema, or a rule the schema cannot express).",
    429: "Over the key's rate limit (when one is configured); see `Retry-After`.",
    502: "The extraction model failed.",
    503: "The store or the embedder is unavailable; retry.",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for these status codes, each with the `{error, detail}` body."""
    return {code: {"model": ErrorBody, "description": _WHY[code]} for code in codes}


_EVERY = (413, 414, 429)  # the guard, before any route (memray/api/guard.py)
_KEYED = (401, 403, 422, 503)  # a route that takes a key: auth, scope, input, store


def document_errors(app: FastAPI) -> None:
    """Make `app.openapi()` declare the errors every route shares, as `{error, detail}`:
    the guard's on every operation, and auth, scope, validation and store errors on every
    operation that takes an API key (FastAPI's own 422 body is not what the API sends).
    A route's own errors (404, 409, 502) are in its decorator."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        doc = build()
        ref = "#/components/schemas/{model}"
        body = ErrorBody.model_json_schema(ref_template=ref)
        components = doc.setdefault("components", {}).setdefault("schemas", {})
        components.update(body.pop("$defs", {}))
        components["ErrorBody"] = body
        components.pop("HTTPValidationError", None)
        components.pop("ValidationError", None)
        for path in doc.get("paths", {}).values():
            for op in path.values():
                _declare(op)
        app.openapi_schema = doc
        return doc

    app.openapi = openapi  # type: ignore[method-assign]


def _declare(op: dict[str, Any]) -> None:
    keyed = any(p.get("name") == "authorization" for p in op.get("parameters", []))
    body = (400,) if "requestBody" in op else ()  # a body that is not JSON
    responses = op.setdefault("responses", {})
    for code in (*_EVERY, *(_KEYED if keyed else ()), *body):
        responses[str(code)] = {"description": _WHY[code], "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/ErrorBody"}}}}


class ChatMessage(BaseModel):
    model_config = _STRICT

    role: Literal["user", "assistant", "system", "tool"]
    content: str = Field(pattern=NO_NUL, description="No NUL. A user turn: at most the "
                         "server's `max_content_chars` (2000 by default); other turns ten "
                         "times that. Blank turns are skipped.")
    name: str | None = Field(None, max_length=200)
    timestamp: IsoTime | None = Field(None, description="When it was said; kept as the "
                                            "memory's `occurred_at`.")
    reply_to: str | None = Field(None, description="The turn it answers (default: the "
                                 "message before it).")


class AddRequest(BaseModel):
    model_config = _STRICT

    user_id: ScopeId
    messages: Annotated[str, Field(pattern=NO_NUL)] | list[ChatMessage] = Field(
        description="A bare string is one user turn.")
    session_id: ScopeId | None = None
    agent_id: ScopeId | None = None
    metadata: dict[str, Any] | None = None
    infer: StrictBool = True
    consent: Annotated[int, Field(ge=0, le=2), JSON_NUMBER] | None = None
    timestamp: IsoTime | None = Field(None, description="The time of messages that "
                                            "carry none of their own.")
    run_async: StrictBool = Field(False, alias="async", description="202 once durably queued.")
    idempotency_key: str | None = Field(None, min_length=1, max_length=200)


class SearchFilters(BaseModel):
    """What `search` narrows to (core/search_filters.py); a null is the same as leaving it out."""

    model_config = _STRICT

    type: MemoryType | Annotated[list[MemoryType], Field(min_length=1)] | None = Field(
        None, description="A memory type, or a non-empty list of them.")
    agent_id: ScopeId | None = None
    session_id: ScopeId | None = None
    created_after: IsoTime | None = None
    created_before: IsoTime | None = None
    min_importance: Annotated[float, Field(ge=-1, le=1), JSON_NUMBER] | None = None


# The zones this server knows, listed in the schema: a name it would refuse is not
# schema-valid (the message of a refusal stays short; pydantic's enum one lists them all).
_ZONES = sorted(ZONES)


def _known_zone(name: str) -> str:
    try:
        validate.zone(name)
    except InvalidInputError as exc:  # pydantic reports a ValueError as a 422 on the field
        raise ValueError(str(exc)) from exc
    return name


TimeZone = Annotated[str, AfterValidator(_known_zone), Field(
    json_schema_extra={"enum": _ZONES}, description=(
        "The user's IANA time zone (e.g. Asia/Shanghai), whose calendar days \"yesterday\" "
        "and \"last week\" in the query and the days memories were said are read in. "
        "Default: the server's `recall.timezone`."))]


class SearchRequest(BaseModel):
    model_config = _STRICT

    user_id: ScopeId
    query: Text
    top_k: Annotated[int, Field(ge=1, le=1024), JSON_NUMBER] | None = None
    filters: SearchFilters | None = None
    threshold: Annotated[float, Field(ge=-1, le=1), JSON_NUMBER] | None = None
    min_version: Version | None = Field(None, description="Read at least this memory "
                                        "version of the user (from a write's `version`); "
                                        "409 if the log does not reach it within the "
                                        "bounded wait.")
    as_of: IsoTime | None = Field(None, description=AS_OF)
    timezone: TimeZone | None = None


class ContextRequest(BaseModel):
    model_config = _STRICT

    user_id: ScopeId
    query: Text
    session_id: ScopeId | None = None
    min_version: Version | None = Field(None, description="As in search.")
    as_of: IsoTime | None = Field(None, description=AS_OF + " A fact that stopped holding "
                                  "says until when.")
    timezone: TimeZone | None = None


class UpdateRequest(BaseModel):
    model_config = _STRICT

    content: Text


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
    receipt: DeletionReceipt = Field(description="What was removed from each store, "
                                     "verified by re-reading it.")

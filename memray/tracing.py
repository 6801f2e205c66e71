"""OpenTelemetry spans for memory operations, after the GenAI memory conventions.

Off unless enabled (`tracing.enabled` in the config, else env MEMRAY_TRACING) and
`opentelemetry-api` is importable (the `otel` extra). Spans go to the tracer provider
the application installs (the SDK and an exporter of its choice); memray installs none
and sends nothing anywhere by itself.

What is emitted (semantic-conventions-genai, `gen_ai.memory.client`, development):

- one span per public `Memory` call, named by `gen_ai.operation.name` and of kind
  INTERNAL (the store runs in this process or behind it): `add` is `upsert_memory` (the
  caller does not choose between create, update and merge), `update` is
  `update_memory`, `delete` and `delete_all` are `delete_memory` (the latter without
  `gen_ai.memory.record.id`, which the convention reads as "all records"), and the
  reads (`search`, `context`, `get`, `get_all`, `history`) are `search_memory`;
  `memray.method` names the method. Attributes: `gen_ai.memory.store.id` (the store
  alias), `gen_ai.memory.record.id`, `gen_ai.memory.record.count`, `error.type`;
- children: each extraction LLM request (`chat {model}`, kind CLIENT, GenAI inference
  attributes with token usage) and each vector store call (`{operation} {collection}`,
  kind CLIENT, database attributes: `db.system.name` milvus ...).

Content (`gen_ai.memory.query.text`, `gen_ai.memory.records`, `gen_ai.input.messages`,
`gen_ai.output.messages`, `user.id`) is recorded only when `tracing.capture_content` (env
MEMRAY_TRACING_CONTENT) is true. A call made inside another memray call (`context`
calling `search`, `update` reading the record first) adds no second memory span.

Disabled, a decorated call costs a few attribute reads (about 1 µs measured, against
milliseconds for a search) and the store and LLM helpers one context-variable read,
returning one shared no-op context manager (`NOOP`).
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast
from urllib.parse import urlsplit

from memray.models import (
    AddResult,
    DeletionReceipt,
    MemoryEvent,
    MemoryRecord,
    Page,
    SearchHit,
)

if TYPE_CHECKING:
    from memray.config import MemoryConfig
    from memray.settings import Settings

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])
SCOPE = "memray"


@dataclass(frozen=True)
class _Active:
    tracer: Any
    content: bool


class _Noop:
    """The span handed out when tracing is off: every method does nothing."""

    def __enter__(self) -> _Noop:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        return None

    def set(self, key: str, value: Any) -> None:
        return None

    def content(self, key: str, value: Callable[[], Any]) -> None:
        return None


NOOP = _Noop()


class Span:
    """A live span: `set` records an attribute, `content` one only when content capture
    is on (`value` is called only then, so building it costs nothing otherwise)."""

    def __init__(self, active: _Active, name: str, kind: str,
                 attributes: dict[str, Any]) -> None:
        self._active, self._name, self._kind, self._attributes = active, name, kind, attributes
        self._span: Any = None
        self._scope: Any = None
        self._token: Any = None

    def __enter__(self) -> Span:
        from opentelemetry.trace import SpanKind

        self._scope = self._active.tracer.start_as_current_span(
            self._name, kind=getattr(SpanKind, self._kind), attributes=self._attributes,
            record_exception=True, set_status_on_exception=True)
        self._span = self._scope.__enter__()
        self._token = _current.set(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        _current.reset(self._token)
        if exc_type is not None:
            self._span.set_attribute("error.type", exc_type.__qualname__)
        self._scope.__exit__(exc_type, exc, tb)

    @property
    def captures_content(self) -> bool:
        return self._active.content

    def set(self, key: str, value: Any) -> None:
        if value is not None:
            self._span.set_attribute(key, value)

    def content(self, key: str, value: Callable[[], Any]) -> None:
        if self._active.content:
            self.set(key, value())


# The memray span in progress in this context (None: outside any traced memory call).
_current: ContextVar[Span | None] = ContextVar("memray_span", default=None)


@functools.cache
def _get_tracer() -> Any:
    """The `memray` tracer of the global provider (a proxy until the application sets
    one); None, with one warning, without opentelemetry-api."""
    try:
        from opentelemetry import trace
    except ImportError:
        log.warning("tracing is enabled but opentelemetry-api is not installed "
                    "(pip install 'memray-ai[otel]'); no spans are emitted")
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        own: str | None = version("memray-ai")
    except PackageNotFoundError:
        own = None
    return trace.get_tracer(SCOPE, own)


class Traced(Protocol):
    """What a traced surface (`Memory`, `AsyncMemory`) tells tracing about itself."""

    @property
    def config(self) -> MemoryConfig: ...

    @property
    def settings(self) -> Settings: ...


def _resolve(memory: Traced) -> _Active | None:
    """Tracing settings of a `Memory` (its config, else its env settings); None: off."""
    cfg, settings = memory.config.tracing, memory.settings
    enabled = cfg.enabled if cfg.enabled is not None else settings.tracing
    if not enabled:
        return None
    tracer = _get_tracer()
    if tracer is None:
        return None
    content = cfg.capture_content if cfg.capture_content is not None else \
        settings.tracing_content
    return _Active(tracer, bool(content))


# -- memory operations -----------------------------------------------------------------
class _Call:
    """The span of one memory call, entered with the call's user and query (content)."""

    def __init__(self, span: Span, call: dict[str, Any]) -> None:
        self._span, self._call = span, call

    def __enter__(self) -> Span:
        span, call = self._span.__enter__(), self._call
        span.content("user.id", lambda: _text(call.get("user_id")))
        if isinstance(call.get("query"), str):
            span.content("gen_ai.memory.query.text", lambda: call["query"])
        return span

    def __exit__(self, *exc: Any) -> None:
        self._span.__exit__(*exc)


def memory_operation(operation: str) -> Callable[[F], F]:
    """Decorate a public `Memory` method: one `gen_ai.memory.client` span per call."""
    def wrap(fn: F) -> F:
        signature = inspect.signature(fn)

        def opened(self: Any, args: Any, kwargs: Any) -> _Call | None:
            active = _resolve(self)
            if active is None or _current.get() is not None:
                return None
            call = signature.bind(self, *args, **kwargs).arguments
            attributes = {"gen_ai.operation.name": operation, "memray.method": fn.__name__,
                          "gen_ai.memory.store.id": self.config.store.alias}
            if isinstance(call.get("memory_id"), str):
                attributes["gen_ai.memory.record.id"] = call["memory_id"]
            return _Call(Span(active, operation, "INTERNAL", attributes), call)

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def traced_async(self: Any, *args: Any, **kwargs: Any) -> Any:
                traced_call = opened(self, args, kwargs)
                if traced_call is None:
                    return await fn(self, *args, **kwargs)
                with traced_call as span:
                    result = await fn(self, *args, **kwargs)
                    _describe(span, result)
                    return result

            return cast(F, traced_async)

        @functools.wraps(fn)
        def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
            traced_call = opened(self, args, kwargs)
            if traced_call is None:
                return fn(self, *args, **kwargs)
            with traced_call as span:
                result = fn(self, *args, **kwargs)
                _describe(span, result)
                return result

        return cast(F, traced)

    return wrap


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _describe(span: Span, result: Any) -> None:
    """Record count and (opt-in) records of what a memory call returned."""
    records: list[dict[str, Any]] | None = None
    if isinstance(result, AddResult):
        changed = [e for e in result.events if e.op != "NOOP"]
        span.set("gen_ai.memory.record.count", len(changed))
        records = [_event_record(e) for e in changed if e.memory is not None]
    elif isinstance(result, MemoryEvent):
        span.set("gen_ai.memory.record.count", 1)
        records = [_event_record(result)] if result.memory is not None else None
    elif isinstance(result, Page):
        span.set("gen_ai.memory.record.count", len(result.items))
        records = [_record(r) for r in result.items]
    elif isinstance(result, MemoryRecord) or result is None:
        span.set("gen_ai.memory.record.count", 0 if result is None else 1)
        records = [] if result is None else [_record(result)]
    elif isinstance(result, DeletionReceipt):
        span.set("gen_ai.memory.record.count", result.deleted)
        span.set("memray.deletion.verified", result.verified)
    elif isinstance(result, int) and not isinstance(result, bool):
        span.set("gen_ai.memory.record.count", result)
    elif isinstance(result, list) and all(isinstance(h, SearchHit) for h in result):
        hits = cast(list[SearchHit], result)
        span.set("gen_ai.memory.record.count", len(hits))
        records = [{**_record(h.memory), "score": round(h.score, 6)} for h in hits]
    if records is not None:
        found = records
        span.content("gen_ai.memory.records", lambda: json.dumps(found, ensure_ascii=False))


def _record(record: MemoryRecord) -> dict[str, Any]:
    """One entry of `gen_ai.memory.records` (its JSON schema: content, id, metadata)."""
    return {"content": record.content, "id": record.id,
            "metadata": {"type": record.type.value, "status": record.status.value}}


def _event_record(event: MemoryEvent) -> dict[str, Any]:
    assert event.memory is not None
    entry = _record(event.memory)
    entry["metadata"]["op"] = event.op
    return entry


# -- children: store and LLM calls -------------------------------------------------------
def store_call(operation: str) -> Callable[[F], F]:
    """Decorate a `MilvusStore` method: a database CLIENT span, only inside a traced
    memory call. The store's `uri` and `collection` name the server and collection."""
    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
            parent = _current.get()
            if parent is None:
                return fn(self, *args, **kwargs)
            collection = self.collection
            attributes: dict[str, Any] = {"db.system.name": "milvus",
                                          "db.operation.name": operation}
            if collection:
                attributes["db.collection.name"] = collection
            attributes.update(_server(self.uri))
            name = f"{operation} {collection}" if collection else operation
            with Span(parent._active, name, "CLIENT", attributes) as span:
                result = fn(self, *args, **kwargs)
                if isinstance(result, list):
                    span.set("db.response.returned_rows", len(result))
                return result

        return cast(F, traced)

    return wrap


def _server(uri: str) -> dict[str, Any]:
    """server.address / server.port of a Milvus server URI; none for milvus-lite."""
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https", "tcp", "grpc") or not parts.hostname:
        return {}
    out: dict[str, Any] = {"server.address": parts.hostname}
    if parts.port is not None:
        out["server.port"] = parts.port
    return out


def chat(model: str, base_url: str, messages: Sequence[dict[str, str]]) -> Span | _Noop:
    """A `chat {model}` CLIENT span around one LLM request, only inside a traced memory
    call; pass the response to `chat_answer`. The endpoint speaks OpenAI's protocol,
    hence `gen_ai.provider.name` "openai" whatever serves it."""
    parent = _current.get()
    if parent is None:
        return NOOP
    attributes: dict[str, Any] = {"gen_ai.operation.name": "chat",
                                  "gen_ai.provider.name": "openai",
                                  "gen_ai.request.model": model,
                                  "gen_ai.output.type": "json",
                                  **_server(base_url)}
    if parent.captures_content:
        attributes["gen_ai.input.messages"] = json.dumps(
            [_message(m.get("role", "user"), m.get("content", "")) for m in messages],
            ensure_ascii=False)
    return Span(parent._active, f"chat {model}", "CLIENT", attributes)


def _message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def chat_answer(span: Span | _Noop, answer: Any) -> None:
    """Record an OpenAI chat-completion response (the parsed JSON) on a `chat` span."""
    if not isinstance(span, Span) or not isinstance(answer, dict):
        return
    span.set("gen_ai.response.model", _text(answer.get("model")))
    span.set("gen_ai.response.id", _text(answer.get("id")))
    usage = answer.get("usage")
    if isinstance(usage, dict):
        span.set("gen_ai.usage.input_tokens", usage.get("prompt_tokens"))
        span.set("gen_ai.usage.output_tokens", usage.get("completion_tokens"))
    choices = [c for c in answer.get("choices") or () if isinstance(c, dict)]
    reasons = [c.get("finish_reason") for c in choices]
    span.set("gen_ai.response.finish_reasons", [r for r in reasons if isinstance(r, str)])
    span.content("gen_ai.output.messages",
                 lambda: json.dumps([_output(c) for c in choices], ensure_ascii=False))


def _output(choice: dict[str, Any]) -> dict[str, Any]:
    message = choice.get("message") or {}
    return {**_message(str(message.get("role", "assistant")), str(message.get("content", ""))),
            "finish_reason": choice.get("finish_reason") or "stop"}

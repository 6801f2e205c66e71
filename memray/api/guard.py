"""Limits every request passes before any route: URL and query-string length, body size
(counted as it streams, so a body without Content-Length cannot slip past), a per-key
token bucket (429 with Retry-After), and an audit line, without content, for every
change and every admin request. One ASGI layer in front of all routers (REST, mem0, /ui,
/mcp), so no surface can skip it."""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol
from urllib.parse import parse_qs

from memray.api.auth import ApiKey, hash_key, presented_key
from memray.api.errors import ApiError, error_response

audit_log = logging.getLogger("memray.audit")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
_CHANGES = ("POST", "PUT", "PATCH", "DELETE")
_READ_ONLY_POSTS = ("/search", "/context", "/v3/memories/")
_READ_ONLY_TOOLS = frozenset({"search_memories", "get_memories", "get_memory",
                              "memory_history"})


class Keys(Protocol):
    def authenticate(self, presented: str | None) -> ApiKey: ...


class Limits(Protocol):
    max_body_bytes: int
    max_url_chars: int
    rate_per_s: float | None
    rate_burst: int


class TokenBuckets:
    """One bucket per key (by hash): `rate` tokens a second, at most `burst` held."""

    def __init__(self, rate: float, burst: int, *, clock: Callable[[], float] = time.monotonic,
                 max_keys: int = 100_000) -> None:
        self._rate, self._burst, self._clock, self._max = rate, float(burst), clock, max_keys
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, who: str) -> float:
        """0 when a request may go now, else the seconds until it may."""
        now = self._clock()
        with self._lock:
            tokens, at = self._buckets.get(who, (self._burst, now))
            tokens = min(self._burst, tokens + (now - at) * self._rate)
            if tokens >= 1:
                self._store(who, tokens - 1, now)
                return 0.0
            self._store(who, tokens, now)
            return (1 - tokens) / self._rate

    def _store(self, who: str, tokens: float, at: float) -> None:
        if who not in self._buckets and len(self._buckets) >= self._max:
            self._buckets.pop(next(iter(self._buckets)))  # the oldest key seen
        self._buckets[who] = (tokens, at)


class Guard:
    """The ASGI middleware; `keys` and `limits` are read per request (keys may reload)."""

    def __init__(self, app: ASGIApp, *, keys: Callable[[], Keys],
                 limits: Callable[[], Limits]) -> None:
        self.app, self._keys, self._limits = app, keys, limits
        self._buckets: TokenBuckets | None = None
        self._bucket_cfg: tuple[float, int] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limits = self._limits()
        try:
            self._check_url(scope, limits)
            token = _token(scope)
            self._check_rate(token, limits)
            receive, body = await _bounded_body(receive, limits.max_body_bytes)
        except ApiError as exc:
            response = error_response(exc)
            if isinstance(exc, _RateLimitedError):
                response.headers["Retry-After"] = str(exc.retry_after)
            await response(scope, receive, send)
            self._audit(scope, None, exc.status, None)
            return
        tool = _mcp_tool(body) if scope["path"].rstrip("/").endswith("/mcp") else None
        audited: list[bool] = []

        # The line is written before the response leaves, so a caller who has the answer
        # can already read its audit line (after the body it raced the next request).
        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                audited.append(True)
                self._audit(scope, token, int(message["status"]), tool)
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            if not audited:
                self._audit(scope, token, 500, tool)

    @staticmethod
    def _check_url(scope: Scope, limits: Limits) -> None:
        size = len(scope.get("raw_path") or scope["path"]) + len(scope.get("query_string", b""))
        if size > limits.max_url_chars:
            raise ApiError(414, "uri_too_long", f"path and query over {limits.max_url_chars} "
                           "characters")

    def _check_rate(self, token: str | None, limits: Limits) -> None:
        if not limits.rate_per_s:
            return
        cfg = (limits.rate_per_s, limits.rate_burst)
        if self._buckets is None or self._bucket_cfg != cfg:
            self._buckets, self._bucket_cfg = TokenBuckets(*cfg), cfg
        wait = self._buckets.take(hash_key(token) if token else "anonymous")
        if wait > 0:
            raise _RateLimitedError(math.ceil(wait))

    def _audit(self, scope: Scope, token: str | None, status: int, tool: str | None) -> None:
        method, path = scope.get("method", ""), scope["path"]
        key = self._key_of(token)
        if path.rstrip("/").endswith("/mcp"):  # JSON-RPC: a change only if the tool changes
            change = tool is not None and tool not in _READ_ONLY_TOOLS
        else:
            change = method in _CHANGES and not path.endswith(_READ_ONLY_POSTS)
        if not (change or (key is not None and key.admin)) or path in ("/healthz", "/metrics"):
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        audit_log.info(json.dumps({
            "at": round(time.time(), 3), "key": key.name if key else None,
            "admin": bool(key and key.admin), "method": method, "path": path,
            "user_id": (query.get("user_id") or [None])[0], "status": status,
            **({"tool": tool} if tool else {})}, ensure_ascii=False))

    def _key_of(self, token: str | None) -> ApiKey | None:
        if not token:
            return None
        try:
            return self._keys().authenticate(token)
        except ApiError:
            return None


class _RateLimitedError(ApiError):
    def __init__(self, retry_after: int) -> None:
        super().__init__(429, "rate_limited", f"too many requests for this key; retry in "
                         f"{retry_after} s")
        self.retry_after = retry_after


def _token(scope: Scope) -> str | None:
    headers = {k.decode("latin-1").lower(): v.decode("latin-1")
               for k, v in scope.get("headers", [])}
    return presented_key(headers.get("authorization"), headers.get("x-api-key"))


def _mcp_tool(body: bytes) -> str | None:
    """The tool a JSON-RPC `tools/call` names (its arguments are never logged)."""
    try:
        call = json.loads(body or b"null")
    except ValueError:
        return None
    if not isinstance(call, dict):
        return None
    params = call.get("params")
    if call.get("method") == "tools/call" and isinstance(params, dict) and params.get("name"):
        return str(params["name"])[:64]
    return None


async def _bounded_body(receive: Receive, limit: int) -> tuple[Receive, bytes]:
    """Read the body (at most `limit` bytes, else 413); a receive that replays it."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        if size > limit:
            raise ApiError(413, "payload_too_large", f"body over {limit} bytes")
        if not message.get("more_body", False):
            break

    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")

    async def replay() -> Message:
        return messages.pop(0) if messages else await receive()

    return replay, body

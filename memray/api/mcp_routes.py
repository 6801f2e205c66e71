"""The MCP server (memray/mcp) over streamable HTTP, as a router of the REST app
(`POST /mcp`).

Stateless JSON mode: every POST is authenticated on its own with the same keys and the
same scope rule as REST (`Authorization: Bearer <key>`, `Token <key>` or `X-API-Key`), and
each tool call checks that key's scope against the `user_id` it names. No session state
lives in the replica, so any replica can answer any request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter
from mcp.server.transport_security import TransportSecuritySettings
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from memray.api.auth import ApiKey, KeySource, key_from_headers, require_scope
from memray.api.errors import ApiError, error_response
from memray.core.memory import Memory
from memray.mcp.server import build_server

PATH = "/mcp"
_KEY = "memray.api_key"  # where the authenticated key travels in the ASGI scope


def authorize_by_key(request: Any, user_id: str) -> None:
    """The HTTP authorizer: the request's key must allow `user_id` (as `require_scope`)."""
    key: ApiKey | None = None if request is None else request.scope.get(_KEY)
    if key is None:  # never reached through `mcp_router`, which authenticates first
        raise PermissionError("no API key on this request")
    try:
        require_scope(key, user_id)
    except ApiError as exc:
        raise PermissionError(str(exc.detail)) from exc


class _Endpoint:
    """ASGI endpoint: authenticate, then hand the request to the MCP session manager."""

    def __init__(self, keys: KeySource, handle: Any) -> None:
        self._keys, self._handle = keys, handle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
        try:
            key = key_from_headers(self._keys, headers)
        except ApiError as exc:
            await error_response(exc)(scope, receive, send)
            return
        await self._handle({**scope, _KEY: key}, receive, send)


def mcp_router(memory: Memory, keys: KeySource) -> APIRouter:
    """A router serving the MCP tools at `/mcp`; include it in the app so that its
    lifespan (the MCP session manager) runs with the app's."""
    server = build_server(memory, authorize=authorize_by_key)
    # The key check stands in for DNS-rebinding protection: a page in a browser has no key.
    server.streamable_http_app(stateless_http=True, json_response=True,
                               transport_security=TransportSecuritySettings(
                                   enable_dns_rebinding_protection=False))
    manager = server.session_manager

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        async with manager.run():
            yield

    router = APIRouter(lifespan=lifespan)
    router.routes.append(Route(PATH, _Endpoint(keys, manager.handle_request),
                               methods=["GET", "POST", "DELETE"], include_in_schema=False))
    return router

"""The request dependencies every router shares: the caller's key and the app's Memory
(and its awaitable reads)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from memray.api.auth import ApiKey, KeySource, presented_key
from memray.core.aio import AsyncMemory
from memray.core.memory import Memory


async def principal(request: Request, authorization: Annotated[str | None, Header()] = None,
              x_api_key: Annotated[str | None, Header()] = None) -> ApiKey:
    """The key a request presents (Bearer, Token or X-API-Key); 401 if none or unknown."""
    keys: KeySource = request.app.state.keys
    return keys.authenticate(presented_key(authorization, x_api_key))


async def memory(request: Request) -> Memory:
    found: Memory = request.app.state.memory
    return found


async def async_memory(request: Request) -> AsyncMemory:
    found: AsyncMemory = request.app.state.async_memory
    return found


Key = Annotated[ApiKey, Depends(principal)]
Mem = Annotated[Memory, Depends(memory)]
AsyncMem = Annotated[AsyncMemory, Depends(async_memory)]

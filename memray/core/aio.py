"""Awaitable reads over a `Memory`, for servers that serve many searches at once.

`AsyncMemory.search` is `Memory.search` in three steps: the checks and the version read in
a worker thread, the query embedding awaited, the retrieval and ranking in a worker thread.
The embedding is awaited natively when the embedder has `aembed` (the Serve deployment
handle: no thread blocks while the embedding replica batches), else it runs in a worker
thread, where concurrent callers share forward passes (`BatchingEmbedder`). The logic is
the sync `Memory`'s; nothing here decides anything.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from memray import tracing
from memray.config import MemoryConfig
from memray.core.memory import Memory
from memray.core.prompt import prompt_section
from memray.embed.base import Embedder, Matrix
from memray.models import SearchHit


async def aembed(embedder: Embedder, texts: Sequence[str]) -> Matrix:
    """`embedder.embed(texts)`, awaited natively where the embedder can."""
    native = getattr(embedder, "aembed", None)
    if native is not None:
        result: Matrix = await native(texts)
        return result
    return await asyncio.to_thread(embedder.embed, texts)


class AsyncMemory:
    """The read calls of `memory` as coroutines (the writes stay on `Memory`)."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self._settings = getattr(memory, "_settings", None)  # read by tracing

    @property
    def config(self) -> MemoryConfig:
        return self.memory.config

    @tracing.memory_operation("search_memory")
    async def search(self, query: str, *, user_id: str, top_k: int | None = None,
                     filters: dict[str, Any] | None = None, threshold: float | None = None,
                     min_version: int | None = None) -> list[SearchHit]:
        """`Memory.search`, awaited (same arguments, results and errors)."""
        plan = await asyncio.to_thread(
            self.memory.search_plan, query, user_id=user_id, top_k=top_k, filters=filters,
            threshold=threshold, min_version=min_version)
        if plan is None:
            return []
        vector = (await aembed(plan.embedder, [plan.text]))[0]
        return await asyncio.to_thread(self.memory.search_found, plan, vector)

    @tracing.memory_operation("search_memory")
    async def context(self, query: str, *, user_id: str, session_id: str | None = None,
                      min_version: int | None = None) -> str:
        """`Memory.context`, awaited."""
        hits = await self.search(query, user_id=user_id, min_version=min_version)
        session = [] if session_id is None else await asyncio.to_thread(
            self.memory.session_memories, user_id=user_id, session_id=session_id)
        return prompt_section(hits, session)

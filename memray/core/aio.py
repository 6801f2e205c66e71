"""`AsyncMemory`: every method of `Memory` as a coroutine, for servers.

`search` (and `context`) run in three steps: the checks and the version read in a worker
thread, the query embedding awaited, the retrieval and ranking in a worker thread. The
embedding is awaited natively when the embedder is an `AsyncEmbedder` (the Serve
deployment handle: no thread blocks while the embedding replica batches), else it runs
in a worker thread, where concurrent callers share forward passes (`BatchingEmbedder`).
Every other method runs the sync `Memory`'s in a worker thread: the logic is the sync
one's, and nothing here decides anything. A unit test keeps the two surfaces alike.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from types import TracebackType
from typing import Any

from memray import tracing
from memray.config import MemoryConfig
from memray.core.doctor import DoctorReport
from memray.core.memory import Memory
from memray.core.profile import Profile
from memray.core.prompt import prompt_section
from memray.embed.base import AsyncEmbedder, Embedder, Matrix
from memray.models import (
    AddResult,
    DeletionCheck,
    DeletionReceipt,
    MemoryEvent,
    MemoryRecord,
    Page,
    SearchHit,
)
from memray.settings import Settings


async def aembed(embedder: Embedder, texts: Sequence[str]) -> Matrix:
    """`embedder.embed(texts)`, awaited natively where the embedder can."""
    if isinstance(embedder, AsyncEmbedder):
        return await embedder.aembed(texts)
    return await asyncio.to_thread(embedder.embed, texts)


class AsyncMemory:
    """`memory`'s methods as coroutines, with the same names, arguments, results and
    errors (`export` returns the list its sync twin yields)."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    @property
    def config(self) -> MemoryConfig:
        return self.memory.config

    @property
    def settings(self) -> Settings:
        return self.memory.settings

    # -- lifecycle ---------------------------------------------------------------------
    async def open(self) -> AsyncMemory:
        await asyncio.to_thread(self.memory.open)
        return self

    async def close(self) -> None:
        await asyncio.to_thread(self.memory.close)

    async def __aenter__(self) -> AsyncMemory:
        return await self.open()

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    # -- write -------------------------------------------------------------------------
    async def add(self, messages: str | Sequence[dict[str, Any]], *, user_id: str,
                  session_id: str | None = None, agent_id: str | None = None,
                  metadata: dict[str, Any] | None = None, infer: bool = True,
                  consent: int | None = None, timestamp: Any = None) -> AddResult:
        """`Memory.add`, awaited."""
        return await asyncio.to_thread(
            self.memory.add, messages, user_id=user_id, session_id=session_id,
            agent_id=agent_id, metadata=metadata, infer=infer, consent=consent,
            timestamp=timestamp)

    async def flush(self, *, user_id: str, session_id: str | None = None) -> AddResult:
        """`Memory.flush`, awaited."""
        return await asyncio.to_thread(self.memory.flush, user_id=user_id,
                                       session_id=session_id)

    async def session_memories(self, *, user_id: str, session_id: str) -> list[MemoryRecord]:
        """`Memory.session_memories`, awaited."""
        return await asyncio.to_thread(self.memory.session_memories, user_id=user_id,
                                       session_id=session_id)

    async def update(self, memory_id: str, content: str, *, user_id: str) -> MemoryEvent:
        """`Memory.update`, awaited."""
        return await asyncio.to_thread(self.memory.update, memory_id, content,
                                       user_id=user_id)

    async def delete(self, memory_id: str, *, user_id: str) -> MemoryEvent:
        """`Memory.delete`, awaited."""
        return await asyncio.to_thread(self.memory.delete, memory_id, user_id=user_id)

    async def delete_all(self, *, user_id: str) -> DeletionReceipt:
        """`Memory.delete_all`, awaited."""
        return await asyncio.to_thread(self.memory.delete_all, user_id=user_id)

    # -- read --------------------------------------------------------------------------
    @tracing.memory_operation("search_memory")
    async def search(self, query: str, *, user_id: str, top_k: int | None = None,
                     filters: dict[str, Any] | None = None, threshold: float | None = None,
                     min_version: int | None = None, as_of: datetime | str | None = None,
                     timezone: str | None = None) -> list[SearchHit]:
        """`Memory.search`, awaited (same arguments, results and errors)."""
        recall = self.memory._recall
        plan = await asyncio.to_thread(
            recall.plan, query, user_id=user_id, top_k=top_k, filters=filters,
            threshold=threshold, min_version=min_version, as_of=as_of,
            timezone=timezone, enabled=self.memory.enabled)
        if plan is None:
            return []
        vector = (await aembed(plan.embedder, [plan.text]))[0]
        return await asyncio.to_thread(recall.found, plan, vector)

    @tracing.memory_operation("search_memory")
    async def context(self, query: str, *, user_id: str, session_id: str | None = None,
                      min_version: int | None = None, as_of: datetime | str | None = None,
                      timezone: str | None = None) -> str:
        """`Memory.context`, awaited."""
        hits = await self.search(query, user_id=user_id, min_version=min_version, as_of=as_of,
                                 timezone=timezone)
        session = [] if session_id is None else await asyncio.to_thread(
            self.memory.session_memories, user_id=user_id, session_id=session_id)
        return prompt_section(hits, session)

    async def get(self, memory_id: str, *, user_id: str,
                  min_version: int | None = None) -> MemoryRecord | None:
        """`Memory.get`, awaited."""
        return await asyncio.to_thread(self.memory.get, memory_id, user_id=user_id,
                                       min_version=min_version)

    async def get_all(self, *, user_id: str, limit: int = 100, cursor: str | None = None,
                      min_version: int | None = None, as_of: datetime | str | None = None,
                      ) -> Page:
        """`Memory.get_all`, awaited."""
        return await asyncio.to_thread(self.memory.get_all, user_id=user_id, limit=limit,
                                       cursor=cursor, min_version=min_version, as_of=as_of)

    async def history(self, memory_id: str, *, user_id: str) -> list[MemoryEvent]:
        """`Memory.history`, awaited."""
        return await asyncio.to_thread(self.memory.history, memory_id, user_id=user_id)

    async def deletions(self, *, user_id: str) -> list[DeletionReceipt]:
        """`Memory.deletions`, awaited."""
        return await asyncio.to_thread(self.memory.deletions, user_id=user_id)

    async def verify_deletions(self, *, user_id: str) -> list[DeletionCheck]:
        """`Memory.verify_deletions`, awaited."""
        return await asyncio.to_thread(self.memory.verify_deletions, user_id=user_id)

    async def export(self, *, user_id: str) -> list[dict[str, Any]]:
        """`Memory.export`, read whole in a worker thread."""
        return await asyncio.to_thread(lambda: list(self.memory.export(user_id=user_id)))

    async def version(self, *, user_id: str) -> int:
        """`Memory.version`, awaited."""
        return await asyncio.to_thread(self.memory.version, user_id=user_id)

    # -- profile and diagnosis -----------------------------------------------------------
    async def profile(self, user_id: str, *, refresh: bool = False) -> Profile:
        """`Memory.profile`, awaited."""
        return await asyncio.to_thread(self.memory.profile, user_id, refresh=refresh)

    async def doctor(self, user_id: str | None = None, *, repair: bool = False,
                     candidate_days: int = 30) -> DoctorReport:
        """`Memory.doctor`, awaited."""
        return await asyncio.to_thread(self.memory.doctor, user_id, repair=repair,
                                       candidate_days=candidate_days)

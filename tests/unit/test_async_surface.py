"""`AsyncMemory` offers every method of `Memory` with the same arguments, and they work."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

from memray import Memory, MemoryConfig
from memray.core.aio import AsyncMemory
from memray.embed.hashing import HashingEmbedder
from memray.store.fake import InMemoryStore
from memray.store.fake_log import InMemoryEventLog

# Plumbing for jobs, migrations and integrations, not calls an application awaits;
# stats reads in-memory counters for /metrics and does no I/O to await.
PLUMBING = {"from_config", "engine", "turn_log", "switch_backend", "write_changes",
            "stats"}


def _public(cls: type) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(member) for name, member in vars(cls).items()
            if callable(member) and not name.startswith("_")}


def _params(sig: inspect.Signature) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


def test_the_async_surface_has_every_method_with_the_same_arguments() -> None:
    sync = {n: s for n, s in _public(Memory).items() if n not in PLUMBING}
    aio = _public(AsyncMemory)
    assert sorted(aio) == sorted(sync)
    for name, sig in sync.items():
        assert _params(aio[name]) == _params(sig), name
        assert inspect.iscoroutinefunction(vars(AsyncMemory)[name]), name


def test_every_async_method_runs(tmp_path: Path) -> None:
    emb = HashingEmbedder(dim=32)
    m = Memory(MemoryConfig(data_dir=str(tmp_path), store={"outbox_retry_s": 0}),
               embedder=emb, store=InMemoryStore(model=emb.model, dim=32),
               events=InMemoryEventLog(dim=32))

    async def run() -> None:
        async with AsyncMemory(m) as a:
            added = await a.add("I live in Hangzhou", user_id="u", infer=False)
            mid = added.events[0].memory_id
            await a.add([{"role": "user", "content": "I am a nurse"}], user_id="u")
            assert (await a.flush(user_id="u")).events
            assert [h.memory.id for h in await a.search("Hangzhou", user_id="u")][:1] == [mid]
            assert "Hangzhou" in await a.context("where do I live", user_id="u")
            await a.update(mid, "I live in Shanghai", user_id="u")
            assert (await a.get(mid, user_id="u")).content == "I live in Shanghai"  # type: ignore[union-attr]
            assert len((await a.get_all(user_id="u")).items) == 2
            assert [e.op for e in await a.history(mid, user_id="u")] == ["ADD", "UPDATE"]
            kinds = [d["kind"] for d in await a.export(user_id="u")]
            assert kinds == ["user", "memory", "memory", "event", "event", "event"]
            assert await a.version(user_id="u") == 3
            assert (await a.profile("u")).user_id == "u"
            assert (await a.doctor("u")).problems == 0
            assert await a.session_memories(user_id="u", session_id="s") == []
            await a.delete(mid, user_id="u")
            assert (await a.delete_all(user_id="u")).deleted == 1

    asyncio.run(run())

"""The two memray deployments: a batched embedder and the API ingress."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import ray
from ray import serve
from ray.serve.handle import DeploymentHandle

from memray.api.app import build_api
from memray.config import EmbedderConfig, MemoryConfig
from memray.core.factory import build_embedder
from memray.core.memory import Memory
from memray.embed.base import Embedder, Matrix
from memray.errors import EmbedderUnavailableError
from memray.serve.args import EmbedderArgs, ServeArgs


def held_cpus() -> int:
    """The CPUs this replica holds (at least 1): its embedding threads."""
    held = ray.get_runtime_context().get_assigned_resources()  # type: ignore[no-untyped-call]
    return max(1, int(held.get("CPU") or 1))


@serve.deployment(name="memray-embedder")
class EmbedderDeployment:
    """Embeds texts, batching concurrent requests on the server (`@serve.batch`)."""

    def __init__(self, memory: dict[str, Any], embedder: dict[str, Any]) -> None:
        cfg, opts = ServeArgs(memory=memory).memory.embedder, EmbedderArgs(**embedder)
        # The same embedder as everywhere (ONNX Runtime on CPU, torch on GPU), with the
        # replica's device and batch size and as many threads as CPUs the replica holds.
        self._model = build_embedder(MemoryConfig(embedder=EmbedderConfig.model_validate({
            **cfg.model_dump(), "device": opts.device, "batch_size": opts.max_batch_size,
            "cache_size": 0, "threads": cfg.threads or held_cpus()})))
        self._model.open()
        # @serve.batch's defaults are fixed at import; the YAML's values are set here.
        self.embed_batch.set_max_batch_size(opts.max_batch_size)  # type: ignore[attr-defined]
        self.embed_batch.set_batch_wait_timeout_s(  # type: ignore[attr-defined]
            opts.batch_wait_timeout_s)

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.005)
    async def embed_batch(self, texts: list[str]) -> list[list[float]]:
        vectors = await asyncio.to_thread(self._model.embed, texts)
        return [v.tolist() for v in vectors]

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return list(await asyncio.gather(*(self.embed_batch(t) for t in texts)))

    def info(self) -> dict[str, Any]:
        return {"model": self._model.model, "dim": self._model.dim}


class RemoteEmbedder:
    """The `Embedder` interface over the embedding deployment. `aembed` awaits the handle
    (searches: many in flight on the replica's loop, so `@serve.batch` forms batches);
    `embed` blocks on `.result()` and is called from worker threads only (writes)."""

    def __init__(self, handle: DeploymentHandle[Any], *, model: str, dim: int,
                 timeout_s: float) -> None:
        self._handle, self._model, self._dim, self._timeout = handle, model, dim, timeout_s

    @property
    def model(self) -> str:
        return self._model

    @property
    def dim(self) -> int:
        return self._dim

    def open(self) -> None:
        return None

    def close(self) -> None:
        return None

    def embed(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        try:
            rows = self._handle.embed.remote(list(texts)).result(timeout_s=self._timeout)
        except Exception as exc:  # Ray's timeout and actor errors share no base class
            raise self._unavailable(exc) from exc
        return np.asarray(rows, dtype=np.float32)

    async def aembed(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        try:
            rows = await asyncio.wait_for(self._handle.embed.remote(list(texts)),
                                          self._timeout)
        except Exception as exc:
            raise self._unavailable(exc) from exc
        return np.asarray(rows, dtype=np.float32)

    def _unavailable(self, exc: Exception) -> EmbedderUnavailableError:
        if isinstance(exc, TimeoutError | asyncio.TimeoutError):
            return EmbedderUnavailableError(f"the embedding deployment did not answer in "
                                            f"{self._timeout:g} s")
        return EmbedderUnavailableError(f"the embedding deployment failed: "
                                        f"{type(exc).__name__}: {exc}")


MemoryFactory = Callable[[MemoryConfig, Embedder | None], Memory]


def open_memory(cfg: MemoryConfig, embedder: Embedder | None) -> Memory:
    """The replica's `Memory`, opened (the default `memory_factory`)."""
    return Memory(cfg, embedder=embedder).open()


def replica_memory(args: ServeArgs, embedder: DeploymentHandle[Any] | None,
                   memory_factory: MemoryFactory = open_memory) -> Memory:
    """The API replica's `Memory`: embedding in this process (placement "replica", one
    thread per CPU the replica holds) or through the embedding deployment's handle."""
    cfg = args.memory
    if embedder is None:
        threads = cfg.embedder.threads or held_cpus()
        cfg = cfg.model_copy(update={"embedder": cfg.embedder.model_copy(
            update={"threads": threads})})
        return memory_factory(cfg, None)
    remote = RemoteEmbedder(embedder, model=cfg.embedder.model, dim=args.dim,
                            timeout_s=args.embedder.request_timeout_s)
    return memory_factory(cfg, remote)


@serve.deployment(name="memray-api")
@serve.ingress()
class ApiIngress:
    """Owns the `Memory` (and so, in local mode, the milvus-lite dir: one replica only).
    `memory_factory` builds it (as Ray Serve LLM's `LLMServer` takes `engine_cls`), so a
    test binds another without patching imports."""

    def __init__(self, args: dict[str, Any], embedder: DeploymentHandle[Any] | None,
                 memory_factory: MemoryFactory = open_memory) -> None:
        self._args = ServeArgs.model_validate(args)
        self._memory = replica_memory(self._args, embedder, memory_factory)

    def __serve_build_asgi_app__(self) -> Any:
        return build_api(self._memory, self._args.keyring(), limits=self._args.limits)

    def __del__(self) -> None:
        memory = getattr(self, "_memory", None)
        if memory is not None:
            memory.close()

"""Building the default components from a config (no I/O here either)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Literal

from memray.config import INT8_SUFFIX, EmbedderConfig, MemoryConfig
from memray.core.committer import Committer
from memray.core.resolve import Resolver
from memray.core.session import SessionMemory
from memray.core.writepath import WritePath
from memray.embed.base import Embedder
from memray.embed.batching import BatchingEmbedder
from memray.embed.cache import CachedEmbedder
from memray.embed.fused import FusedEmbedder, parse_fused
from memray.embed.hashing import HashingEmbedder
from memray.embed.sentence import SentenceTransformerEmbedder
from memray.embed.use import USE_MODEL, UseEmbedder
from memray.errors import ConfigError
from memray.extract import choose
from memray.extract.base import Extractor
from memray.settings import Settings
from memray.store.base import VectorStore
from memray.store.events import EventLog
from memray.store.milvus import MilvusStore
from memray.store.sqlite_log import SQLiteEventLog


def build_embedder(cfg: MemoryConfig) -> Embedder:
    """The configured embedder (not opened): concurrent callers sharing passes, behind an
    LRU cache when cache_size > 0.
    Every process that embeds builds it here: Memory, the batch actors, the Serve replica."""
    e = cfg.embedder
    inner: Embedder
    if e.provider == "hashing":
        inner = HashingEmbedder(dim=e.dim or 64, model=e.model)
    elif "+" in e.model:
        inner = FusedEmbedder(e.model, [(_one_model(e, name), weight)
                                        for name, weight in parse_fused(e.model)])
    else:
        inner = _one_model(e, e.model)
    if e.share_passes and e.provider != "hashing":
        inner = BatchingEmbedder(inner, max_batch=e.batch_size,
                                 parallel=e.parallel_passes)
    return CachedEmbedder(inner, size=e.cache_size) if e.cache_size else inner


def _one_model(e: EmbedderConfig, name: str) -> Embedder:
    """One model by name: the multilingual USE (numpy), else a sentence-transformers model
    run by ONNX Runtime or torch."""
    if name == USE_MODEL:
        return UseEmbedder(batch_size=e.batch_size, threads=e.threads)
    path = e.model_path if name == e.model else None
    if embedder_runtime(e, name) == "onnx":
        from memray.embed.onnx import OnnxEmbedder

        return OnnxEmbedder(model=name, model_path=path, batch_size=e.batch_size,
                            threads=e.threads)
    return SentenceTransformerEmbedder(model=name, model_path=path, device=e.device,
                                       batch_size=e.batch_size,
                                       fp16=e.device.startswith("cuda"), threads=e.threads)


def embedder_runtime(e: EmbedderConfig, model: str | None = None) -> Literal["onnx", "torch"]:
    """What runs a sentence-transformers model: `runtime` when set; under auto, ONNX Runtime
    on the CPU where onnxruntime and onnx (for the one-time export) are installed, else
    torch. ConfigError when the chosen runtime's package is missing."""
    if e.runtime == "torch":
        return "torch"
    name = model or e.model
    if e.runtime == "onnx" or name.endswith(INT8_SUFFIX):
        if importlib.util.find_spec("onnxruntime") is None:
            raise ConfigError(f"embedder {name!r} with runtime {e.runtime!r} needs the "
                              "package onnxruntime (pip install onnxruntime)")
        return "onnx"
    if not e.device.startswith("cpu"):
        return "torch"
    found = all(importlib.util.find_spec(p) is not None for p in ("onnxruntime", "onnx"))
    return "onnx" if found else "torch"


def milvus_uri(cfg: MemoryConfig, settings: Settings) -> str:
    """Explicit config, else MEMRAY_MILVUS_URI, else the embedded lite dir under data_dir."""
    return (cfg.store.milvus_uri or settings.milvus_uri
            or str(Path(cfg.data_dir) / "milvus.db"))


def build_store(cfg: MemoryConfig, settings: Settings, *, model: str, dim: int,
                bind_alias: bool = True) -> MilvusStore:
    s = cfg.store
    return MilvusStore(milvus_uri(cfg, settings), model=model, dim=dim, alias=s.alias,
                       prefix=s.collection_prefix, token=s.milvus_token or settings.milvus_token,
                       timeout_s=s.timeout_s, strong_window_s=s.strong_window_s,
                       bind_alias=bind_alias, open_timeout_s=s.open_timeout_s)


def build_extractor(cfg: MemoryConfig) -> Extractor:
    return choose.build_extractor(cfg.write)


def build_write_path(cfg: MemoryConfig, *, store: VectorStore, events: EventLog,
                     committer: Committer, embedder: Embedder,
                     sessions: SessionMemory) -> WritePath:
    extractor = build_extractor(cfg)
    resolver = Resolver(store, embedder, cfg.write, judge=extractor.grey_band_judge())
    llm = cfg.write.llm
    return WritePath(store=store, events=events, committer=committer, extractor=extractor,
                     resolver=resolver, sessions=sessions,
                     every_n_turns=cfg.write.extract_every_n_turns,
                     max_existing=llm.max_existing if llm else 10)


def postgres_dsn(cfg: MemoryConfig, settings: Settings) -> str | None:
    """Explicit config, else MEMRAY_POSTGRES_DSN, else None (SQLite under data_dir)."""
    return cfg.store.postgres_dsn or settings.postgres_dsn


def build_event_log(cfg: MemoryConfig, settings: Settings, *, dim: int) -> EventLog:
    """The shared log on PostgreSQL when a DSN is given, else SQLite under data_dir."""
    dsn = postgres_dsn(cfg, settings)
    if dsn:
        from memray.store.postgres_log import PostgresEventLog  # psycopg: the postgres extra

        return PostgresEventLog(dsn, dim=dim, pool_size=cfg.store.postgres_pool_size)
    return SQLiteEventLog(Path(cfg.data_dir) / "events.sqlite3", dim=dim)

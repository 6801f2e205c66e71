"""Building the default components from a config (no I/O here either)."""

from __future__ import annotations

from pathlib import Path

from memray.config import MemoryConfig
from memray.embed.base import Embedder
from memray.embed.cache import CachedEmbedder
from memray.embed.hashing import HashingEmbedder
from memray.embed.sentence import SentenceTransformerEmbedder
from memray.settings import Settings
from memray.store.base import VectorStore
from memray.store.events import SQLiteEventLog
from memray.store.milvus import MilvusStore


def build_embedder(cfg: MemoryConfig) -> Embedder:
    e = cfg.embedder
    inner: Embedder
    if e.provider == "hashing":
        inner = HashingEmbedder(dim=e.dim or 64, model=e.model)
    else:
        inner = SentenceTransformerEmbedder(model=e.model, model_path=e.model_path,
                                            device=e.device, batch_size=e.batch_size,
                                            fp16=e.device.startswith("cuda"))
    return CachedEmbedder(inner, size=e.cache_size) if e.cache_size else inner


def milvus_uri(cfg: MemoryConfig, settings: Settings) -> str:
    """Explicit config, else MEMRAY_MILVUS_URI, else the embedded lite dir under data_dir."""
    return (cfg.store.milvus_uri or settings.milvus_uri
            or str(Path(cfg.data_dir) / "milvus.db"))


def build_store(cfg: MemoryConfig, settings: Settings, *, model: str, dim: int) -> VectorStore:
    s = cfg.store
    return MilvusStore(milvus_uri(cfg, settings), model=model, dim=dim, alias=s.alias,
                       prefix=s.collection_prefix, token=s.milvus_token or settings.milvus_token,
                       timeout_s=s.timeout_s, strong_window_s=s.strong_window_s)


def build_event_log(cfg: MemoryConfig, *, dim: int) -> SQLiteEventLog:
    return SQLiteEventLog(Path(cfg.data_dir) / "events.sqlite3", dim=dim)

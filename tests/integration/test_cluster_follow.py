"""A migration's switch as the other processes of a cluster see it (Milvus server +
PostgreSQL): writes wait at the write barrier while the switch runs, a write prepared
with the old model is refused and redone with the new one, and a search never pairs one
model's query vector with the other model's collection."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest

from memray import Memory, MemoryConfig
from memray.config import EmbedderConfig
from memray.core.factory import build_embedder, build_store
from memray.core.follow import LIVE_EMBEDDER, LiveEmbedder
from memray.embed.cache import CachedEmbedder
from memray.settings import load_settings
from memray.store.postgres_log import PostgresEventLog

pytestmark = [pytest.mark.postgres, pytest.mark.milvus_server]


def _config(tmp_path: Path, milvus: str, dsn: str, model: str, dim: int) -> MemoryConfig:
    tag = "f" + uuid.uuid5(uuid.NAMESPACE_URL, str(tmp_path)).hex[:8]
    return MemoryConfig.model_validate({
        "data_dir": str(tmp_path / model),
        "embedder": {"provider": "hashing", "model": model, "dim": dim},
        "store": {"milvus_uri": milvus, "postgres_dsn": dsn, "alias": f"{tag}_memories",
                  "collection_prefix": tag, "model_check_s": 3600}})


def _switch(cfg: MemoryConfig, new: EmbedderConfig, log: PostgresEventLog) -> None:
    """What the migrate job's last step does, less the copying."""
    config = cfg.model_copy(update={"embedder": new})
    embedder = build_embedder(config)
    embedder.open()
    target = build_store(config, load_settings(), model=embedder.model, dim=embedder.dim,
                         bind_alias=False)
    target.open()
    try:
        with log.write_barrier():
            target.point_alias_here()
            log.set_meta(LIVE_EMBEDDER, LiveEmbedder(target.model, target.dim, new).dumps())
    finally:
        target.close()


def test_a_write_prepared_with_the_old_model_is_redone_with_the_new_one(
        tmp_path: Path, milvus_server: str, fresh_postgres_dsn: str) -> None:
    old = _config(tmp_path, milvus_server, fresh_postgres_dsn, "hash-old", 64)
    new = EmbedderConfig(provider="hashing", model="hash-new", dim=32)
    log = PostgresEventLog(fresh_postgres_dsn, dim=64)
    log.open()
    with Memory(old) as replica:
        first = replica.add("I like green tea", user_id="u", infer=False)
        assert first.events[0].memory.embedding_model == "hash-old-64"  # type: ignore[union-attr]
        _switch(old, new, log)
        # The replica has not looked at the model since (model_check_s is an hour): its
        # write is refused under the user's lock, it follows, and the write is redone.
        second = replica.add("I like oolong tea", user_id="u", infer=False)
        assert second.events[0].memory.embedding_model == "hash-new-32"  # type: ignore[union-attr]
        assert replica.config.embedder.model == "hash-new"  # the config it follows
        hits = replica.search("tea", user_id="u", threshold=-1)
        assert [h.memory.content for h in hits] == ["I like oolong tea"]  # the new collection
    log.close()


def test_writes_wait_at_the_barrier(tmp_path: Path, milvus_server: str,
                                    fresh_postgres_dsn: str) -> None:
    cfg = _config(tmp_path, milvus_server, fresh_postgres_dsn, "hash-one", 64)
    log = PostgresEventLog(fresh_postgres_dsn, dim=64)
    log.open()
    done = threading.Event()
    with Memory(cfg) as replica:
        replica.add("warm up", user_id="w", infer=False)
        with log.write_barrier():
            writer = threading.Thread(target=lambda: (
                replica.add("I like jazz", user_id="u", infer=False), done.set()))
            writer.start()
            time.sleep(1.0)
            assert not done.is_set()  # held back while the barrier is held
            assert replica.version(user_id="u") == 0
        writer.join(timeout=30)
        assert done.is_set() and replica.version(user_id="u") == 1
    log.close()


def test_a_repeat_through_another_replica_is_a_noop(
        tmp_path: Path, milvus_server: str, fresh_postgres_dsn: str,
        embedder: CachedEmbedder) -> None:
    tag = "r" + uuid.uuid4().hex[:8]
    cfg = MemoryConfig.model_validate({
        "data_dir": str(tmp_path), "store": {
            "milvus_uri": milvus_server, "postgres_dsn": fresh_postgres_dsn,
            "alias": f"{tag}_memories", "collection_prefix": tag}})
    with Memory(cfg, embedder=embedder) as a, Memory(cfg, embedder=embedder) as b:
        for m in (a, b):  # both have looked at the user before the writes
            m.search("tea", user_id="u")
        time.sleep(11)  # past both stores' Strong window after open: reads are Bounded
        first = a.add("I like green tea", user_id="u", infer=False)
        again = b.add("I like green tea", user_id="u", infer=False)  # at once, elsewhere
        assert [e.op for e in first.events] == ["ADD"]
        assert [e.op for e in again.events] == ["NOOP"]
        memory_id = first.events[0].memory_id
        updated = b.update(memory_id, "I like white tea", user_id="u")
        assert updated.version == again.version + 1
        assert [r.content for r in a.get_all(user_id="u", min_version=updated.version).items
                ] == ["I like white tea"]

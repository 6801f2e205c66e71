"""`Memory.stats`: the counters /metrics exports, zero before open, moving with use."""

from __future__ import annotations

from pathlib import Path

from memray import Memory, MemoryConfig
from memray.embed.batching import BatchingEmbedder
from memray.embed.hashing import HashingEmbedder
from memray.store.fake import InMemoryStore
from memray.store.fake_log import InMemoryEventLog


def test_stats_count_hot_set_loads_and_shared_passes(tmp_path: Path) -> None:
    emb = BatchingEmbedder(HashingEmbedder(dim=32))
    m = Memory(MemoryConfig(data_dir=str(tmp_path), recall={"hot_set": "on"}),
               embedder=emb, store=InMemoryStore(model=emb.model, dim=32),
               events=InMemoryEventLog(dim=32))
    assert set(m.stats().values()) == {0}  # nothing opened by asking
    with m:
        m.add("I live in Hangzhou", user_id="u", infer=False)
        m.search("where do I live", user_id="u")
        m.search("which city", user_id="u")
        stats = m.stats()
    assert stats["hot_set_loads"] == 1 and stats["hot_set_users"] == 1
    assert stats["embed_calls"] >= 3 and 1 <= stats["embed_passes"] <= stats["embed_calls"]

"""`Memory` against a real Milvus 2.3 server (the path clusters use), with the real model."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from memray import Memory, MemoryConfig
from memray.embed.cache import CachedEmbedder

pytestmark = pytest.mark.milvus_server


def test_add_recall_update_delete_on_a_server(
        tmp_path: Path, embedder: CachedEmbedder, milvus_server: str) -> None:
    tag = uuid.uuid4().hex[:8]
    cfg = MemoryConfig.model_validate({
        "data_dir": str(tmp_path), "store": {"milvus_uri": milvus_server,
                                             "alias": f"m_{tag}", "collection_prefix": f"m_{tag}"}})
    with Memory(cfg, embedder=embedder) as m:
        added = m.add([{"role": "user", "content": "I am allergic to peanuts"},
                       {"role": "user", "content": "I live in Shanghai"}],
                      user_id='eve" or user_id != "', infer=False)
        m.add("I live in Paris", user_id="mallory", infer=False)
        city = added.events[1].memory_id
        m.update(city, "I live in Hangzhou", user_id='eve" or user_id != "')
        hits = m.search("Which city do I live in?", user_id='eve" or user_id != "')
        assert hits[0].memory.content == "I live in Hangzhou"
        assert all(h.memory.user_id == 'eve" or user_id != "' for h in hits)
        m.delete(city, user_id='eve" or user_id != "')
        hits = m.search("Which city do I live in?", user_id='eve" or user_id != "', threshold=-1)
        assert "Hangzhou" not in str([h.memory.content for h in hits])
        assert m.get(city, user_id='eve" or user_id != "') is None
        assert m.delete_all(user_id='eve" or user_id != "').deleted == 1
        assert m.search("peanuts", user_id='eve" or user_id != "', threshold=-1) == []
        assert [h.memory.content for h in m.search("city", user_id="mallory")] == [
            "I live in Paris"]

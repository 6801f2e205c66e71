"""The resolver and the write path on the fakes: what a round plans, and what it costs."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from memray import Memory, MemoryConfig
from memray.core.resolve import Resolver, Scope
from memray.embed.base import Matrix
from memray.embed.hashing import HashingEmbedder
from memray.extract.base import Extraction, Fact
from memray.models import MemoryStatus, MemoryType, utcnow
from memray.store.fake import InMemoryStore
from memray.store.fake_log import InMemoryEventLog

DIM = 64


class RecordingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(dim=DIM)
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> Matrix:
        self.texts.extend(texts)
        return super().embed(texts)


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[tuple[Memory, RecordingEmbedder]]:
    emb = RecordingEmbedder()
    cfg = MemoryConfig(data_dir=str(tmp_path), store={"outbox_retry_s": 0})
    with Memory(cfg, embedder=emb, store=InMemoryStore(model=emb.model, dim=DIM),
                events=InMemoryEventLog(dim=DIM)) as m:
        yield m, emb


def active(m: Memory, uid: str) -> list[str]:
    return sorted(r.content for r in m.get_all(user_id=uid).items
                  if r.status == MemoryStatus.ACTIVE)


def test_superseding_and_confirming_re_embed_nothing_stored(parts) -> None:  # type: ignore[no-untyped-def]
    m, emb = parts
    m.add("I live in Paris", user_id="u")
    emb.texts.clear()
    moved = m.add("I moved to Berlin", user_id="u").events
    assert [(e.op, e.reason) for e in moved] == [("UPDATE", "superseded"), ("ADD", "new fact")]
    assert active(m, "u") == ["I moved to Berlin"]
    assert "I live in Paris" not in emb.texts, "the superseded memory was embedded again"
    m.add("I like green tea", user_id="u")
    emb.texts.clear()
    again = m.add("I like green tea", user_id="u").events
    assert [(e.op, e.reason) for e in again] == [("UPDATE", "confirmed")]
    assert emb.texts == ["I like green tea"]  # the new statement only, nothing stored


def _fact(content: str, slot: str | None = None) -> Fact:
    return Fact(type=MemoryType.FACT, content=content, importance=0.6, confidence=0.9,
                slot=slot, turn_ids=("t1",), excerpt=content)


def test_an_old_fact_never_overrides_a_newer_memory(parts) -> None:  # type: ignore[no-untyped-def]
    m, emb = parts
    m.add("I live in Berlin", user_id="u")
    engine = m.engine()
    resolver = Resolver(engine.store, emb, m.config.write)
    old = utcnow() - timedelta(days=30)
    changes = resolver.plan(Scope("u", None, None, {}, 2, old),
                            Extraction([_fact("I live in Rome", "city")], []), old)
    assert [e.op for e in changes.events] == ["NOOP"] and not changes.upserts


def test_a_forget_plans_deletes_tombstones_and_no_history(parts) -> None:  # type: ignore[no-untyped-def]
    m, _ = parts
    m.add("I have a cat named Miso", user_id="u", infer=False)
    m.add("I like tea", user_id="u", infer=False)
    result = m.add("please delete all your memories about my cat", user_id="u")
    assert [e.op for e in result.events] == ["DELETE"]
    gone = result.events[0]
    assert m.history(gone.memory_id, user_id="u") == []
    tombs = m.engine().events.tombstones("u")
    assert any(t.kind == "hash" and gone.previous is not None
               and t.key == gone.previous.content_hash for t in tombs)
    assert active(m, "u") == ["I like tea"]

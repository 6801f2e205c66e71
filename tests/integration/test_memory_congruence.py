"""The same scripted workload through `Memory` on three backends: the fakes (in-memory
store and log), the embedded default (milvus-lite + SQLite) and cluster mode (a Milvus
server + PostgreSQL). What a user sees (search results with their scores, listings,
versions, history) must be the same on each, keyword (hybrid) recall included."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memray import Memory, MemoryConfig, MemoryStatus
from memray.embed.cache import CachedEmbedder
from memray.store.fake import InMemoryStore
from memray.store.fake_log import InMemoryEventLog

ROUNDS = [
    ("lin", "I'm only free after 9 pm; I like writing scripts in Python"),
    ("lin", "I live in Shanghai"),
    ("lin", "我不吃香菜，我喜欢喝乌龙茶"),
    ("lin", "My daughter Mia plays the violin"),
    ("mo", "我住在杭州，在一家医院做护士"),
    ("mo", "I'm allergic to peanuts"),
    ("lin", "I moved to Hangzhou"),  # a correction of the city
    ("mo", "我现在换工作了，早九晚六"),
    ("lin", "Delete all of your memories about my working hours"),  # a scoped forget
]
VERBATIM = [("lin", "Mia's recital is on the 12th of May"), ("mo", "护士站的同事叫小王"),
            ("lin", "The violin teacher is called Mr. Okafor")]
QUERIES = [("lin", "Which city do I live in?"), ("lin", "When is the recital?"),
           ("lin", "晚饭喝什么？"), ("mo", "我在哪里工作？"), ("mo", "what can't I eat"),
           ("lin", "Okafor"), ("lin", "when am I free")]


def _workload(m: Memory) -> dict[str, Any]:
    for user, text in ROUNDS:
        m.add([{"role": "user", "content": text}, {"role": "assistant", "content": "OK."}],
              user_id=user, session_id="s1")
    for user, text in VERBATIM:
        m.add(text, user_id=user, infer=False)
    doomed = next(r for r in m.get_all(user_id="mo").items if "小王" in r.content)
    m.delete(doomed.id, user_id="mo")
    out: dict[str, Any] = {"searches": [], "lists": {}, "versions": {}, "history": {}}
    for user, query in QUERIES:
        hits = m.search(query, user_id=user, top_k=5)
        out["searches"].append([(h.memory.content, round(h.similarity, 3), round(h.score, 3))
                                for h in hits])
    for user in ("lin", "mo"):
        items = m.get_all(user_id=user).items
        out["lists"][user] = sorted((r.content, r.status.value, r.slot) for r in items)
        out["versions"][user] = m.version(user_id=user)
        city = [r for r in items if r.slot == "city" and r.status == MemoryStatus.SUPERSEDED]
        out["history"][user] = [[e.op for e in m.history(r.id, user_id=user)] for r in city]
    return out


@pytest.fixture
def fake(embedder: CachedEmbedder, tmp_path: Path) -> Iterator[Memory]:
    store = InMemoryStore(model=embedder.model, dim=embedder.dim)
    with Memory(MemoryConfig(data_dir=str(tmp_path / "fake")), embedder=embedder,
                store=store, events=InMemoryEventLog(dim=embedder.dim)) as m:
        yield m


@pytest.fixture
def lite(embedder: CachedEmbedder, tmp_path: Path) -> Iterator[Memory]:
    with Memory(MemoryConfig(data_dir=str(tmp_path / "lite")), embedder=embedder) as m:
        yield m


@pytest.fixture
def cluster(embedder: CachedEmbedder, tmp_path: Path, milvus_server: str,
            fresh_postgres_dsn: str) -> Iterator[Memory]:
    tag = "c" + uuid.uuid4().hex[:8]
    cfg = MemoryConfig.model_validate({"data_dir": str(tmp_path / "cluster"), "store": {
        "milvus_uri": milvus_server, "postgres_dsn": fresh_postgres_dsn,
        "alias": f"{tag}_memories", "collection_prefix": tag}})
    with Memory(cfg, embedder=embedder) as m:
        yield m


@pytest.mark.postgres
@pytest.mark.milvus_server
def test_one_workload_three_backends_same_answers(fake: Memory, lite: Memory,
                                                  cluster: Memory) -> None:
    # The hot set (and with it keyword recall) is on for all three.
    assert all(m._backend.hot is not None for m in (fake, lite, cluster))
    expected = _workload(fake)
    assert expected["searches"][0][0][0] == "I moved to Hangzhou"
    assert all("9 pm" not in c for c, _, _ in expected["lists"]["lin"])  # the forget
    assert any("Python" in c for c, _, _ in expected["lists"]["lin"])  # ...was scoped
    assert expected["searches"][5][0][0] == "The violin teacher is called Mr. Okafor"
    for name, memory in (("lite", lite), ("cluster", cluster)):
        got = _workload(memory)
        for key in ("lists", "versions", "history"):
            assert got[key] == expected[key], (name, key)
        for query, want, have in zip(QUERIES, expected["searches"], got["searches"],
                                     strict=True):
            assert [c for c, _, _ in have] == [c for c, _, _ in want], (name, query)
            for (_, s1, r1), (_, s2, r2) in zip(want, have, strict=True):
                assert abs(s1 - s2) <= 0.002 and abs(r1 - r2) <= 0.002, (name, query)

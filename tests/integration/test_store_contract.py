"""One contract for every `VectorStore`: the in-memory fake, milvus-lite and a Milvus server.

The same cases run against all three, and `test_congruence` replays one scripted workload
on all three and compares the answers (as qdrant-client's congruence tests do), which is
what keeps the fake honest.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memray.core.ids import new_id
from memray.models import MemoryRecord, MemoryStatus, content_hash, utcnow
from memray.store.base import StoredMemory, VectorStore, Where
from memray.store.fake import InMemoryStore
from memray.store.milvus import MilvusStore

DIM = 8
MODEL = "contract-model"
HOSTILE_USERS = [
    'u" or user_id != "',
    "back\\slash\\",
    "new\nline",
    "x" * 10_000,
    "quote' and \"both\"",
    "中文用户",
    "plain",
]


def make_store(kind: str, tmp_path: Path, server_uri: str | None) -> VectorStore:
    if kind == "fake":
        return InMemoryStore(model=MODEL, dim=DIM)
    if kind == "lite":
        return MilvusStore(str(tmp_path / "lite" / "milvus.db"), model=MODEL, dim=DIM)
    tag = uuid.uuid4().hex[:8]
    assert server_uri is not None
    return MilvusStore(server_uri, model=MODEL, dim=DIM, alias=f"a_{tag}", prefix=f"t_{tag}")


@pytest.fixture(params=["fake", "lite", pytest.param("server", marks=pytest.mark.milvus_server)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    uri = request.getfixturevalue("milvus_server") if request.param == "server" else None
    s = make_store(request.param, tmp_path, uri)
    s.open()
    yield s
    if isinstance(s, MilvusStore) and request.param == "server":
        s._client.drop_alias(alias=s._alias)
        s._client.drop_collection(s.collection)
    s.close()


def row(user: str, content: str, rng: np.random.Generator, **kw: Any) -> StoredMemory:
    now = kw.pop("now", utcnow())
    rec = MemoryRecord(id=new_id(), user_id=user, content=content, created_at=now,
                       updated_at=now, last_confirmed_at=now, embedding_model=MODEL,
                       content_hash=content_hash(content), **kw)
    vec = rng.standard_normal(DIM).astype(np.float32)
    return StoredMemory(rec, vec / np.linalg.norm(vec))


def test_hostile_user_ids_stay_isolated(store: VectorStore) -> None:
    rng = np.random.default_rng(1)
    rows = {u: [row(u, f"fact {i} of {u[:10]}", rng) for i in range(3)] for u in HOSTILE_USERS}
    for user_rows in rows.values():
        store.insert(user_rows)
    probe = rng.standard_normal(DIM).astype(np.float32)
    for user, user_rows in rows.items():
        want = sorted(r.record.id for r in user_rows)
        assert store.list_ids(user, Where()) == want
        assert {r.user_id for r in store.query(user, Where())} == {user}
        hits = store.search(user, probe, 50, Where())
        assert sorted(h.id for h, _ in hits) == want
        assert store.count(user) == 3
    assert store.list_ids("nobody", Where()) == []


def test_delete_is_scoped_to_the_user(store: VectorStore) -> None:
    rng = np.random.default_rng(2)
    a, b = row("alice", "a1", rng), row("bob", "b1", rng)
    store.insert([a])
    store.insert([b])
    assert store.delete("bob", [a.record.id]) == 0  # bob cannot delete alice's id
    assert store.list_ids("alice", Where()) == [a.record.id]
    assert store.delete("alice", [a.record.id]) == 1
    assert store.list_ids("alice", Where()) == []
    assert store.list_ids("bob", Where()) == [b.record.id]
    assert store.delete_user('bob" or user_id != "') == 0
    assert store.count("bob") == 1


def test_replace_then_filter_and_delete_by_user(store: VectorStore) -> None:
    """The Milvus 2.3 upsert trap: a replaced row must be found by the user filter, and
    deleting the user must remove it."""
    rng = np.random.default_rng(3)
    r = row("carol", "old", rng)
    store.insert([r])
    newer = StoredMemory(r.record.model_copy(update={"content": "new"}), r.vector)
    store.replace([newer])
    store.replace([newer])  # idempotent
    found = store.query("carol", Where())
    assert [(x.id, x.content) for x in found] == [(r.record.id, "new")]
    assert [h.content for h, _ in store.search("carol", r.vector, 5, Where())] == ["new"]
    (with_vector,) = store.rows("carol", Where())
    assert with_vector.record.content == "new"
    np.testing.assert_allclose(with_vector.vector, r.vector, atol=1e-6)
    assert store.rows("dave", Where()) == []
    assert store.delete_user("carol") == 1
    assert store.query("carol", Where()) == []
    assert store.search("carol", r.vector, 5, Where()) == []


def test_search_is_exact_cosine_within_the_user(store: VectorStore) -> None:
    rng = np.random.default_rng(4)
    rows = [row("dave", f"d{i}", rng) for i in range(40)]
    store.insert(rows)
    store.insert([row("eve", f"e{i}", rng) for i in range(40)])
    q = rng.standard_normal(DIM).astype(np.float32)
    q /= np.linalg.norm(q)
    sims = {r.record.id: float(r.vector @ q) for r in rows}
    want = sorted(sims, key=lambda i: -sims[i])[:10]
    hits = store.search("dave", q, 10, Where())
    assert [h.id for h, _ in hits] == want
    for h, s in hits:
        assert s == pytest.approx(sims[h.id], abs=1e-4)


def test_where_conditions(store: VectorStore) -> None:
    rng = np.random.default_rng(5)
    now = utcnow()
    rows = [
        row("fay", "active pref", rng, type="preference", importance=0.9, slot="like:tea"),
        row("fay", "candidate", rng, status=MemoryStatus.CANDIDATE, importance=0.2),
        row("fay", "expired", rng, expires_at=now - timedelta(days=1), agent_id="bot"),
        row("fay", "expires later", rng, expires_at=now + timedelta(days=1), session_id="s1"),
        row("fay", "old", rng, now=now - timedelta(days=10), slot="city"),
    ]
    store.insert(rows)
    ids = [r.record.id for r in rows]

    def where(**kw: Any) -> list[str]:
        return store.list_ids("fay", Where(**kw))

    assert where(statuses=("active",)) == sorted(ids[:1] + ids[2:])
    assert where(types=("preference",)) == [ids[0]]
    assert where(alive_at_ms=int(now.timestamp() * 1000)) == sorted([ids[0], ids[1], ids[3],
                                                                     ids[4]])
    assert where(agent_id="bot") == [ids[2]]
    assert where(session_id="s1") == [ids[3]]
    assert where(min_importance=0.5) == sorted([ids[0], ids[2], ids[3], ids[4]])
    cut = int((now - timedelta(days=1)).timestamp() * 1000)
    assert where(created_before_ms=cut) == [ids[4]]
    assert ids[4] not in where(created_after_ms=cut)
    assert where(content_hashes=(content_hash("Candidate"),)) == [ids[1]]
    assert where(after_id=sorted(ids)[2]) == sorted(ids)[3:]
    assert where(ids=(ids[0], "not-there")) == [ids[0]]
    assert where(slots=("city",)) == [ids[4]]
    assert where(slot_prefixes=("like:",)) == [ids[0]]
    assert where(slots=("city",), slot_prefixes=("like:", "dis")) == sorted([ids[0], ids[4]])
    assert where(slot_prefixes=("lik",), types=("fact",)) == []

    # said: a memory's message time where it has one (stored now, said three days ago),
    # else when it was stored
    said = row("fay", "said earlier", rng, occurred_at=now - timedelta(days=3))
    store.insert([said])

    def days(lo: float, hi: float) -> tuple[int, int]:
        return (int((now + timedelta(days=lo)).timestamp() * 1000),
                int((now + timedelta(days=hi)).timestamp() * 1000))

    assert where(said_within_ms=(days(-4, -2),)) == [said.record.id]
    assert where(said_within_ms=(days(-11, -9), days(-4, -2))) == sorted([ids[4],
                                                                         said.record.id])
    just_now = where(said_within_ms=(days(-0.01, 0.01),))
    assert said.record.id not in just_now and ids[0] in just_now and ids[4] not in just_now
    assert where(said_within_ms=(days(-3, -2),), types=("fact",)) == [said.record.id]
    hits = store.search("fay", said.vector, 10, Where(said_within_ms=(days(-11, -2),)))
    assert sorted(h.id for h, _ in hits) == sorted([ids[4], said.record.id])
    at = int(said.record.occurred_at.timestamp() * 1000)  # type: ignore[union-attr]
    assert where(said_within_ms=((at, at + 1),)) == [said.record.id]  # the start is in
    assert where(said_within_ms=((at - 1, at),)) == []  # the end is out


def _workload(store: VectorStore) -> list[Any]:
    """A fixed script of writes and reads; returns every answer for comparison."""
    rng = np.random.default_rng(42)
    out: list[Any] = []
    users = ["u1", 'u2" or "1"=="1', "u3"]
    rows = {u: [row(u, f"{u[:2]}-{i}", rng, importance=round(i / 20, 2)) for i in range(20)]
            for u in users}
    for u in users:
        store.insert(rows[u])
    store.delete("u1", [r.record.id for r in rows["u1"][:5]])
    store.delete("u3", [r.record.id for r in rows["u1"][5:]])  # wrong user: no effect
    store.replace([StoredMemory(rows["u2" + users[1][2:]][0].record.model_copy(
        update={"status": MemoryStatus.SUPERSEDED}), rows[users[1]][0].vector)])
    store.delete_user("u3")
    for k in range(5):
        q = rng.standard_normal(DIM).astype(np.float32)
        for u in users:
            hits = store.search(u, q, 7, Where(statuses=("active",), min_importance=0.2))
            out.append([(h.content, round(s, 4)) for h, s in hits])
        out.append(store.count(users[k % 3]))
    for u in users:
        out.append(sorted(r.content for r in store.query(u, Where(statuses=("superseded",)))))
    return out


def test_congruence(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    kinds = ["fake", "lite"]
    server_uri = None
    if request.config.getoption("-m") != "not milvus_server":
        server_uri = request.getfixturevalue("milvus_server")
        kinds.append("server")
    answers = {}
    for kind in kinds:
        s = make_store(kind, tmp_path / kind, server_uri)
        s.open()
        try:
            answers[kind] = _workload(s)
        finally:
            if kind == "server":
                assert isinstance(s, MilvusStore)
                s._client.drop_alias(alias=s._alias)
                s._client.drop_collection(s.collection)
            s.close()
    for kind in kinds[1:]:
        assert answers[kind] == answers["fake"], kind
    assert any(answers["fake"][:3])  # the workload really returned hits

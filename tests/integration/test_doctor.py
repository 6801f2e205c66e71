"""Memory Doctor: a store corrupted on purpose (behind the log's back) is diagnosed, and
`repair` brings it back in line through the write path; on milvus-lite, from the CLI and
over HTTP on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_api_http import Served

from memray import Memory, MemoryConfig
from memray.api.app import ApiLimits
from memray.api.auth import ApiKey, KeyRing, hash_key
from memray.cli import main as cli
from memray.core.changes import ChangeSet
from memray.core.doctor import UserReport, describe
from memray.core.ids import new_id
from memray.embed.hashing import HashingEmbedder
from memray.models import MemoryRecord, MemoryStatus, content_hash, utcnow
from memray.store.base import StoredMemory, Where
from memray.store.fake import InMemoryStore

HASHING = {"provider": "hashing", "dim": 32}


def config(data_dir: Path) -> MemoryConfig:
    # outbox_retry_s 0: queued ops wait for the doctor (no background retry meanwhile)
    return MemoryConfig(data_dir=str(data_dir), embedder=HASHING,
                        store={"outbox_retry_s": 0})


def record(m: Memory, uid: str, text: str, **extra: object) -> MemoryRecord:
    now = utcnow()
    fields = {"id": new_id(), "user_id": uid, "content": text, "created_at": now,
              "updated_at": now, "last_confirmed_at": now,
              "embedding_model": m.engine().embedder.model, "content_hash": content_hash(text),
              **extra}
    return MemoryRecord.model_validate(fields)


def logged(m: Memory, rec: MemoryRecord, *, apply: bool = True) -> MemoryRecord:
    """Write a record through the committer (the log and the store agree)."""
    e = m.engine()
    changes = ChangeSet(rec.user_id)
    changes.put(rec, e.embedder.embed([rec.content])[0], None, rec.created_at)
    e.committer.commit(changes, apply=apply)
    return rec


def users(*texts: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": t} for t in texts]


def ids(m: Memory, uid: str) -> set[str]:
    return {r.id for r in m.engine().store.query(uid, Where())}


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory(config(tmp_path / "d")) as m:
        yield m


def corrupt(m: Memory) -> dict[str, str]:
    """Every kind of damage the doctor knows, each on its own memory of user u1 (and a
    queued op of u2); returns the ids by kind."""
    added = m.add(users("I live in Hangzhou", "I like green tea"),
                  user_id="u1", infer=False).events
    gone, stale = (e.memory_id for e in added)
    m.add("I have a cat", user_id="u2", infer=False)
    e = m.engine()
    e.store.delete("u1", [gone])  # a vector deleted behind the log's back
    ghost = record(m, "u1", "I used to smoke")  # a row the log never heard of
    e.store.replace([StoredMemory(ghost, e.embedder.embed([ghost.content])[0])])
    held = {r.record.id: r for r in e.store.rows("u1", Where())}
    e.store.replace([  # a row that says something else than the log
        StoredMemory(held[stale].record.model_copy(update={"content": "I hate green tea",
                                                            "content_hash": "x" * 64}),
                     held[stale].vector)])
    past = utcnow() - timedelta(days=1)
    expired = logged(m, record(m, "u1", "I am in Tokyo this week", expires_at=past))
    overdue = logged(m, record(m, "u1", "I might like jazz", status=MemoryStatus.CANDIDATE,
                               last_confirmed_at=utcnow() - timedelta(days=40)))
    queued = logged(m, record(m, "u2", "I drive a bike"), apply=False)
    return {"gone": gone, "stale": stale, "ghost": ghost.id,
            "expired": expired.id, "overdue": overdue.id, "queued": queued.id}


def test_doctor_finds_each_corruption_and_repair_fixes_it(memory: Memory) -> None:
    m = memory
    healthy = m.doctor()
    assert healthy.problems == 0
    bad = corrupt(m)
    report = m.doctor()
    u1, u2 = report.users
    assert (u1.user_id, u2.user_id) == ("u1", "u2")
    assert u1.missing_vectors.ids == [bad["gone"]]
    assert u1.orphan_vectors.ids == [bad["ghost"]]
    assert u1.stale_rows.ids == [bad["stale"]]
    assert u1.expired_active.ids == [bad["expired"]]
    assert u1.overdue_candidates.ids == [bad["overdue"]]
    assert u1.problems == 5 and u1.log_memories == 4 and u1.store_rows == 4
    # u2's queued write is backlog, not a missing vector
    assert u2.outbox.ops == 1 and u2.outbox.rows == 1 and u2.outbox.oldest_age_s is not None
    assert u2.missing_vectors.count == 0 and u2.problems == 1
    assert "1 vectors without a live memory" in describe(report)
    assert m.doctor().problems == report.problems  # checking changes nothing

    repaired = m.doctor(repair=True)
    assert repaired.problems == 0
    assert repaired.after is not None
    assert repaired.after[0].repaired == {
        "missing_vectors": 1, "orphan_vectors": 1, "stale_rows": 1, "expired_active": 1,
        "overdue_candidates": 1}
    assert m.doctor().problems == 0
    e = m.engine()
    rows = {r.id: r for r in e.store.query("u1", Where())}
    assert bad["ghost"] not in rows and bad["gone"] in rows
    assert rows[bad["stale"]].content == "I like green tea"
    assert rows[bad["expired"]].status == rows[bad["overdue"]].status == MemoryStatus.EXPIRED
    assert [ev.reason for ev in m.history(bad["overdue"], user_id="u1")][-1] == "retired"
    assert bad["queued"] in ids(m, "u2")
    hits = m.search("Where do I live?", user_id="u1", threshold=-1)
    assert [h.memory.id for h in hits if h.memory.content == "I live in Hangzhou"] == \
        [bad["gone"]]
    assert all("smoke" not in h.memory.content for h in hits)


def test_repair_keeps_rows_of_a_user_the_log_never_saw(memory: Memory) -> None:
    """An empty log beside rows (a lost log) is reported, and nothing is deleted."""
    m = memory
    e = m.engine()
    stray = record(m, "stranger", "I live in Oslo")
    e.store.replace([StoredMemory(stray, e.embedder.embed([stray.content])[0])])
    report = m.doctor("stranger", repair=True)
    user = report.users[0]
    assert user.log_missing and user.orphan_vectors.ids == [stray.id]
    assert ids(m, "stranger") == {stray.id}
    assert report.after is not None and report.after[0].problems == 2  # still there, told
    assert "orphans kept" in describe(report)


class LaxStore(InMemoryStore):
    """The fake store without its checks: a backend that let a bad vector, or a vector
    of another model, in (MilvusStore refuses both)."""

    def replace(self, rows: Sequence[StoredMemory]) -> None:
        with self._lock:
            for row in rows:
                self._rows[row.record.id] = row


def test_bad_vectors_and_other_models_are_reembedded(tmp_path: Path) -> None:
    store = LaxStore(model="hashing-32", dim=32)
    with Memory(MemoryConfig(data_dir=str(tmp_path)), embedder=HashingEmbedder(dim=32),
                store=store) as m:
        short, nan, other = (e.memory_id for e in m.add(
            users("I like tea", "I like rain", "I like snow"), user_id="u", infer=False).events)
        held = {r.record.id: r for r in store.rows("u", Where())}
        store.replace([StoredMemory(held[short].record, np.ones(8, np.float32)),
                       StoredMemory(held[nan].record, np.full(32, np.nan, np.float32)),
                       StoredMemory(held[other].record.model_copy(
                           update={"embedding_model": "bge-m3"}), held[other].vector)])
        user = m.doctor("u").users[0]
        assert user.bad_vectors.ids == sorted([short, nan])
        assert user.wrong_model.ids == [other] and user.problems == 3
        after = m.doctor("u", repair=True)
        assert after.problems == 0
        assert after.after is not None
        assert after.after[0].repaired == {"bad_vectors": 2, "wrong_model": 1}
        fixed = {r.record.id: r for r in store.rows("u", Where())}
        assert fixed[short].vector.shape == (32,) and np.isfinite(fixed[nan].vector).all()
        assert fixed[other].record.embedding_model == "hashing-32"
        assert m.history(other, user_id="u")[-1].reason == "doctor: re-embedded with hashing-32"


def test_cli_doctor_json_summary_and_exit_code(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d"
    with Memory(config(data)) as m:
        mid = m.add("I live in Hangzhou", user_id="u1", infer=False).events[0].memory_id
        m.engine().store.delete("u1", [mid])
    conf = tmp_path / "memory.yaml"
    conf.write_text(yaml.safe_dump(config(data).model_dump(mode="json")), encoding="utf-8")
    assert cli(["doctor", "--config", str(conf), "--user", "u1"]) == 1
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["users"][0]["missing_vectors"]["ids"] == [mid]
    assert report["problems"] == 1 and "1 memories without a vector" in err
    assert cli(["doctor", "--config", str(conf), "--repair"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["after"][0]["repaired"] == {"missing_vectors": 1}
    assert "problems left: 0" in err
    assert cli(["doctor", "--config", str(conf)]) == 0
    assert "no problems found" in capsys.readouterr().err


ADMIN, ALICE = "mr_admin_key", "mr_alice_key"
KEYS = KeyRing(keys=[ApiKey(name="admin", sha256=hash_key(ADMIN), admin=True),
                     ApiKey(name="alice", sha256=hash_key(ALICE), users=["alice"])])


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_http_doctor_scoped_and_repair_admin_only(memory: Memory) -> None:
    mid = memory.add("I live in Hangzhou", user_id="alice", infer=False).events[0].memory_id
    memory.add("I live in Paris", user_id="bob", infer=False)
    memory.engine().store.delete("alice", [mid])
    with Served(memory, keys=KEYS, limits=ApiLimits()) as http:
        r = http.get("/v1/users/alice/doctor", headers=auth(ALICE))
        assert r.status_code == 200, r.text
        body = UserReport.model_validate(r.json())
        assert body.missing_vectors.ids == [mid] and r.json()["problems"] == 1
        assert http.get("/v1/users/bob/doctor", headers=auth(ALICE)).status_code == 403
        assert http.get("/v1/users/alice/doctor").status_code == 401
        r = http.get("/v1/users/alice/doctor", params={"repair": "true"}, headers=auth(ALICE))
        assert r.status_code == 403 and "admin" in r.json()["detail"]
        assert mid not in ids(memory, "alice")  # the refused repair changed nothing
        r = http.get("/v1/users/alice/doctor", params={"repair": "true"}, headers=auth(ADMIN))
        assert r.status_code == 200, r.text
        assert r.json()["repaired"] == {"missing_vectors": 1} and r.json()["problems"] == 0
        assert mid in ids(memory, "alice")


def resurrect(m: Memory, row: StoredMemory) -> None:
    """What a restored backup or a bug would do: the deleted row written back raw."""
    m.engine().store.insert([row])


def test_cli_verify_deleted_lists_receipts_and_finds_a_row_that_came_back(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d"
    with Memory(config(data)) as m:
        mid = m.add("I live in Hangzhou", user_id="u1", infer=False).events[0].memory_id
        m.add("I like tea", user_id="u1", infer=False)
        (row,) = m.engine().store.rows("u1", Where(ids=(mid,)))
        m.delete(mid, user_id="u1")
        m.delete_all(user_id="u1")
    conf = tmp_path / "memory.yaml"
    conf.write_text(yaml.safe_dump(config(data).model_dump(mode="json")), encoding="utf-8")
    assert cli(["doctor", "--config", str(conf), "--verify-deleted", "u1"]) == 0
    out, err = capsys.readouterr()
    rows = json.loads(out)
    assert [r["receipt"]["kind"] for r in rows] == ["delete", "delete_all"]
    assert rows[0]["receipt"]["memory_ids"] == [mid]
    assert all(r["check"]["ok"] and r["receipt"]["verified"] for r in rows)
    assert "2 verified now, 0 failed" in err and "Hangzhou" not in out

    with Memory(config(data)) as m:
        resurrect(m, row)
    assert cli(["doctor", "--config", str(conf), "--verify-deleted", "u1"]) == 1
    out, err = capsys.readouterr()
    (first, second) = [r["check"] for r in json.loads(out)]
    assert first["remaining"]["vector_store"] == 1 and not first["ok"]
    assert second["ok"]  # the delete_all named other ids
    assert "1 failed" in err and first["receipt_id"] in err


def test_a_receipt_altered_in_the_audit_log_fails_its_digest(memory: Memory) -> None:
    mid = memory.add("I live in Hangzhou", user_id="u", infer=False).events[0].memory_id
    receipt = memory.delete(mid, user_id="u").receipt
    assert receipt is not None
    forged = receipt.model_copy(update={"id": new_id(), "memory_ids": ["someone-else"]})
    memory.engine().events.record_receipt("u", forged.id, 0, forged.model_dump_json())
    checks = {c.receipt_id: c for c in memory.verify_deletions(user_id="u")}
    assert checks[receipt.id].ok and checks[receipt.id].digest_ok
    assert not checks[forged.id].digest_ok and not checks[forged.id].ok


def test_http_deletions_and_their_verification_are_scoped(memory: Memory) -> None:
    mid = memory.add("I live in Hangzhou", user_id="alice", infer=False).events[0].memory_id
    memory.add("I live in Paris", user_id="bob", infer=False)
    (row,) = memory.engine().store.rows("alice", Where(ids=(mid,)))
    with Served(memory, keys=KEYS, limits=ApiLimits()) as http:
        r = http.delete(f"/v1/memories/{mid}", params={"user_id": "alice"},
                        headers=auth(ALICE))
        assert r.status_code == 200, r.text
        assert r.json()["receipt"]["memory_ids"] == [mid]
        r = http.get("/v1/users/alice/deletions", headers=auth(ALICE))
        assert r.status_code == 200, r.text
        assert [x["memory_ids"] for x in r.json()] == [[mid]] and r.json()[0]["verified"]
        assert http.get("/v1/users/bob/deletions", headers=auth(ALICE)).status_code == 403
        assert http.get("/v1/users/alice/deletions/verify").status_code == 401
        r = http.get("/v1/users/alice/deletions/verify", headers=auth(ALICE))
        assert [c["ok"] for c in r.json()] == [True]
        resurrect(memory, row)
        r = http.get("/v1/users/alice/deletions/verify", headers=auth(ALICE))
        assert [(c["ok"], c["remaining"]["vector_store"]) for c in r.json()] == [(False, 1)]
        assert http.get("/v1/users/bob/deletions", headers=auth(ADMIN)).json() == []

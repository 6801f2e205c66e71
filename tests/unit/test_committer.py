"""The committer on the fakes: commit, apply, bulk drains, order, refusals, the gate."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import timedelta

import numpy as np
import pytest

from memray.core.changes import ChangeSet
from memray.core.committer import Committer
from memray.core.gate import WriteGate
from memray.core.records import new_record
from memray.errors import ModelChangedError, StoreError
from memray.models import MemoryRecord, utcnow
from memray.store.base import StoredMemory, Where
from memray.store.events import StoreOp
from memray.store.fake import InMemoryStore
from memray.store.fake_log import InMemoryEventLog

DIM = 8


class CountingStore(InMemoryStore):
    """The fake store, counting replace calls and failing writes while `down`."""

    def __init__(self) -> None:
        super().__init__(model="m", dim=DIM)
        self.replace_calls: list[int] = []
        self.insert_calls: list[int] = []
        self.down = False

    def insert(self, rows: Sequence[StoredMemory]) -> None:
        if self.down:
            raise StoreError("store is down")
        self.insert_calls.append(len(rows))
        InMemoryStore.replace(self, rows)  # not self.replace: count each call once

    def replace(self, rows: Sequence[StoredMemory]) -> None:
        if self.down:
            raise StoreError("store is down")
        self.replace_calls.append(len(rows))
        super().replace(rows)

    def delete(self, user_id: str, ids: Sequence[str]) -> int:
        if self.down:
            raise StoreError("store is down")
        return super().delete(user_id, ids)


def vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def record(uid: str, text: str) -> MemoryRecord:
    return new_record(user_id=uid, content=text, embedding_model="m", at=utcnow())


def added(uid: str, *texts: str, fresh: bool = False) -> ChangeSet:
    changes = ChangeSet(uid)
    for i, text in enumerate(texts):
        changes.put(record(uid, text), vec(i), None, utcnow(), fresh=fresh)
    return changes


@pytest.fixture
def parts() -> tuple[CountingStore, InMemoryEventLog, Committer]:
    store, log = CountingStore(), InMemoryEventLog(dim=DIM)
    return store, log, Committer(store, log)


def test_commit_applies_and_returns_the_logs_version(parts) -> None:  # type: ignore[no-untyped-def]
    store, log, committer = parts
    assert committer.commit(added("u", "a", "b")) == 1 == log.version("u")
    assert committer.commit(added("u", "c")) == 2 == log.version("u")
    assert store.count("u") == 3 and not log.has_pending("u")
    assert [e.op for e in log.user_events("u")] == ["ADD"] * 3


def test_a_change_set_of_noops_changes_nothing(parts) -> None:  # type: ignore[no-untyped-def]
    store, log, committer = parts
    committer.commit(added("u", "a"))
    changes = ChangeSet("u")
    changes.noop(store.query("u", Where())[0], utcnow(), "already stored")
    assert changes.empty
    assert committer.commit(changes) == 1 == log.version("u")


def test_a_deleted_memory_keeps_no_history_and_leaves_a_tombstone(parts) -> None:  # type: ignore[no-untyped-def]
    store, log, committer = parts
    first = added("u", "I have a cat")
    committer.commit(first)
    rec = next(iter(first.upserts.values())).record
    gone = ChangeSet("u")
    gone.delete(rec, utcnow(), "test")
    assert gone.logged_events() == []
    committer.commit(gone)
    assert store.count("u") == 0 and log.history("u", rec.id) == []
    assert [t.key for t in log.tombstones("u")] == [rec.content_hash]


def test_bulk_drain_applies_many_users_in_one_store_call(parts) -> None:  # type: ignore[no-untyped-def]
    store, log, committer = parts
    users = [f"u{i}" for i in range(5)]
    for uid in users:
        committer.commit(added(uid, "a", "b", "c"), apply=False)
    assert store.replace_calls == [] and all(log.has_pending(u) for u in users)
    assert committer.drain_users(users)
    assert store.replace_calls == [15]
    assert all(store.count(u) == 3 and not log.has_pending(u) for u in users)


def test_bulk_drain_keeps_a_later_delete_after_the_rows(parts) -> None:  # type: ignore[no-untyped-def]
    store, log, committer = parts
    first = added("u", "a", "b")
    committer.commit(first, apply=False)
    committer.commit(added("v", "x"), apply=False)
    wipe = ChangeSet("u")
    wipe.forget_user(utcnow())
    committer.commit(wipe, apply=False)
    assert committer.drain_users(["u", "v"])
    assert store.count("u") == 0 and store.count("v") == 1
    assert not log.has_pending("u")


def test_bulk_drain_leaves_a_user_another_writer_holds(parts) -> None:  # type: ignore[no-untyped-def]
    store, _, committer = parts
    committer.commit(added("u", "a"), apply=False)
    committer.commit(added("v", "b"), apply=False)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with committer.locked("u"):
            held.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    assert held.wait(10), "the other writer never took the user's lock"
    try:
        assert committer.drain_users(["u", "v"]) is False
        assert store.count("u") == 0 and store.count("v") == 1
    finally:
        release.set()
        t.join(10)
    assert committer.drain_users(["u"]) and store.count("u") == 1


def test_a_store_outage_keeps_the_ops_queued_for_the_next_drain(parts) -> None:  # type: ignore[no-untyped-def]
    store, log, committer = parts
    store.down = True
    assert committer.commit(added("u", "a")) == 1  # committed: acknowledged
    assert log.has_pending("u") and store.count("u") == 0
    assert committer.drain_users(["u"]) is False
    store.down = False
    assert committer.drain() and store.count("u") == 1 and not log.has_pending("u")


def test_a_refused_commit_writes_nothing() -> None:
    store, log = CountingStore(), InMemoryEventLog(dim=DIM)

    def refuse() -> None:
        raise ModelChangedError("the live embedding model is no longer m")

    committer = Committer(store, log, check=refuse)
    with pytest.raises(ModelChangedError):
        committer.commit(added("u", "a"))
    assert log.version("u") == 0 and store.count("u") == 0 and not log.has_pending("u")


def test_a_write_inside_the_gate_enters_again_while_a_switch_waits() -> None:
    """A write that holds the gate (a doctor repair) commits through the committer,
    which enters the gate again; a switch waiting meanwhile must not deadlock it."""
    gate = WriteGate()
    store, log = CountingStore(), InMemoryEventLog(dim=DIM)
    committer = Committer(store, log, gate=gate)
    inside, switched = threading.Event(), threading.Event()
    result: list[int] = []

    def writer() -> None:
        with gate.shared():
            inside.set()
            switcher_waiting.wait(10)
            result.append(committer.commit(added("u", "a")))

    def switcher() -> None:
        with gate.exclusive():
            switched.set()

    switcher_waiting = threading.Event()
    w = threading.Thread(target=writer)
    w.start()
    assert inside.wait(10), "the writer never entered the gate"
    s = threading.Thread(target=switcher)
    s.start()
    deadline = time.monotonic() + 10
    while not gate._closed and time.monotonic() < deadline:  # the switch is waiting now
        time.sleep(0.001)
    assert gate._closed, "the switch never started waiting for the writer"
    switcher_waiting.set()
    w.join(10)
    s.join(10)
    assert result == [1], "the write inside the gate did not finish"
    assert switched.is_set(), "the switch never ran after the write"


def test_old_facts_are_judged_by_their_own_time(parts) -> None:  # type: ignore[no-untyped-def]
    """Tombstones carry the deletion time: content stated before it is covered."""
    _, log, committer = parts
    wipe = ChangeSet("u")
    wipe.forget_user(utcnow())
    committer.commit(wipe)
    tomb = log.tombstones("u")[0]
    before = int((utcnow() - timedelta(days=1)).timestamp() * 1000)
    assert tomb.covers(content_hash="h", slot=None, at_ms=before)
    assert not tomb.covers(content_hash="h", slot=None, at_ms=tomb.at_ms + 1)


def test_fresh_ids_are_inserted_without_a_lookup_and_a_replay_replaces(parts) -> None:  # type: ignore[no-untyped-def]
    store, log, committer = parts
    committer.commit(added("u", "a", "b", fresh=True))
    assert store.insert_calls == [2] and store.replace_calls == []
    committer.commit(added("u", "c"))  # ids a job may write again: replaced
    assert store.insert_calls == [2] and store.replace_calls == [1]
    store.down = True
    committer.commit(added("u", "d", fresh=True))
    store.down = False
    assert committer.drain()  # a replay, not this commit's own apply: replaced
    assert store.insert_calls == [2] and store.replace_calls == [1, 1]
    assert store.count("u") == 4 and not log.has_pending("u")


def replace_one(uid: str) -> StoreOp:
    return StoreOp("replace", uid, rows=(StoredMemory(record(uid, "x"), vec(9)),))


def test_the_version_is_read_once_per_hold_of_the_users_lock(parts, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # Each read is a round trip with a shared log; under the lock only this thread's
    # commits move the version, so the one read on taking it is enough.
    _, log, committer = parts
    reads: list[str] = []
    real = log.version
    monkeypatch.setattr(log, "version", lambda uid: reads.append(uid) or real(uid))
    with committer.locked("u"):
        assert committer.version("u") == 0
        assert committer.commit(added("u", "a")) == 1
        assert committer.version("u") == 1
        assert committer.commit(added("u", "b")) == 2
        with committer.locked("u"):  # reentrant: no second read
            assert committer.commit(ChangeSet("u")) == 2  # nothing to commit: unmoved
    assert reads == ["u"]
    assert committer.commit(added("u", "c")) == 3 == real("u")  # a hold of its own
    assert committer.version("u") == 3 and reads == ["u", "u", "u"]  # not held: read
    with committer.locked("u"):
        pass
    assert len(reads) == 3  # read when first needed, not on taking the lock
    with pytest.raises(RuntimeError), committer.locked("u"):
        committer.version("u")
        raise RuntimeError("the write failed")
    log.commit("u", [], [replace_one("u")])  # another writer, between two holds
    with committer.locked("u"):  # the failed hold left nothing behind: read again
        assert committer.version("u") == 4

"""One contract for every `EventLog`: the in-memory fake, SQLite and PostgreSQL.

The same cases run against all three, grouped by seam (ChangeLog, TurnLog, JobState);
the SQLite log is the reference. The last class checks what only a shared log promises:
two `PostgresEventLog`s (two pools, standing in for two processes) on one database.
"""

from __future__ import annotations

import secrets
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from memray.core.ids import new_id
from memray.errors import StoreError
from memray.models import MemoryEvent, MemoryRecord, content_hash, utcnow
from memray.store.base import StoredMemory
from memray.store.events import (
    CANCELLED_BY_DELETE,
    AddJob,
    DataKey,
    EventLog,
    StoreOp,
    Tombstone,
    UserLocks,
)
from memray.store.fake_log import InMemoryEventLog
from memray.store.sqlite_log import SQLiteEventLog

if TYPE_CHECKING:
    from memray.store.postgres_log import PostgresEventLog

DIM = 4
_STRIPES = len(UserLocks()._locks)
# Two users on different stripes of `UserLocks` (crc32 % 64), so one's lock says nothing
# about the other's in-process.
ALICE, BOB = "alice", "bob"
assert zlib.crc32(ALICE.encode()) % _STRIPES != zlib.crc32(BOB.encode()) % _STRIPES


# -- backends ------------------------------------------------------------------------
@dataclass
class Backend:
    """Opens logs on one storage: a second `open_log()` is a reopen (or another process)."""

    kind: str
    factory: Callable[[], EventLog]
    opened: list[EventLog] = field(default_factory=list)

    def open_log(self) -> EventLog:
        log = self.factory()
        log.open()
        self.opened.append(log)
        return log


def postgres_log(dsn: str, *, pool_size: int = 4) -> PostgresEventLog:
    from memray.store.postgres_log import PostgresEventLog

    return PostgresEventLog(dsn, dim=DIM, pool_size=pool_size)


@pytest.fixture(params=["memory", "sqlite",
                        pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    kind: str = request.param
    factory: Callable[[], EventLog]
    if kind == "memory":
        fake = InMemoryEventLog(DIM)  # one object: "reopening" the fake keeps its data
        factory = lambda: fake  # noqa: E731
    elif kind == "sqlite":
        factory = lambda: SQLiteEventLog(tmp_path / "events.sqlite3", dim=DIM)  # noqa: E731
    else:
        dsn: str = request.getfixturevalue("fresh_postgres_dsn")
        factory = lambda: postgres_log(dsn)  # noqa: E731
    backend = Backend(kind, factory)
    yield backend
    for log in reversed(backend.opened):
        log.close()


@pytest.fixture
def log(backend: Backend) -> EventLog:
    return backend.open_log()


# -- data ----------------------------------------------------------------------------
_rng = np.random.default_rng(7)


def record(user: str, content: str, **kw: Any) -> MemoryRecord:
    now = utcnow()
    return MemoryRecord(id=new_id(), user_id=user, content=content, created_at=now,
                        updated_at=now, last_confirmed_at=now, embedding_model="m",
                        content_hash=content_hash(content), **kw)


def stored(user: str, content: str, dim: int = DIM) -> StoredMemory:
    return StoredMemory(record(user, content, metadata={"k": [1, "ü"]}),
                        _rng.standard_normal(dim).astype(np.float32))


def added(rec: MemoryRecord) -> MemoryEvent:
    return MemoryEvent(op="ADD", memory_id=rec.id, user_id=rec.user_id, memory=rec,
                       at=rec.created_at, reason="test")


def deleted(rec: MemoryRecord) -> MemoryEvent:
    return MemoryEvent(op="DELETE", memory_id=rec.id, user_id=rec.user_id, previous=rec,
                       at=utcnow(), reason="gone")


def replace_op(*rows: StoredMemory) -> StoreOp:
    return StoreOp("replace", rows[0].record.user_id, rows=rows)


def assert_same_op(got: StoreOp, want: StoreOp) -> None:
    assert (got.kind, got.user_id, got.ids) == (want.kind, want.user_id, want.ids)
    assert [r.record for r in got.rows] == [r.record for r in want.rows]
    for g, w in zip(got.rows, want.rows, strict=True):
        assert g.vector.dtype == np.float32 and g.vector.shape == w.vector.shape
        assert np.array_equal(g.vector, w.vector)


@contextmanager
def held_elsewhere(log: EventLog, user: str) -> Iterator[None]:
    """`user`'s lock held by another thread for the duration of the block."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with log.user_lock(user):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(10), "the other thread never got the lock"
    try:
        yield
    finally:
        release.set()
        thread.join(10)


# -- ChangeLog -----------------------------------------------------------------------
class TestChangeLog:
    def test_ops_round_trip_through_the_outbox_in_order(self, log: EventLog) -> None:
        rows = (stored(ALICE, "a1"), stored(ALICE, "a2"))
        ops = [replace_op(*rows), StoreOp("delete", ALICE, ids=(rows[0].record.id, "x")),
               StoreOp("delete_user", ALICE)]
        seqs = log.commit(ALICE, [added(r.record) for r in rows], ops)
        assert len(seqs) == 3 and seqs == sorted(seqs) and len(set(seqs)) == 3
        pending = log.pending()
        assert [p.seq for p in pending] == seqs
        for p, op in zip(pending, ops, strict=True):
            assert_same_op(p.op, op)

    def test_commit_is_all_or_nothing(self, log: EventLog, backend: Backend) -> None:
        rec = record(ALICE, "kept")
        log.commit(ALICE, [added(rec)], [replace_op(stored(ALICE, "kept"))])
        log.log_turns(ALICE, "s", [("t1", "user", "hi")])
        turn = log.pending_turns(ALICE, "s")[0][0]
        before = (log.version(ALICE), log.pending(), list(log.user_events(ALICE)))
        unencodable = stored(ALICE, "bad")
        unencodable = StoredMemory(unencodable.record.model_copy(
            update={"metadata": {"x": object()}}), unencodable.vector)
        with pytest.raises(Exception):  # noqa: B017 - whatever the encoder raises
            log.commit(ALICE, [added(record(ALICE, "new"))],
                       [replace_op(stored(ALICE, "ok")), replace_op(unencodable)],
                       purge_ids=[rec.id], clear_turns=[turn],
                       tombstones=[Tombstone("hash", "h", 5)], marks=[("job", "k")])
        assert log.version(ALICE) == before[0]
        assert [p.seq for p in log.pending()] == [p.seq for p in before[1]]
        assert list(log.user_events(ALICE)) == before[2]
        assert [t[0] for t in log.pending_turns(ALICE, "s")] == [turn]
        assert log.tombstones(ALICE) == [] and log.marks("job") == set()
        log.commit(ALICE, [added(record(ALICE, "after"))], [])  # the log still works
        assert log.version(ALICE) == before[0] + 1

    def test_version_bumps_only_on_a_real_change(self, log: EventLog) -> None:
        assert log.version(ALICE) == 0 and log.versions() == {}
        rec = record(ALICE, "x")
        steps: list[tuple[dict[str, Any], int]] = [
            ({"events": [added(rec)]}, 1),
            ({"marks": [("j", "k")], "tombstones": [Tombstone("slot", "city", 1)]}, 0),
            ({"ops": [replace_op(stored(ALICE, "x"))]}, 1),
            ({"purge_ids": [rec.id]}, 1),
            ({"clear_turns": [12345]}, 0),
            ({"purge_user": True}, 1),
            ({}, 0),
        ]
        version = 0
        for kwargs, bump in steps:
            events, ops = kwargs.pop("events", []), kwargs.pop("ops", [])
            log.commit(ALICE, events, ops, **kwargs)
            version += bump
            assert log.version(ALICE) == version, kwargs
        assert log.version(BOB) == 0
        assert log.versions() == {ALICE: 4}

    def test_versions_strictly_increase_per_user(self, log: EventLog) -> None:
        seen = []
        for i in range(5):
            log.commit(ALICE, [added(record(ALICE, f"a{i}"))], [])
            seen.append(log.version(ALICE))
        log.commit(BOB, [added(record(BOB, "b"))], [])
        assert seen == [1, 2, 3, 4, 5]
        assert log.versions() == {ALICE: 5, BOB: 1}

    def test_purge_ids_removes_only_their_history(self, log: EventLog) -> None:
        gone, kept = record(ALICE, "gone"), record(ALICE, "kept")
        log.commit(ALICE, [added(gone), added(kept)], [])
        tomb = deleted(gone)
        log.commit(ALICE, [tomb], [], purge_ids=[gone.id])
        assert log.history(ALICE, gone.id) == [tomb]  # purged first, then appended
        assert log.history(ALICE, kept.id) == [added(kept)]

    def test_purge_user_removes_history_and_turns_of_that_user_only(self,
                                                                    log: EventLog) -> None:
        a, b = record(ALICE, "a"), record(BOB, "b")
        log.commit(ALICE, [added(a)], [])
        log.commit(BOB, [added(b)], [])
        log.log_turns(ALICE, "s", [("t1", "user", "hello")])
        log.log_turns(BOB, "s", [("t1", "user", "hello")])
        log.commit(ALICE, [], [StoreOp("delete_user", ALICE)], purge_user=True)
        assert list(log.user_events(ALICE)) == [] and log.history(ALICE, a.id) == []
        assert log.pending_turns(ALICE, "s") == []
        assert list(log.user_events(BOB)) == [added(b)]
        assert len(log.pending_turns(BOB, "s")) == 1

    def test_purge_user_scrubs_the_users_adds_only(self, log: EventLog) -> None:
        log.enqueue_add("j1", ALICE, "k1", '{"text": "alice said this"}')
        log.enqueue_add("j2", BOB, "k1", '{"text": "bob said this"}')
        log.enqueue_add("j3", ALICE, "k3", '{"text": "alice again"}')
        claimed = log.claim_add(60.0)
        assert claimed is not None and claimed.id == "j1"
        log.finish_add("j1", "done", '{"events": ["alice said this"]}', None)
        log.commit(ALICE, [], [StoreOp("delete_user", ALICE)], purge_user=True)
        done, queued = log.get_add("j1"), log.get_add("j3")
        assert done == AddJob("j1", ALICE, "done", "{}", None, None)
        assert queued == AddJob("j3", ALICE, "failed", "{}", None, CANCELLED_BY_DELETE)
        assert log.find_add(ALICE, "k1") is None and log.find_add(ALICE, "k3") is None
        assert log.get_add("j2") == AddJob("j2", BOB, "queued", '{"text": "bob said this"}')
        again = log.claim_add(60.0)
        assert again is not None and again.id == "j2"  # a cancelled add never runs

    def test_user_turns_span_sessions_and_only_that_user(self, log: EventLog) -> None:
        log.log_turns(ALICE, "s1", [("t1", "user", "我住在杭州")])
        log.log_turns(ALICE, "s2", [("t2", "user", "I live in Paris")])
        log.log_turns(BOB, "s1", [("t3", "user", "bob")])
        turns = log.user_turns(ALICE)
        assert [(tid, text) for _, tid, text in turns] == [("t1", "我住在杭州"),
                                                          ("t2", "I live in Paris")]
        log.commit(ALICE, [], [], clear_turns=[turns[0][0]])
        assert [tid for _, tid, _ in log.user_turns(ALICE)] == ["t2"]

    def test_receipts_are_kept_per_user_in_order_and_outlive_purge_user(
            self, log: EventLog) -> None:
        log.record_receipt(ALICE, "r1", 1000, '{"id": "r1"}')
        log.record_receipt(BOB, "r2", 1500, '{"id": "r2"}')
        log.record_receipt(ALICE, "r3", 2000, '{"id": "r3"}')
        log.commit(ALICE, [], [StoreOp("delete_user", ALICE)], purge_user=True)
        assert log.receipts(ALICE) == ['{"id": "r1"}', '{"id": "r3"}']
        assert log.receipts(BOB) == ['{"id": "r2"}']
        assert log.receipts("nobody") == []

    def test_data_keys_one_per_user_kept_first_dropped_and_rewrapped(
            self, log: EventLog) -> None:
        first = DataKey("k1", b"\x00wrapped-one", "m1")
        assert log.data_key(ALICE) is None
        assert log.add_data_key(ALICE, first) == first
        assert log.add_data_key(ALICE, DataKey("k2", b"other", "m1")) == first  # kept
        assert log.add_data_key(BOB, DataKey("kb", b"bob", "m1")).key_id == "kb"
        log.rewrap_data_key(ALICE, DataKey("k1", b"rewrapped", "m2"))
        log.rewrap_data_key(ALICE, DataKey("k9", b"wrong key id", "m3"))  # changes nothing
        assert log.data_key(ALICE) == DataKey("k1", b"rewrapped", "m2")
        assert sorted(u for u, _ in log.data_keys()) == [ALICE, BOB]
        log.commit(ALICE, [], [StoreOp("delete_user", ALICE)], purge_user=True)
        assert log.data_key(ALICE) is not None  # only crypto-shredding destroys a key
        assert log.drop_data_key(ALICE) and not log.drop_data_key(ALICE)
        assert log.data_key(ALICE) is None and log.data_key(BOB) is not None

    def test_clear_turns_drops_only_the_users_listed_turns(self, log: EventLog) -> None:
        log.log_turns(ALICE, "s", [("t1", "user", "a"), ("t2", "assistant", "b")])
        log.log_turns(BOB, "s", [("t1", "user", "c")])
        (first, _, _, _), (second, *rest) = log.pending_turns(ALICE, "s")
        (bobs, *_), = log.pending_turns(BOB, "s")
        log.commit(ALICE, [], [], clear_turns=[first, bobs])
        assert log.pending_turns(ALICE, "s") == [(second, *rest)]
        assert [t[0] for t in log.pending_turns(BOB, "s")] == [bobs]

    def test_pending_by_user_pending_users_done_and_has_pending(self, log: EventLog) -> None:
        b1 = log.commit(BOB, [], [replace_op(stored(BOB, "b1"))])
        a1 = log.commit(ALICE, [], [replace_op(stored(ALICE, "a1"))])
        b2 = log.commit(BOB, [], [StoreOp("delete", BOB, ids=("i",))])
        assert [p.seq for p in log.pending()] == b1 + a1 + b2
        assert [p.seq for p in log.pending(BOB)] == b1 + b2
        assert {p.op.user_id for p in log.pending(BOB)} == {BOB}
        assert log.pending_users() == [BOB, ALICE]
        assert log.has_pending(ALICE) and log.has_pending(BOB) and not log.has_pending("c")
        log.done(b1)
        assert log.pending_users() == [ALICE, BOB]  # now alice's op is the oldest
        log.done(a1 + b2 + [999_999])
        assert log.pending() == [] and log.pending_users() == []
        assert not log.has_pending(ALICE) and not log.has_pending(BOB)

    def test_set_dim_is_refused_while_ops_are_queued(self, log: EventLog) -> None:
        seqs = log.commit(ALICE, [], [replace_op(stored(ALICE, "x"))])
        with pytest.raises(StoreError):
            log.set_dim(8)
        assert log.pending()[0].op.rows[0].vector.shape == (DIM,)
        log.done(seqs)
        log.set_dim(8)
        op = replace_op(stored(ALICE, "wide", dim=8))
        log.commit(ALICE, [], [op])
        (got,) = log.pending()
        assert_same_op(got.op, op)

    def test_history_and_user_events_are_in_commit_order(self, log: EventLog) -> None:
        a, b = record(ALICE, "a"), record(ALICE, "b")
        updated = MemoryEvent(op="UPDATE", memory_id=a.id, user_id=ALICE,
                              memory=a.model_copy(update={"content": "a2"}), previous=a,
                              at=utcnow())
        gone = deleted(b)
        log.commit(ALICE, [added(b), added(a)], [])
        log.commit(BOB, [added(record(BOB, "b"))], [])
        log.commit(ALICE, [updated], [])
        log.commit(ALICE, [gone], [])
        assert log.history(ALICE, a.id) == [added(a), updated]
        assert log.history(ALICE, b.id) == [added(b), gone]
        assert log.history(BOB, a.id) == []
        assert list(log.user_events(ALICE)) == [added(b), added(a), updated, gone]

    def test_hostile_ids_round_trip(self, log: EventLog) -> None:
        long_user = secrets.token_hex(8192)  # 16 KiB, incompressible enough
        users = [long_user, 'q" or 1=1 --', "中文用户", "back\\slash\nline"]
        long_key = secrets.token_hex(4096)
        for user in users:
            row = stored(user, "fact")
            log.commit(user, [added(row.record)], [replace_op(row)],
                       tombstones=[Tombstone("slot", long_key, 3)],
                       marks=[("job", user + long_key)])
            log.log_turns(user, long_key, [("t", "user", "x")])
            log.enqueue_add(new_id(), user, long_key, "{}")
            assert list(log.user_events(user)) == [added(row.record)]
            assert_same_op(log.pending(user)[0].op, replace_op(row))
            assert log.tombstones(user) == [Tombstone("slot", long_key, 3)]
            assert [t[1] for t in log.pending_turns(user, long_key)] == ["t"]
            found = log.find_add(user, long_key)
            assert found is not None and found.user_id == user
        assert log.versions() == dict.fromkeys(users, 1)
        assert log.pending_users() == users
        assert log.marks("job") == {u + long_key for u in users}


class TestUserLock:
    def test_user_lock_is_reentrant_within_a_thread(self, log: EventLog) -> None:
        with log.user_lock(ALICE), log.user_lock(ALICE):
            with log.try_user_lock(ALICE) as got:
                assert got
            log.commit(ALICE, [added(record(ALICE, "x"))], [])
            assert log.version(ALICE) == 1
        with log.try_user_lock(ALICE) as got:  # released in full
            assert got

    def test_try_user_lock_fails_only_for_the_held_user(self, log: EventLog) -> None:
        with held_elsewhere(log, ALICE):
            with log.try_user_lock(ALICE) as got:
                assert got is False
            with log.try_user_lock(BOB) as got:
                assert got is True
        with log.try_user_lock(ALICE) as got:
            assert got is True

    def test_user_lock_waits_for_the_holder(self, log: EventLog) -> None:
        order: list[str] = []
        with held_elsewhere(log, ALICE):
            waiter = threading.Thread(target=lambda: _locked_append(log, ALICE, order))
            waiter.start()
            time.sleep(0.2)
            order.append("released")
        waiter.join(10)
        assert order == ["released", "entered"]

    def test_reopened_log_keeps_its_data(self, backend: Backend, log: EventLog) -> None:
        if backend.kind == "memory":
            pytest.skip("the fake keeps nothing across processes")
        rec = record(ALICE, "durable")
        seqs = log.commit(ALICE, [added(rec)], [replace_op(stored(ALICE, "durable"))],
                          tombstones=[Tombstone("hash", "h", 9)], marks=[("job", "k")])
        log.log_turns(ALICE, "s", [("t", "user", "x")])
        log.enqueue_add("job-1", ALICE, "idem", '{"a": 1}')
        log.set_meta("model", "m1")
        log.close()
        again = backend.open_log()
        assert again.version(ALICE) == 1 and [p.seq for p in again.pending()] == seqs
        assert again.history(ALICE, rec.id) == [added(rec)]
        assert again.tombstones(ALICE) == [Tombstone("hash", "h", 9)]
        assert again.marks("job") == {"k"} and again.get_meta("model") == "m1"
        assert [t[1] for t in again.pending_turns(ALICE, "s")] == ["t"]
        job = again.get_add("job-1")
        assert job is not None and job.request == '{"a": 1}'


def _locked_append(log: EventLog, user: str, order: list[str]) -> None:
    with log.user_lock(user):
        order.append("entered")


# -- TurnLog -------------------------------------------------------------------------
class TestTurnLog:
    def test_turns_are_kept_per_user_and_session_in_order(self, log: EventLog) -> None:
        log.log_turns(ALICE, "s1", [("t1", "user", "one"), ("t2", "assistant", "two")])
        log.log_turns(ALICE, "s2", [("t1", "user", "other session")])
        log.log_turns(BOB, "s1", [("t1", "user", "other user")])
        log.log_turns(ALICE, "s1", [("t3", "user", "three")])
        turns = log.pending_turns(ALICE, "s1")
        assert [t[1:] for t in turns] == [("t1", "user", "one"), ("t2", "assistant", "two"),
                                          ("t3", "user", "three")]
        seqs = [t[0] for t in turns]
        assert seqs == sorted(seqs) and len(set(seqs)) == 3
        assert [t[3] for t in log.pending_turns(ALICE, "s2")] == ["other session"]
        assert [t[3] for t in log.pending_turns(BOB, "s1")] == ["other user"]
        assert log.pending_turns(BOB, "s2") == []

    def test_enqueue_is_idempotent_per_user_and_key(self, log: EventLog) -> None:
        first = log.enqueue_add("j1", ALICE, "k", '{"n": 1}')
        assert (first.id, first.status, first.request) == ("j1", "queued", '{"n": 1}')
        assert log.enqueue_add("j2", ALICE, "k", '{"n": 2}') == first
        assert log.get_add("j2") is None
        other = log.enqueue_add("j3", BOB, "k", "{}")  # same key, other user
        assert other.id == "j3"
        free = [log.enqueue_add(f"n{i}", ALICE, None, "{}") for i in range(2)]  # no key
        assert [j.id for j in free] == ["n0", "n1"]
        assert log.find_add(ALICE, "k") == first
        assert log.find_add(ALICE, "nope") is None
        assert log.get_add("j1") == first and log.get_add("nope") is None

    def test_record_add_keeps_the_first_result(self, log: EventLog) -> None:
        log.record_add("r1", ALICE, "k", '{"ok": 1}')
        log.record_add("r2", ALICE, "k", '{"ok": 2}')
        found = log.find_add(ALICE, "k")
        assert found is not None
        assert (found.id, found.status, found.result) == ("r1", "done", '{"ok": 1}')
        assert log.enqueue_add("j", ALICE, "k", "{}") == found  # a retry sees the result
        assert log.claim_add(60) is None  # done jobs are never handed out

    def test_claim_finish_cycle(self, log: EventLog) -> None:
        ids = [new_id() for _ in range(3)]  # time-ordered: oldest first
        for job_id in ids:
            log.enqueue_add(job_id, ALICE, None, job_id)
        claimed = [log.claim_add(60) for _ in ids]
        assert [j.id if j else None for j in claimed] == ids
        assert all(j is not None and j.status == "running" and j.request == j.id
                   for j in claimed)
        assert log.claim_add(60) is None
        log.finish_add(ids[0], "done", '{"r": 1}', None)
        log.finish_add(ids[1], "failed", None, "boom")
        done, failed = log.get_add(ids[0]), log.get_add(ids[1])
        assert done is not None and (done.status, done.result, done.error) == \
            ("done", '{"r": 1}', None)
        assert failed is not None and (failed.status, failed.error) == ("failed", "boom")
        running = log.get_add(ids[2])
        assert running is not None and running.status == "running"

    def test_concurrent_claims_hand_each_job_out_once(self, log: EventLog) -> None:
        ids = {new_id() for _ in range(24)}
        for job_id in ids:
            log.enqueue_add(job_id, BOB, None, "{}")

        def drain() -> list[str]:
            got = []
            while (job := log.claim_add(60)) is not None:
                got.append(job.id)
            return got

        with ThreadPoolExecutor(4) as pool:
            claimed = [j for part in pool.map(lambda _: drain(), range(4)) for j in part]
        assert sorted(claimed) == sorted(ids)

    def test_an_expired_lease_is_claimed_again(self, log: EventLog) -> None:
        short, long = new_id(), new_id()
        log.enqueue_add(short, ALICE, None, "{}")
        log.enqueue_add(long, ALICE, None, "{}")
        first = log.claim_add(0.05)
        second = log.claim_add(60)
        assert first is not None and first.id == short
        assert second is not None and second.id == long
        time.sleep(0.2)
        again = log.claim_add(60)  # the first worker "died": its lease ran out
        assert again is not None and again.id == short and again.status == "running"
        assert log.claim_add(60) is None  # the 60 s leases still hold


# -- JobState ------------------------------------------------------------------------
class TestJobState:
    def test_tombstones_keep_the_latest_time(self, log: EventLog) -> None:
        log.commit(ALICE, [], [], tombstones=[Tombstone("hash", "h1", 100),
                                              Tombstone("slot", "like:", 50)])
        log.commit(ALICE, [], [], tombstones=[Tombstone("hash", "h1", 300)])
        log.commit(ALICE, [], [], tombstones=[Tombstone("hash", "h1", 200),
                                              Tombstone("all", "*", 7)])
        log.commit(BOB, [], [], tombstones=[Tombstone("hash", "h1", 1)])
        assert sorted(log.tombstones(ALICE), key=lambda t: (t.kind, t.key)) == [
            Tombstone("all", "*", 7), Tombstone("hash", "h1", 300),
            Tombstone("slot", "like:", 50)]
        assert log.tombstones(BOB) == [Tombstone("hash", "h1", 1)]
        assert log.tombstones("nobody") == []

    def test_marks_are_idempotent_and_per_job(self, log: EventLog) -> None:
        log.commit(ALICE, [], [], marks=[("backfill", "a"), ("backfill", "a")])
        log.commit(BOB, [], [], marks=[("backfill", "a"), ("backfill", "b"), ("other", "a")])
        assert log.marks("backfill") == {"a", "b"}
        assert log.marks("other") == {"a"} and log.marks("none") == set()

    def test_meta_is_set_and_overwritten(self, log: EventLog) -> None:
        assert log.get_meta("model") is None
        log.set_meta("model", "m1")
        log.set_meta("model", "m2")
        log.set_meta("other", "")
        assert log.get_meta("model") == "m2" and log.get_meta("other") == ""


# -- PostgreSQL across processes -----------------------------------------------------
@pytest.fixture
def two_logs(fresh_postgres_dsn: str) -> Iterator[tuple[PostgresEventLog, PostgresEventLog]]:
    """Two logs on one database with their own pools: two processes of a cluster."""
    a, b = postgres_log(fresh_postgres_dsn), postgres_log(fresh_postgres_dsn)
    a.open()
    b.open()
    yield a, b
    a.close()
    b.close()


@pytest.mark.postgres
class TestPostgresAcrossProcesses:
    def test_user_lock_excludes_the_other_process(
            self, two_logs: tuple[PostgresEventLog, PostgresEventLog]) -> None:
        a, b = two_logs
        with a.user_lock(ALICE):
            with b.try_user_lock(ALICE) as got:
                assert got is False
            with b.try_user_lock(BOB) as got:
                assert got is True
        with b.try_user_lock(ALICE) as got:
            assert got is True
        order: list[str] = []
        with held_elsewhere(a, ALICE):
            waiter = threading.Thread(target=lambda: _locked_append(b, ALICE, order))
            waiter.start()
            time.sleep(0.2)
            order.append("released")
        waiter.join(10)
        assert order == ["released", "entered"]

    def test_a_failing_holder_releases_lock_and_connection(self, fresh_postgres_dsn: str,
                                                            two_logs: tuple[PostgresEventLog,
                                                                            PostgresEventLog],
                                                            ) -> None:
        single = postgres_log(fresh_postgres_dsn, pool_size=1)  # a leak would block at once
        single.open()
        try:
            for _ in range(3):
                with pytest.raises(RuntimeError), single.user_lock(ALICE):
                    with single.user_lock(ALICE):  # nested: the same connection
                        single.commit(ALICE, [added(record(ALICE, "x"))], [])
                    raise RuntimeError("the write failed")
            with two_logs[1].try_user_lock(ALICE) as got:
                assert got is True
            assert single.version(ALICE) == 3
        finally:
            single.close()

    def test_concurrent_commits_lose_no_version(
            self, two_logs: tuple[PostgresEventLog, PostgresEventLog]) -> None:
        logs, per_thread, threads = two_logs, 10, 6

        def unlocked(i: int) -> None:
            for _ in range(per_thread):
                logs[i % 2].commit(ALICE, [added(record(ALICE, "x"))], [])

        def locked(i: int) -> list[int]:
            seen = []
            for _ in range(per_thread):
                lg = logs[i % 2]
                with lg.user_lock(BOB):
                    before = lg.version(BOB)
                    lg.commit(BOB, [added(record(BOB, "x"))], [])
                    after = lg.version(BOB)
                assert after == before + 1
                seen.append(after)
            return seen

        total = per_thread * threads
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(unlocked, range(threads)))
            seen = [v for part in pool.map(locked, range(threads)) for v in part]
        assert logs[0].version(ALICE) == logs[1].version(ALICE) == total
        assert sorted(seen) == list(range(1, total + 1))

    def test_jobs_are_claimed_once_across_processes(
            self, two_logs: tuple[PostgresEventLog, PostgresEventLog]) -> None:
        logs = two_logs
        ids = {new_id() for _ in range(40)}
        for job_id in ids:
            logs[0].enqueue_add(job_id, ALICE, None, "{}")

        def drain(i: int) -> list[str]:
            got = []
            while (job := logs[i % 2].claim_add(60)) is not None:
                got.append(job.id)
            return got

        with ThreadPoolExecutor(6) as pool:
            parts = list(pool.map(drain, range(6)))
        claimed = [j for part in parts for j in part]
        assert sorted(claimed) == sorted(ids)

    def test_processes_opening_at_once_share_one_schema(self, fresh_postgres_dsn: str) -> None:
        logs = [postgres_log(fresh_postgres_dsn) for _ in range(4)]
        try:
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda lg: lg.open(), logs))
            logs[0].commit(ALICE, [added(record(ALICE, "x"))], [])
            assert [lg.version(ALICE) for lg in logs] == [1, 1, 1, 1]
        finally:
            for lg in logs:
                lg.close()

    def test_an_unreachable_server_fails_fast(self) -> None:
        pytest.importorskip("psycopg")
        from memray.errors import StoreUnavailableError

        started = time.monotonic()
        with pytest.raises(StoreUnavailableError, match="refused"):
            postgres_log("postgresql://postgres@127.0.0.1:1/memray").open()
        assert time.monotonic() - started < 5

    def test_a_newer_schema_is_refused(self, fresh_postgres_dsn: str) -> None:
        import psycopg

        from memray.store.postgres_log import SCHEMA_VERSION

        first = postgres_log(fresh_postgres_dsn)
        first.open()
        first.close()
        newer = SCHEMA_VERSION + 1
        with psycopg.connect(fresh_postgres_dsn, autocommit=True) as conn:
            conn.execute("UPDATE memray_schema SET version = %s", (newer,))
        late = postgres_log(fresh_postgres_dsn)
        with pytest.raises(StoreError, match=rf"version {newer}\b.*\b{SCHEMA_VERSION}\b"):
            late.open()
        with pytest.raises(StoreError, match="not open"):
            late.version(ALICE)

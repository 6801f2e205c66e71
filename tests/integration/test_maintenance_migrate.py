"""Maintenance and migration jobs on real Ray (2 CPUs) and milvus-lite."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from jobs_helpers import snapshot

from memray import Memory, MemoryConfig
from memray.batch import maintenance, migrate
from memray.batch.config import MaintenanceArgs, MigrateArgs
from memray.core.changes import ChangeSet
from memray.core.ids import new_id
from memray.errors import DimensionMismatchError, StoreError
from memray.models import MemoryRecord, MemoryStatus, MemoryType, content_hash, utcnow
from memray.store.base import StoredMemory
from memray.store.milvus import MilvusStore

pytestmark = pytest.mark.usefixtures("local_ray")


def put(mem: Memory, uid: str, text: str, *, days_old: float = 0.0, importance: float = 0.5,
        type_: MemoryType = MemoryType.PREFERENCE, status: MemoryStatus = MemoryStatus.ACTIVE,
        expires_in_days: float | None = None) -> MemoryRecord:
    """A memory written through the engine, with the ages a night of maintenance sees."""
    engine = mem.engine()
    at = utcnow() - timedelta(days=days_old)
    expires = None if expires_in_days is None else utcnow() + timedelta(days=expires_in_days)
    rec = MemoryRecord(id=new_id(), user_id=uid, type=type_, content=text,
                       importance=importance, status=status, created_at=at, updated_at=at,
                       last_confirmed_at=at, expires_at=expires,
                       embedding_model=engine.embedder.model, content_hash=content_hash(text))
    vec = engine.embedder.embed([text])[0]
    changes = ChangeSet(uid)
    changes.put(rec, vec, None, at)
    engine.committer.commit(changes)
    return rec


def seed(mem: Memory) -> dict[str, MemoryRecord]:
    return {
        "task": put(mem, "u1", "I am preparing the Q3 report", type_=MemoryType.TASK_STATE,
                    expires_in_days=-1),
        "candidate": put(mem, "u1", "I might be into pottery", days_old=40,
                         status=MemoryStatus.CANDIDATE, importance=0.6),
        "pref": put(mem, "u1", "I prefer window seats on flights", days_old=180,
                    importance=0.8),
        "name": put(mem, "u1", "My name is Ada", days_old=400, type_=MemoryType.IDENTITY,
                    importance=0.9),
        "tea1": put(mem, "u1", "I like green tea", importance=0.2),
        "tea2": put(mem, "u1", "I really like drinking green tea", importance=0.25),
        "tea3": put(mem, "u1", "Green tea is my favourite drink", importance=0.1),
        "dog": put(mem, "u1", "I have a dog named Rex", importance=0.2),
        "other": put(mem, "u2", "I like green tea", importance=0.2),
    }


def margs(tmp_path: Path, **extra: object) -> MaintenanceArgs:
    return MaintenanceArgs.model_validate({"memory": {"data_dir": str(tmp_path)}, **extra})


def test_maintenance_dry_run_then_run_then_idempotent(tmp_path: Path) -> None:
    cfg = MemoryConfig(data_dir=str(tmp_path))
    with Memory(cfg) as mem:
        recs = seed(mem)
        before = snapshot(mem, ("u1", "u2"))
        dry = maintenance.run(margs(tmp_path, dry_run=True), memory=mem)
        assert snapshot(mem, ("u1", "u2")) == before  # a dry run writes nothing
        result = maintenance.run(margs(tmp_path), memory=mem)
        assert {k: dry[k] for k in ("expired", "retired", "merged_clusters")} == \
            {k: result[k] for k in ("expired", "retired", "merged_clusters")}
        assert result["expired"] == 1 and result["retired"] == 1
        assert result["merged_clusters"] == 1 and result["merged_originals"] == 3

        def get(key: str) -> MemoryRecord | None:
            return mem.get(recs[key].id, user_id=recs[key].user_id)

        assert get("task").status == MemoryStatus.EXPIRED  # type: ignore[union-attr]
        assert get("candidate").status == MemoryStatus.EXPIRED  # type: ignore[union-attr]
        pref = get("pref")
        assert pref is not None and pref.importance == pytest.approx(0.4, abs=0.01)  # 1 half-life
        assert pref.metadata["base_importance"] == 0.8
        assert get("name").importance == 0.9  # type: ignore[union-attr]  # identity never decays
        for k in ("tea1", "tea2", "tea3"):  # kept inside the summary, never recalled
            assert get(k).status == MemoryStatus.MERGED  # type: ignore[union-attr]
        assert get("dog") is not None and get("other") is not None  # unrelated, other user
        merged = [r for r in mem.get_all(user_id="u1").items if "merged_from" in r.metadata]
        assert len(merged) == 1
        assert sorted(merged[0].metadata["merged_from"]) == sorted(
            recs[k].id for k in ("tea1", "tea2", "tea3"))
        assert "green tea" in merged[0].content.lower()
        hits = mem.search("What do I like to drink?", user_id="u1")
        assert hits and hits[0].memory.id == merged[0].id
        after = snapshot(mem, ("u1", "u2"))
        again = maintenance.run(margs(tmp_path), memory=mem)
        assert again["merged_clusters"] == 0 and again["expired"] == 0
        assert snapshot(mem, ("u1", "u2")) == after  # nothing changes twice


class ReplaceFailsOnce(MilvusStore):
    """A crash right after the merged memory is inserted, before its members are marked."""

    fail = True

    def replace(self, rows: Sequence[StoredMemory]) -> None:
        if self.fail:
            self.fail = False
            raise StoreError("process died here")
        super().replace(rows)


def test_merge_crash_between_write_and_members_finishes_on_restart(tmp_path: Path) -> None:
    cfg = MemoryConfig(data_dir=str(tmp_path))
    with Memory(cfg) as mem:
        recs = seed(mem)
        model, dim = mem.engine().embedder.model, mem.engine().embedder.dim
    store = ReplaceFailsOnce(str(tmp_path / "milvus.db"), model=model, dim=dim)
    members = {recs[k].id for k in ("tea1", "tea2", "tea3")}
    with Memory(cfg, store=store) as mem:
        maintenance.run(margs(tmp_path), memory=mem)
        # The members are not marked yet: the rest of the merge is queued.
        assert mem.engine().events.has_pending("u1")
    with Memory(cfg) as mem:  # the restart replays the queued merge
        by_id = {r.id: r for r in mem.get_all(user_id="u1").items}
        assert {by_id[i].status for i in members} == {MemoryStatus.MERGED}
        merged = [r for r in by_id.values() if "merged_from" in r.metadata]
        assert len(merged) == 1 and set(merged[0].metadata["merged_from"]) == members
        hits = mem.search("What do I like to drink?", user_id="u1")
        assert not members & {h.memory.id for h in hits}  # members are never recalled
        again = maintenance.run(margs(tmp_path), memory=mem)
        assert again["merged_clusters"] == 0
        assert len([r for r in mem.get_all(user_id="u1").items
                    if "merged_from" in r.metadata]) == 1  # never merged twice


class Traffic:
    """Searches without pause, and writes and one delete, while a migration runs."""

    def __init__(self, mem: Memory, users: list[str], doomed: MemoryRecord) -> None:
        self.mem, self.users, self.doomed = mem, users, doomed
        self.stats = {"searches": 0, "errors": 0, "empty": 0, "writes": 0}
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.read), threading.Thread(target=self.write)]

    def __enter__(self) -> Traffic:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()

    def read(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                hits = self.mem.search("Which topic do I like?",
                                       user_id=self.users[i % len(self.users)], threshold=-1.0)
                self.stats["empty"] += not hits
            except Exception as exc:
                self.stats["errors"] += 1
                self.errors.append(repr(exc))
            self.stats["searches"] += 1
            i += 1

    def write(self) -> None:
        n = 0
        while not self.stop.is_set() and n < 30:
            self.mem.add(f"written during the migration {n}", user_id="user-1", infer=False)
            n += 1
            self.stats["writes"] = n
        self.mem.delete(self.doomed.id, user_id="user-0")


def counts_of(mem: Memory, users: list[str]) -> dict[str, int]:
    return {u: len(mem.get_all(user_id=u, limit=1000).items) for u in users}


def test_migration_to_768_dims_with_concurrent_reads_and_writes(tmp_path: Path) -> None:
    cfg = MemoryConfig(data_dir=str(tmp_path))
    users = [f"user-{i}" for i in range(6)]
    with Memory(cfg) as mem:
        for u in users:
            mem.add([{"role": "user", "content": f"{u} fact {i}: I like topic number {i}"}
                     for i in range(12)], user_id=u, infer=False)
        doomed = mem.get_all(user_id="user-0").items[0]
        other = Memory(cfg.model_copy(update={"store": cfg.store.model_copy(
            update={"model_check_s": 0.05})})).open()  # another replica, on the old model
        other.search("Which topic do I like?", user_id="user-2")
        with Traffic(mem, users, doomed) as traffic:
            result = migrate.run(MigrateArgs.model_validate(
                {"memory": {"data_dir": str(tmp_path)}, "to": {"model": "all-mpnet-base-v2"}}),
                memory=mem)
            for _ in range(20):  # reads after the switch too
                mem.search("Which topic do I like?", user_id="user-2")
        stats = traffic.stats
        assert stats["errors"] == 0, traffic.errors[:3]
        assert stats["empty"] == 0 and stats["searches"] > 10
        assert result["to_model"] == "all-mpnet-base-v2 (768)"
        assert result["self_recall"] >= 0.9
        hit = mem.search("Which topic do I like?", user_id="user-2")[0]
        assert hit.memory.embedding_model == "all-mpnet-base-v2"
        assert mem.get(doomed.id, user_id="user-0") is None
        written = [r.content for r in mem.get_all(user_id="user-1", limit=100).items
                   if r.content.startswith("written during")]
        assert len(written) == stats["writes"]  # every write made meanwhile is there
        mem.add("written after the switch", user_id="user-3", infer=False)
        _another_process_follows(other, users)
        counts = counts_of(mem, users)
    with pytest.raises(DimensionMismatchError):  # a process still on the old model
        Memory(cfg).open()
    rollback_and_check(tmp_path, users, counts)


def rollback_and_check(tmp_path: Path, users: list[str], counts: dict[str, int]) -> None:
    new_cfg = MemoryConfig(data_dir=str(tmp_path), embedder={"model": "all-mpnet-base-v2"})
    with Memory(new_cfg) as mem:
        assert counts_of(mem, users) == counts
        back = migrate.run(MigrateArgs.model_validate(
            {"memory": new_cfg.model_dump(), "rollback": True}), memory=mem)
        assert back["to_model"] == "all-MiniLM-L6-v2 (384)"
        assert back["re_embedded"] <= 2  # only what changed since the switch
        hit = mem.search("written after the switch", user_id="user-3")[0]
        assert hit.memory.embedding_model == "all-MiniLM-L6-v2"
        assert hit.memory.content == "written after the switch"
    with Memory(MemoryConfig(data_dir=str(tmp_path))) as mem:
        assert counts_of(mem, users) == counts
    # The 768-dim collection is kept after the rollback (a later migration reuses it).
    kept = MilvusStore(str(tmp_path / "milvus.db"), model="all-mpnet-base-v2", dim=768,
                       bind_alias=False)
    kept.open()
    try:
        assert kept.count("user-3") == counts["user-3"]
    finally:
        kept.close()


def test_merge_summary_comes_from_the_llm_when_one_is_configured(tmp_path: Path) -> None:
    from openai_stub import Reply, ScriptedOpenAI

    with ScriptedOpenAI() as llm:
        llm.replies.append(Reply({"summary": "Loves green tea, drinks it daily"}))
        write = {"extractor": "llm", "llm": {"base_url": llm.base_url, "model": "m"}}
        cfg = MemoryConfig.model_validate({"data_dir": str(tmp_path), "write": write})
        with Memory(cfg) as mem:
            for text in ("I like green tea", "I really like drinking green tea"):
                put(mem, "u1", text, importance=0.2)
            result = maintenance.run(MaintenanceArgs.model_validate(
                {"memory": cfg.model_dump(), "ray": {}}), memory=mem)
            assert result["merged_clusters"] == 1
            merged = [r for r in mem.get_all(user_id="u1").items
                      if r.status == MemoryStatus.ACTIVE]
            assert [r.content for r in merged] == ["Loves green tea, drinks it daily"]
        prompt = llm.requests[0]["body"]["messages"][0]["content"]
        assert "I like green tea" in prompt and "I really like drinking green tea" in prompt


def _another_process_follows(other: Memory, users: list[str]) -> None:
    """A `Memory` opened on the old model before the switch (another replica) follows it
    without a restart: its next calls embed with the new model, in the new collection."""
    try:
        assert other.config.embedder.model == "all-MiniLM-L6-v2"
        time.sleep(0.1)
        hits = other.search("Which topic do I like?", user_id=users[2])
        assert hits and hits[0].memory.embedding_model == "all-mpnet-base-v2"
        assert other.config.embedder.model == "all-mpnet-base-v2"
        other.add("written by the follower", user_id=users[4], infer=False)
        mine = [r for r in other.get_all(user_id=users[4], limit=100).items
                if r.content == "written by the follower"]
        assert [r.embedding_model for r in mine] == ["all-mpnet-base-v2"]
    finally:
        other.close()

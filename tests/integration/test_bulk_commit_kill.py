"""SIGKILL at each step of a backfill's bulk commit (milvus-lite + SQLite), then reopen:
the doctor is clean, every user whose import was committed has all of it, a user
deleted before the import has nothing, and nothing is there twice."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memray import Memory, MemoryConfig
from memray.ingest.writer import JOB

HASHING = {"provider": "hashing", "dim": 32}
USERS = [f"u{i}" for i in range(12)]
PER_USER = 20

CHILD = textwrap.dedent('''
    import os, signal, sys
    from datetime import timedelta
    from memray import Memory, MemoryConfig
    from memray.ingest.logs import LogTurn
    from memray.ingest.units import build_unit, unit_texts
    from memray.ingest.writer import BackfillWriter
    from memray.models import utcnow
    from memray.store.milvus import MilvusStore
    from memray.store.sqlite_log import SQLiteEventLog

    data_dir, kill_at = sys.argv[1], sys.argv[2]
    users, per_user = sys.argv[3].split(","), int(sys.argv[4])

    def die():
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    calls = {"commit": 0, "replace": 0}
    real_commit, real_replace = SQLiteEventLog.commit, MilvusStore.replace

    def commit(self, *a, **kw):
        calls["commit"] += 1
        if kill_at == "before_log_commit" and calls["commit"] == 6:
            die()
        return real_commit(self, *a, **kw)

    def replace(self, rows):
        calls["replace"] += 1
        if kill_at == "before_store_write":
            die()
        if kill_at == "mid_store_write":
            real_replace(self, rows[: len(rows) // 2])
            die()
        return real_replace(self, rows)

    SQLiteEventLog.commit, MilvusStore.replace = commit, replace
    cfg = MemoryConfig(data_dir=data_dir, embedder={"provider": "hashing", "dim": 32})
    m = Memory(cfg).open()
    writer = BackfillWriter(m.engine(), drain_rows=100_000)
    ms = int((utcnow() - timedelta(days=1)).timestamp() * 1000)
    for uid in users + ["gone"]:
        turns = [LogTurn(uid, "s1", f"t{i}", "user", f"{uid} note number {i}", ms + i)
                 for i in range(per_user)]
        unit = build_unit(turns, infer=False, extractor=None, done=frozenset())
        writer.write(unit, m.engine().embedder.embed(unit_texts(unit)))
    writer.flush()
    print("finished", flush=True)
''')


def _seed(cfg: MemoryConfig) -> None:
    with Memory(cfg) as m:
        m.add("gone note number 3", user_id="gone", infer=False)
        assert m.delete_all(user_id="gone").deleted == 1


@pytest.mark.parametrize("kill_at", ["before_log_commit", "before_store_write",
                                     "mid_store_write"])
def test_a_bulk_commit_killed_at_any_step_loses_and_resurrects_nothing(
        tmp_path: Path, kill_at: str) -> None:
    cfg = MemoryConfig(data_dir=str(tmp_path), embedder=HASHING)
    _seed(cfg)
    run = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), kill_at,
                          ",".join(USERS), str(PER_USER)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == -9, f"the child was not killed at {kill_at}: {run.stderr[-2000:]}"
    with Memory(cfg) as m:
        assert m.doctor().problems == 0
        marked = {key.split("\x1f")[0] for key in m.engine().events.marks(JOB)}
        if kill_at == "before_log_commit":
            assert 0 < len(marked) < len(USERS), "the kill did not fall between commits"
        else:
            assert marked >= set(USERS)
        for uid in USERS:
            got = [r.content for r in m.get_all(user_id=uid, limit=1000).items]
            assert len(got) == len(set(got)), f"{uid} has a memory twice"
            expected = {f"{uid} note number {i}" for i in range(PER_USER)} \
                if uid in marked else set()
            assert set(got) == expected, f"{uid} after a kill at {kill_at}"
        assert m.get_all(user_id="gone").items == []

"""Opening a milvus-lite dir that does not answer says which of two things happened: this
process's own lite server was not ready in time (a busy machine), or another process
holds the dir. Each message names what it waited for."""

from __future__ import annotations

import fcntl
import subprocess
import sys
import textwrap
from pathlib import Path

from memray.store import milvus
from memray.store.milvus import MilvusStore


def _store(path: Path) -> MilvusStore:
    return MilvusStore(str(path / "milvus.db"), model="m", dim=4, open_timeout_s=7)


def test_a_dir_this_process_serves_is_named_as_not_ready_in_time(tmp_path: Path) -> None:
    store = _store(tmp_path)
    key = str((tmp_path / "milvus.db").resolve())
    (tmp_path / "milvus.db").mkdir()
    with open(tmp_path / "milvus.db" / "LOCK", "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # held by this process, as lite holds it
        milvus._lite_refs[key] = 1  # another store of this process has it open
        try:
            text = store._open_error(TimeoutError("channel not ready"))
        finally:
            del milvus._lite_refs[key]
    assert "this process's milvus-lite server did not answer within 7 s" in text
    assert "store.open_timeout_s" in text and "another process" not in text


def test_a_dir_another_process_holds_is_named_so(tmp_path: Path) -> None:
    (tmp_path / "milvus.db").mkdir()
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, sys, time
        f = open({str(tmp_path / "milvus.db" / "LOCK")!r}, "a+b")
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        print("locked", flush=True)
        sys.stdin.read()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        text = _store(tmp_path)._open_error(TimeoutError("channel not ready"))
    finally:
        holder.communicate("", timeout=30)
    assert "is open in another process" in text


def test_a_server_that_does_not_answer_names_the_wait(tmp_path: Path) -> None:
    store = MilvusStore("http://127.0.0.1:9", model="m", dim=4, open_timeout_s=3)
    text = store._open_error(TimeoutError("channel not ready"))
    assert "waited up to 3 s" in text and "store.open_timeout_s" in text

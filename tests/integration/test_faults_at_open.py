"""A damaged store at open: a clear error naming the path, nothing changed, and a way back
(the vectors are rebuilt from the event log by the doctor)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from memray import Memory, MemoryConfig
from memray.embed.cache import CachedEmbedder
from memray.errors import StoreError


def _seed(data_dir: Path, embedder: CachedEmbedder) -> None:
    with Memory(MemoryConfig(data_dir=str(data_dir)), embedder=embedder) as m:
        m.add([{"role": "user", "content": t} for t in ("I like oolong tea", "我住在杭州")],
              user_id="u", infer=False)


def test_damaged_event_log_is_named_and_left_alone(tmp_path: Path,
                                                   embedder: CachedEmbedder) -> None:
    _seed(tmp_path / "d", embedder)
    log = tmp_path / "d" / "events.sqlite3"
    before = log.read_bytes()[:5000]
    log.write_bytes(before)  # truncated mid-page
    with pytest.raises(StoreError, match=r"events\.sqlite3"):
        Memory(MemoryConfig(data_dir=str(tmp_path / "d")), embedder=embedder).open()
    assert log.read_bytes() == before  # nothing was written over it


def test_damaged_lite_dir_is_named_and_rebuilt_from_the_log(
        tmp_path: Path, embedder: CachedEmbedder, capfd: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d"
    _seed(data, embedder)
    for manifest in (data / "milvus.db").rglob("*.json"):
        manifest.write_text('{"trunc')
    cfg = MemoryConfig(data_dir=str(data))
    capfd.readouterr()
    with pytest.raises(StoreError, match=r"milvus\.db cannot be read.*doctor --repair"):
        Memory(cfg, embedder=embedder).open()
    printed = capfd.readouterr()
    # the error says it all: no pymilvus / milvus-lite tracebacks printed before it
    assert "Traceback" not in printed.err + printed.out
    shutil.move(data / "milvus.db", tmp_path / "milvus.db.damaged")
    with Memory(cfg, embedder=embedder) as m:
        report = m.doctor("u", repair=True)
        assert not report.problems
        assert sorted(r.content for r in m.get_all(user_id="u").items) == \
            ["I like oolong tea", "我住在杭州"]
        assert m.search("tea", user_id="u")[0].memory.content == "I like oolong tea"


def test_a_store_left_open_by_a_crash_is_rebuilt_from_the_log(tmp_path: Path,
                                                              embedder: CachedEmbedder) -> None:
    cfg = MemoryConfig(data_dir=str(tmp_path / "d"))
    with Memory(cfg, embedder=embedder) as m:
        added = m.add([{"role": "user", "content": t} for t in ("I like oolong tea",
                                                               "I keep bees", "我住在杭州")],
                      user_id="u", infer=False).memories
        engine = m.engine()
        # what a torn milvus-lite WAL loses: rows the log holds as applied
        engine.store.delete("u", [added[0].id, added[2].id])
    from memray.core.backend import _EMBEDDED_STATE
    from memray.store.sqlite_log import SQLiteEventLog

    log = SQLiteEventLog(str(tmp_path / "d" / "events.sqlite3"), dim=embedder.dim)
    log.open()
    assert log.get_meta(_EMBEDDED_STATE) == "closed"  # a clean close says so
    log.set_meta(_EMBEDDED_STATE, "open")  # ... and a crash never gets to
    log.close()
    with Memory(cfg, embedder=embedder) as again:
        assert sorted(r.id for r in again.get_all(user_id="u").items) == \
            sorted(r.id for r in added)
        assert again.search("tea", user_id="u")[0].memory.id == added[0].id
        assert not again.doctor().problems

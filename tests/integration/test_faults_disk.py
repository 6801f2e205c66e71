"""The disk under `data_dir` fills up mid-run, or is read-only at start (a real tmpfs,
mounted for the test): every write is acknowledged or refused with a clear StoreError,
nothing is half-written, reads go on, and once the disk is back the store matches the log."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from memray import Memory, MemoryConfig
from memray.embed.cache import CachedEmbedder
from memray.errors import MemrayError, StoreError


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 MiB tmpfs; skipped where this process may not mount (not root, no CAP_SYS_ADMIN)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}); "
                    "the test needs root with CAP_SYS_ADMIN")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(mnt: Path) -> Path:
    filler = mnt / "filler"
    f = filler.open("wb")
    with contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
            f.flush()
    with contextlib.suppress(OSError):
        f.close()
    return filler


def _adds(m: Memory, n: int, batch: str) -> tuple[list[str], list[str]]:
    """n new memories: the ids acknowledged, and the messages of the refusals."""
    acked, refused = [], []
    for i in range(n):
        try:
            r = m.add(f"I like jazz record {batch}-{i} " + "x" * 1800, user_id="u",
                      infer=False)
            acked.append(r.events[0].memory_id)
        except MemrayError as exc:  # anything else escaping is a bug
            refused.append(str(exc))
    return acked, refused


def _consistent(data: Path, embedder: CachedEmbedder, acked: list[str]) -> None:
    with Memory(MemoryConfig(data_dir=str(data)), embedder=embedder) as m:
        assert not m.doctor("u").problems  # the vectors agree with the log
        ids = [r.id for r in m.get_all(user_id="u", limit=500).items]
        assert sorted(ids) == sorted(acked)  # every acknowledged write, once; no other


def test_a_full_disk_refuses_writes_clearly_and_loses_nothing(
        small_disk: Path, embedder: CachedEmbedder) -> None:
    data = small_disk / "d"
    m = Memory(MemoryConfig(data_dir=str(data)), embedder=embedder).open()
    acked, _ = _adds(m, 5, "a")
    assert len(acked) == 5
    filler = _fill(small_disk)
    more, refused = _adds(m, 30, "b")
    assert refused, "the disk never filled"
    assert all("full" in msg or "No space" in msg for msg in refused), refused[:3]
    assert all(str(data) in msg for msg in refused if "event log" in msg), refused[:3]
    assert m.search("jazz record", user_id="u", threshold=-1)  # reads go on
    filler.unlink()
    m.close()
    _consistent(data, embedder, acked + more)


def test_a_read_only_disk_is_a_clear_error_at_open_and_changes_nothing(
        small_disk: Path, embedder: CachedEmbedder) -> None:
    # A mount with files open for writing cannot turn read-only (EBUSY), so the store is
    # closed first: the case is a data dir that is read-only when memray starts.
    data = small_disk / "d"
    with Memory(MemoryConfig(data_dir=str(data)), embedder=embedder) as m:
        acked, _ = _adds(m, 5, "a")
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    try:
        with pytest.raises(StoreError) as raised:
            Memory(MemoryConfig(data_dir=str(data)), embedder=embedder).open()
        assert str(data) in str(raised.value) and "read-only" in str(raised.value)
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
    _consistent(data, embedder, acked)

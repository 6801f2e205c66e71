"""A user too big for the hot set is not read whole again on every search: the set
remembers it for a while (its searches go to the store meanwhile), and forgets it when
the user's rows are dropped."""

from __future__ import annotations

import numpy as np

from memray.core.hotset import HotSet
from memray.core.records import new_record
from memray.models import MemoryType, utcnow
from memray.store.base import StoredMemory, Where
from memray.store.events import StoreOp


def rows(n: int) -> list[StoredMemory]:
    return [StoredMemory(new_record(user_id="u", content=f"m{i}", embedding_model="m",
                                    at=utcnow(), type=MemoryType.FACT),
                         np.eye(4, dtype=np.float32)[i % 4]) for i in range(n)]


class Loader:
    def __init__(self, n: int) -> None:
        self.n, self.calls = n, 0

    def __call__(self) -> list[StoredMemory]:
        self.calls += 1
        return rows(self.n)


def test_a_user_too_big_is_read_once_per_retry_period() -> None:
    now = [0.0]
    hot = HotSet(dim=4, max_rows=3, oversize_retry_s=60, clock=lambda: now[0])
    load = Loader(5)
    q = np.ones(4, dtype=np.float32)
    for _ in range(3):
        assert hot.search("u", 1, q, 2, Where(), load) is None
    assert load.calls == 1
    now[0] = 61.0  # deletes may have shrunk it: read it again
    load.n = 2
    found = hot.search("u", 1, q, 2, Where(), load)
    assert found is not None and len(found) == 2 and load.calls == 2
    assert hot.holding("u") == 2


def test_forgotten_when_the_users_rows_are_dropped() -> None:
    hot = HotSet(dim=4, max_rows=3, oversize_retry_s=3600)
    load = Loader(5)
    q = np.ones(4, dtype=np.float32)
    assert hot.search("u", 1, q, 2, Where(), load) is None
    hot.applied("u", [StoreOp(kind="delete_user", user_id="u")], 1, 2)
    load.n = 1
    assert hot.search("u", 2, q, 2, Where(), load) is not None and load.calls == 2
    load.n = 5
    hot.changed("u")  # the committer could not follow a write: the entry is dropped
    assert hot.search("u", 3, q, 2, Where(), load) is None and load.calls == 3
    hot.changed("u")
    assert hot.search("u", 4, q, 2, Where(), load) is None and load.calls == 4

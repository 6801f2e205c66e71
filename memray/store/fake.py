"""`InMemoryStore`: a fake `VectorStore` for unit tests, held honest by the contract tests
that run the same cases against it and against Milvus (lite and server)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from memray.errors import StoreError
from memray.models import MemoryRecord
from memray.store.base import StoredMemory, Vector, Where
from memray.store.filters import matches, quote
from memray.store.rows import from_row, to_row


class InMemoryStore:
    """Holds rows in a dict; brute-force cosine search. Not persistent."""

    def __init__(self, *, model: str, dim: int) -> None:
        self._model, self._dim = model, dim
        self._rows: dict[str, StoredMemory] = {}
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def model(self) -> str:
        return self._model

    @property
    def is_embedded(self) -> bool:
        return True

    def open(self) -> None:
        return None

    def close(self) -> None:
        return None

    def insert(self, rows: Sequence[StoredMemory]) -> None:
        self.replace(rows)

    def replace(self, rows: Sequence[StoredMemory]) -> None:
        for row in rows:
            if row.vector.shape != (self._dim,):
                raise StoreError(f"vector of shape {row.vector.shape}, expected ({self._dim},)")
            quote(row.record.user_id)  # same value rules as the real store
        with self._lock:
            for row in rows:
                held = self._rows.get(row.record.id)
                if held is not None and held.record.user_id != row.record.user_id:
                    raise StoreError("a row id to replace belongs to another user")
            for row in rows:
                # Round-trip through the row format so the fake stores what Milvus stores.
                record = from_row(to_row(row.record))
                self._rows[record.id] = StoredMemory(record, row.vector.astype(np.float32))

    def _select(self, user_id: str, where: Where) -> list[StoredMemory]:
        quote(user_id)
        with self._lock:
            return [s for s in self._rows.values() if matches(s.record, user_id, where)]

    def delete(self, user_id: str, ids: Sequence[str]) -> int:
        found = self._select(user_id, Where(ids=tuple(ids))) if ids else []
        with self._lock:
            for s in found:
                self._rows.pop(s.record.id, None)
        return len(found)

    def delete_user(self, user_id: str) -> int:
        found = self._select(user_id, Where())
        return self.delete(user_id, [s.record.id for s in found])

    def query(self, user_id: str, where: Where, limit: int | None = None) -> list[MemoryRecord]:
        records = [s.record for s in self._select(user_id, where)]
        return records if limit is None else records[:limit]

    def list_ids(self, user_id: str, where: Where) -> list[str]:
        return sorted(s.record.id for s in self._select(user_id, where))

    def search(
        self, user_id: str, vector: Vector, limit: int, where: Where
    ) -> list[tuple[MemoryRecord, float]]:
        rows = self._select(user_id, where)
        if not rows:
            return []
        mat = np.stack([s.vector for s in rows])
        q = np.asarray(vector, dtype=np.float32)
        norms = np.linalg.norm(mat, axis=1) * max(float(np.linalg.norm(q)), 1e-12)
        sims = mat @ q / np.maximum(norms, 1e-12)
        order = np.argsort(-sims, kind="stable")[:limit]
        return [(rows[i].record, float(sims[i])) for i in order]

    def touch(self, user_id: str) -> None:
        """Reads here are always current."""

    def rows(self, user_id: str, where: Where) -> list[StoredMemory]:
        return [StoredMemory(s.record, s.vector.copy()) for s in self._select(user_id, where)]

    def count(self, user_id: str) -> int:
        return len(self._select(user_id, Where()))

    def known_hashes(self, wanted: dict[str, set[str]]) -> set[tuple[str, str]]:
        with self._lock:
            return {(s.record.user_id, s.record.content_hash) for s in self._rows.values()
                    if s.record.status.value == "active"
                    and s.record.content_hash in wanted.get(s.record.user_id, set())}

    def user_ids(self) -> list[str]:
        with self._lock:
            return sorted({s.record.user_id for s in self._rows.values()})

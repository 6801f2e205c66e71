"""The `VectorStore` seam: typed queries in, records out. Backends never see raw filter text."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from memray.models import MemoryRecord

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Where:
    """Typed conditions, always ANDed with the user scope. Empty tuples mean 'any'.

    `alive_at_ms`: keep only memories with no expiry or expiry after this epoch-ms time.
    `after_id`: keep only ids greater than this (ids are time-ordered).
    `said_within_ms`: keep only memories said inside one of these epoch-ms ranges (start
    included, end excluded); said is the message time where a memory has one, else its
    storing (`created_at`).
    """

    ids: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    slots: tuple[str, ...] = ()
    slot_prefixes: tuple[str, ...] = ()  # ORed with `slots`: slot in slots or startswith
    content_hashes: tuple[str, ...] = ()
    agent_id: str | None = None
    session_id: str | None = None
    alive_at_ms: int | None = None
    created_after_ms: int | None = None
    created_before_ms: int | None = None
    min_importance: float | None = None
    after_id: str | None = None
    said_within_ms: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class StoredMemory:
    record: MemoryRecord
    vector: Vector = field(repr=False)


@runtime_checkable
class VectorStore(Protocol):
    """Per-user vector storage. Every method is scoped to exactly one user_id.

    Implementations must apply the user scope inside the search (never filter after it),
    must never return another user's rows, and must make writes visible to the next read.
    """

    @property
    def dim(self) -> int: ...

    @property
    def model(self) -> str: ...

    @property
    def is_embedded(self) -> bool:
        """True when the store lives in this process and no other process writes it (a
        milvus-lite file, the fake): a cache of it needs no shared log to stay coherent,
        and a crash of this process can tear its latest writes."""

    def open(self) -> None:
        """Connect and create or check the collection; raises DimensionMismatchError."""

    def close(self) -> None: ...

    def insert(self, rows: Sequence[StoredMemory]) -> None:
        """Insert rows whose ids are new."""

    def replace(self, rows: Sequence[StoredMemory]) -> None:
        """Insert rows, replacing any row with the same id; idempotent."""

    def delete(self, user_id: str, ids: Sequence[str]) -> int:
        """Delete this user's rows with these ids; returns how many existed."""

    def delete_user(self, user_id: str) -> int:
        """Delete all of this user's rows; returns how many existed."""

    def query(self, user_id: str, where: Where, limit: int | None = None) -> list[MemoryRecord]:
        """Records matching `where`, unordered, at most `limit` (None: all)."""

    def list_ids(self, user_id: str, where: Where) -> list[str]:
        """Ids matching `where`, sorted ascending."""

    def search(
        self, user_id: str, vector: Vector, limit: int, where: Where
    ) -> list[tuple[MemoryRecord, float]]:
        """The `limit` nearest rows by cosine similarity, best first."""

    def count(self, user_id: str) -> int: ...

    def touch(self, user_id: str) -> None:
        """Reads of this user must see every write made so far (another process wrote)."""

    def rows(self, user_id: str, where: Where) -> list[StoredMemory]:
        """Records with their vectors (for a hot set), unordered."""

    def user_ids(self) -> list[str]:
        """Every user with at least one row, sorted (for batch jobs)."""

    def known_hashes(self, wanted: dict[str, set[str]]) -> set[tuple[str, str]]:
        """(user_id, content_hash) pairs among `wanted` held by an active row: a bulk
        import's exact-repeat check for many users in one call. Each pair is matched
        within its own user only."""

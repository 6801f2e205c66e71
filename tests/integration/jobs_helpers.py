"""Helpers shared by the batch-job tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memray import Memory

SAMPLE_JSONL = Path(__file__).parents[1] / "data" / "logs" / "sample.jsonl"
SAMPLE_PARQUET = Path(__file__).parents[1] / "data" / "logs" / "sample.parquet"
USERS = ("alice", "bob", "carol", "dave", "erin")


def snapshot(mem: Memory, users: tuple[str, ...] = USERS) -> dict[str, Any]:
    """Everything stored for the users, plus their memory versions."""
    out: dict[str, Any] = {}
    for u in users:
        records = sorted((r.model_dump(mode="json") for r in mem.get_all(user_id=u,
                                                                          limit=1000).items),
                         key=lambda r: r["id"])
        out[u] = {"records": records, "version": mem.version(user_id=u)}
    return out


def contents(mem: Memory, user: str, status: str | None = "active") -> list[str]:
    return sorted(r.content for r in mem.get_all(user_id=user, limit=1000).items
                  if status is None or r.status.value == status)

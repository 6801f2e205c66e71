"""Plans and rows as JSON (they travel between the writer and Ray workers)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np

from memray.maintain.plan import Merge, UserPlan
from memray.models import MemoryRecord
from memray.store.base import StoredMemory


def rows_to_item(user_id: str, version: int, rows: list[StoredMemory]) -> dict[str, Any]:
    return {"user_id": user_id, "version": version,
            "records": json.dumps([r.record.model_dump(mode="json") for r in rows]),
            "vectors": b"".join(np.asarray(r.vector, np.float32).tobytes() for r in rows)}


def item_to_rows(item: dict[str, Any], dim: int) -> list[StoredMemory]:
    records = [MemoryRecord.model_validate(r) for r in json.loads(item["records"])]
    matrix = np.frombuffer(item["vectors"], dtype=np.float32).reshape(len(records), dim)
    return [StoredMemory(r, matrix[i].copy()) for i, r in enumerate(records)]


def _dump(r: MemoryRecord) -> dict[str, Any]:
    return r.model_dump(mode="json")


def plan_to_json(plan: UserPlan) -> str:
    return json.dumps({
        "user_id": plan.user_id, "counts": dict(plan.counts),
        "updates": [[_dump(a), _dump(b), why] for a, b, why in plan.updates],
        "merges": [{"originals": [_dump(r) for r in m.originals], "merged": _dump(m.merged)}
                   for m in plan.merges]})


def plan_from_json(text: str) -> UserPlan:
    d = json.loads(text)
    load = MemoryRecord.model_validate
    return UserPlan(
        user_id=d["user_id"], counts=Counter(d["counts"]),
        updates=[(load(a), load(b), why) for a, b, why in d["updates"]],
        merges=[Merge([load(r) for r in m["originals"]], load(m["merged"]))
                for m in d["merges"]])

"""The single writer of a backfill: units in (with their vectors), the store changed.

Per user, in one commit of the event log: the planned events and store ops, the
tombstone-respecting choices, and the checkpoint marks of the sessions the unit covers.
So after a kill -9 a unit is either wholly committed (its ops replay from the outbox on
the next open, and its sessions are skipped) or not at all (it is imported again).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from memray.core.engine import Engine
from memray.core.resolve import Plan, Resolver, Scope
from memray.embed.base import Embedder, Matrix
from memray.extract.base import Extraction
from memray.ingest.units import Unit, fact_from_json, forget_from_json, mark_key
from memray.models import (
    MemoryEvent,
    MemoryRecord,
    MemorySource,
    MemoryStatus,
    MemoryType,
    content_hash,
    utcnow,
)
from memray.store.base import StoredMemory, Where
from memray.store.events import StoreOp, Tombstone

JOB = "backfill"


class LookupEmbedder:
    """Vectors the embedding workers already made, by text; anything else (an old
    memory's content, rarely needed) is embedded here with the same model."""

    def __init__(self, fallback: Embedder) -> None:
        self._fallback = fallback
        self.table: dict[str, Matrix] = {}

    @property
    def model(self) -> str:
        return self._fallback.model

    @property
    def dim(self) -> int:
        return self._fallback.dim

    def open(self) -> None:
        self._fallback.open()

    def close(self) -> None:
        return None

    def embed(self, texts: Sequence[str]) -> Matrix:
        missing = [t for t in dict.fromkeys(texts) if t not in self.table]
        if missing:
            self.table.update(zip(missing, self._fallback.embed(missing), strict=True))
        return np.stack([self.table[t] for t in texts]) if texts else \
            np.zeros((0, self.dim), dtype=np.float32)


def _at(ms: int) -> datetime:
    """A log time as a datetime, never later than now (clock skew in exported logs)."""
    return min(datetime.fromtimestamp(ms / 1000, UTC), utcnow())


def _covered(tombs: list[Tombstone], text: str, slot: str | None, ms: int) -> bool:
    h = content_hash(text)
    return any(t.covers(content_hash=h, slot=slot, at_ms=ms) for t in tombs)


class BackfillWriter:
    def __init__(self, engine: Engine, *, drain_rows: int = 2000) -> None:
        self._engine = engine
        self._lookup = LookupEmbedder(engine.embedder)
        self._resolver = Resolver(engine.store, self._lookup, engine.config.write)
        self._drain_rows, self._queued = drain_rows, 0
        self.counts: Counter[str] = Counter()

    def write(self, unit: Unit, vectors: Matrix) -> None:
        uid = unit["user_id"]
        marks = [(JOB, mark_key(uid, k)) for k in unit["sessions"]]
        with self._engine.user_lock(uid):
            if "items" in unit:
                self._write_messages(uid, unit, vectors, marks)
            else:
                self._write_facts(uid, unit, vectors, marks)
        self.counts["users"] += 1
        self.counts["sessions"] += len(unit["sessions"])
        self.counts["turns"] += unit["turns"]
        if self._queued >= self._drain_rows:
            self.flush()

    def flush(self) -> None:
        """Apply every queued store op (bulk: consecutive replaces go as one call)."""
        self._engine.applier.drain()
        self._queued = 0

    # -- infer=True: resolve each round in order, one commit per user ----------------
    def _write_facts(self, uid: str, unit: Unit, vectors: Matrix,
                     marks: list[tuple[str, str]]) -> None:
        self._lookup.table = dict(zip((f["content"] for r in unit["rounds"]
                                       for f in r["facts"]), vectors, strict=True))
        tombs = self._engine.events.tombstones(uid)
        plan = Plan()
        for r in unit["rounds"]:
            facts = [fact_from_json(f) for f in r["facts"]]
            kept = [f for f in facts if not _covered(tombs, f.content, f.slot, r["ts_ms"])]
            self.counts["facts_tombstoned"] += len(facts) - len(kept)
            scope = Scope(uid, r["session_id"] or None, None, {}, 2)
            forgets = [forget_from_json(g) for g in r["forgets"]]
            self._resolver.plan(scope, Extraction(kept, forgets), _at(r["ts_ms"]), into=plan)
        ops = []
        if plan.rows:
            ops.append(StoreOp("replace", uid, rows=tuple(plan.rows.values())))
        if plan.deleted:
            ops.append(StoreOp("delete", uid, ids=tuple(plan.deleted)))
        logged = [e for e in plan.events
                  if e.op in ("ADD", "UPDATE") and e.memory_id not in plan.deleted]
        for e in plan.events:
            self.counts[f"op_{e.op.lower()}"] += 1
        # Applied at once: the next unit of this user (a later run) plans against it.
        self._engine.applier.write(uid, logged, ops, purge_ids=list(plan.deleted),
                                   tombstones=plan.tombstones, marks=marks)
        self._lookup.table = {}

    # -- infer=False: each user message becomes one memory ----------------------------
    def _write_messages(self, uid: str, unit: Unit, vectors: Matrix,
                        marks: list[tuple[str, str]]) -> None:
        tombs = self._engine.events.tombstones(uid)
        fresh: dict[str, tuple[dict[str, Any], int]] = {}
        for i, item in enumerate(unit["items"]):
            if _covered(tombs, item["text"], None, item["ts_ms"]):
                self.counts["messages_tombstoned"] += 1
                continue
            fresh.setdefault(content_hash(item["text"]), (item, i))
        known = set()
        if fresh:
            where = Where(content_hashes=tuple(fresh), statuses=(MemoryStatus.ACTIVE.value,))
            known = {r.content_hash for r in self._engine.store.query(uid, where)}
        rows, events = [], []
        model = self._engine.embedder.model
        for h, (item, i) in fresh.items():
            if h in known:
                self.counts["op_noop"] += 1
                continue
            at, text = _at(int(item["ts_ms"])), str(item["text"])
            record = MemoryRecord(
                id=str(item["id"]), user_id=uid, session_id=str(item["session_id"]) or None,
                type=MemoryType.MESSAGE, content=text, source=MemorySource.IMPORTED,
                source_turn_ids=(f"{item['session_id']}:{item['turn_id']}",),
                source_excerpt=text[:200], created_at=at, updated_at=at,
                last_confirmed_at=at, embedding_model=model, content_hash=h)
            rows.append(StoredMemory(record, vectors[i]))
            events.append(MemoryEvent(op="ADD", memory_id=record.id, user_id=uid,
                                      memory=record, at=at, reason="backfill"))
        self.counts["op_add"] += len(rows)
        ops = [StoreOp("replace", uid, rows=tuple(rows))] if rows else []
        self._engine.applier.write(uid, events, ops, marks=marks, apply=False)
        self._queued += len(rows)

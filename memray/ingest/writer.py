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
    MemoryType,
    content_hash,
    utcnow,
)
from memray.store.base import StoredMemory
from memray.store.events import Tombstone

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
        self._buffer: list[tuple[str, dict[str, tuple[dict[str, Any], Matrix]],
                                 list[tuple[str, str]]]] = []
        self.counts: Counter[str] = Counter()

    def write(self, unit: Unit, vectors: Matrix) -> None:
        uid = unit["user_id"]
        marks = [(JOB, mark_key(uid, k)) for k in unit["sessions"]]
        if "items" in unit:
            self._write_messages(uid, unit, vectors, marks)
        else:
            with self._engine.user_lock(uid):
                self._write_facts(uid, unit, vectors, marks)
        self.counts["users"] += 1
        self.counts["sessions"] += len(unit["sessions"])
        self.counts["turns"] += unit["turns"]
        if self._queued >= self._drain_rows:
            self.flush()

    def flush(self) -> None:
        """Write what is buffered, then apply every queued store op."""
        self._flush_messages()
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
            scope = Scope(uid, r["session_id"] or None, None, {}, 2, _at(r["ts_ms"]))
            forgets = [forget_from_json(g) for g in r["forgets"]]
            self._resolver.plan(scope, Extraction(kept, forgets), _at(r["ts_ms"]), into=plan)
        for e in plan.events:
            self.counts[f"op_{e.op.lower()}"] += 1
        # Applied at once: the next unit of this user (a later run) plans against it.
        self._engine.applier.write(uid, plan.logged_events(), plan.store_ops(uid),
                                   purge_ids=list(plan.deleted), tombstones=plan.tombstones,
                                   marks=marks)
        self._lookup.table = {}

    # -- infer=False: each user message becomes one memory ----------------------------
    # Buffered across users: one query finds exact repeats for the whole buffer, one bulk
    # write stores it, then each user's events and checkpoint marks are committed. The
    # rows go to the store before the commit (not through the outbox): their ids are
    # fixed by the log, so a crash in between only means the next run writes them again.
    def _write_messages(self, uid: str, unit: Unit, vectors: Matrix,
                        marks: list[tuple[str, str]]) -> None:
        tombs = self._engine.events.tombstones(uid)
        fresh: dict[str, tuple[dict[str, Any], Matrix]] = {}
        for i, item in enumerate(unit["items"]):
            if _covered(tombs, item["text"], None, item["ts_ms"]):
                self.counts["messages_tombstoned"] += 1
                continue
            fresh.setdefault(content_hash(item["text"]), (item, vectors[i]))
        self._buffer.append((uid, fresh, marks))
        self._queued += len(fresh)

    def _flush_messages(self) -> None:
        buffer, self._buffer = self._buffer, []
        if not buffer:
            return
        wanted = {uid: set(fresh) for uid, fresh, _ in buffer if fresh}
        known = self._engine.store.known_hashes(wanted) if wanted else set()
        model = self._engine.embedder.model
        plans = []
        for uid, fresh, marks in buffer:
            rows, events = [], []
            for h, (item, vector) in fresh.items():
                if (uid, h) in known:
                    self.counts["op_noop"] += 1
                    continue
                record = self._message(uid, item, h, model)
                rows.append(StoredMemory(record, vector))
                events.append(MemoryEvent(op="ADD", memory_id=record.id, user_id=uid,
                                          memory=record, at=record.created_at,
                                          reason="backfill"))
            plans.append((uid, rows, events, marks))
        all_rows = [r for _, rows, _, _ in plans for r in rows]
        for i in range(0, len(all_rows), self._drain_rows):
            self._engine.store.replace(all_rows[i:i + self._drain_rows])
        for uid, rows, events, marks in plans:
            with self._engine.user_lock(uid):
                self._engine.events.commit(uid, events, [], marks=marks)
            self._engine.applier.notify(uid)
            self.counts["op_add"] += len(rows)

    @staticmethod
    def _message(uid: str, item: dict[str, Any], h: str, model: str) -> MemoryRecord:
        at, text = _at(int(item["ts_ms"])), str(item["text"])
        return MemoryRecord(
            id=str(item["id"]), user_id=uid, session_id=str(item["session_id"]) or None,
            type=MemoryType.MESSAGE, content=text, source=MemorySource.IMPORTED,
            source_turn_ids=(f"{item['session_id']}:{item['turn_id']}",),
            source_excerpt=text[:200], created_at=at, updated_at=at, last_confirmed_at=at,
            embedding_model=model, content_hash=h, occurred_at=at,
            reply_to=str(item.get("reply_to", "")))

"""The single writer of a backfill: units in (with their vectors), change sets out.

Each user's unit becomes one change set (the planned events and store ops, and the
checkpoint marks of the sessions it covers) that the committer commits under the user's
lock, where the user's tombstones are read: a `delete_all` or a forget that lands while a
unit waits in the buffer is honoured. So after a kill -9 a unit is either wholly
committed (its ops replay from the outbox on the next open, and its sessions are
skipped) or not at all (it is imported again).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from memray.core.changes import ChangeSet
from memray.core.engine import Engine
from memray.core.records import new_record
from memray.core.resolve import Resolver, Scope
from memray.embed.base import Embedder, Matrix
from memray.extract.base import Extraction
from memray.ingest.units import Unit, fact_from_json, forget_from_json, mark_key
from memray.models import MemoryRecord, MemorySource, MemoryType, content_hash, utcnow
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
            self._buffer_messages(uid, unit, vectors, marks)
        else:
            self._write_facts(uid, unit, vectors, marks)
        self.counts["users"] += 1
        self.counts["sessions"] += len(unit["sessions"])
        self.counts["turns"] += unit["turns"]
        if self._queued >= self._drain_rows:
            self.flush()

    def flush(self) -> None:
        """Commit what is buffered, then apply every queued store op."""
        users = self._flush_messages()
        committer = self._engine.committer
        committer.drain_users(users)
        committer.drain()
        self._queued = 0

    # -- infer=True: resolve each round in order, one commit per user ----------------
    def _write_facts(self, uid: str, unit: Unit, vectors: Matrix,
                     marks: list[tuple[str, str]]) -> None:
        self._lookup.table = dict(zip((f["content"] for r in unit["rounds"]
                                       for f in r["facts"]), vectors, strict=True))
        committer = self._engine.committer
        with committer.locked(uid):
            changes = self._plan_facts(uid, unit, self._engine.events.tombstones(uid))
            changes.marks = marks
            # Applied at once: the next unit of this user (a later run) plans against it.
            committer.commit(changes)
        self._lookup.table = {}

    def _plan_facts(self, uid: str, unit: Unit, tombs: list[Tombstone]) -> ChangeSet:
        changes = ChangeSet(uid)
        for r in unit["rounds"]:
            facts = [fact_from_json(f) for f in r["facts"]]
            kept = [f for f in facts if not _covered(tombs, f.content, f.slot, r["ts_ms"])]
            self.counts["facts_tombstoned"] += len(facts) - len(kept)
            scope = Scope(uid, r["session_id"] or None, None, {}, 2, _at(r["ts_ms"]))
            forgets = [forget_from_json(g) for g in r["forgets"]]
            self._resolver.plan(scope, Extraction(kept, forgets), _at(r["ts_ms"]),
                                into=changes)
        for e in changes.events:
            self.counts[f"op_{e.op.lower()}"] += 1
        return changes

    # -- infer=False: each user message becomes one memory ----------------------------
    # Buffered across users: one query finds exact repeats for the whole buffer, then each
    # user's change set is committed under its lock (tombstones read there) without being
    # applied, and the committer applies many users' rows in a few bulk store calls.
    def _buffer_messages(self, uid: str, unit: Unit, vectors: Matrix,
                         marks: list[tuple[str, str]]) -> None:
        fresh: dict[str, tuple[dict[str, Any], Matrix]] = {}
        for i, item in enumerate(unit["items"]):
            fresh.setdefault(content_hash(item["text"]), (item, vectors[i]))
        self._buffer.append((uid, fresh, marks))
        self._queued += len(fresh)

    def _flush_messages(self) -> list[str]:
        """Commit the buffered units; returns the users committed."""
        buffer, self._buffer = self._buffer, []
        wanted = {uid: set(fresh) for uid, fresh, _ in buffer if fresh}
        known = self._engine.store.known_hashes(wanted) if wanted else set()
        committer = self._engine.committer
        for uid, fresh, marks in buffer:
            with committer.locked(uid):
                changes = self._plan_messages(uid, fresh, known,
                                              self._engine.events.tombstones(uid))
                changes.marks = marks
                committer.commit(changes, apply=False)
        return [uid for uid, _, _ in buffer]

    def _plan_messages(self, uid: str, fresh: dict[str, tuple[dict[str, Any], Matrix]],
                       known: set[tuple[str, str]], tombs: list[Tombstone]) -> ChangeSet:
        changes = ChangeSet(uid)
        model = self._engine.embedder.model
        for h, (item, vector) in fresh.items():
            if _covered(tombs, item["text"], None, item["ts_ms"]):
                self.counts["messages_tombstoned"] += 1
            elif (uid, h) in known:
                self.counts["op_noop"] += 1
            else:
                record = self._message(uid, item, model)
                changes.put(record, vector, None, record.created_at, "backfill")
                self.counts["op_add"] += 1
        return changes

    @staticmethod
    def _message(uid: str, item: dict[str, Any], model: str) -> MemoryRecord:
        at, text = _at(int(item["ts_ms"])), str(item["text"])
        return new_record(
            id=str(item["id"]), user_id=uid, content=text, embedding_model=model, at=at,
            type=MemoryType.MESSAGE, session_id=str(item["session_id"]) or None,
            source=MemorySource.IMPORTED,
            source_turn_ids=(f"{item['session_id']}:{item['turn_id']}",),
            occurred_at=at, reply_to=str(item.get("reply_to", "")))

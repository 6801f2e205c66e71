"""The vector store and the event log seen through a `UserCipher`: what goes in is
sealed (memory content, excerpt, reply context and metadata; history; logged turns; the
stored profile), what comes out is opened, and what cannot be opened (its user's key was
shredded) is left out, as if it were not there. Everything else passes through, so
vectors are searched and filtered by the store exactly as without encryption; keyword
recall runs on opened text in the hot set."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from memray.crypto.cipher import UserCipher
from memray.models import MemoryEvent, MemoryRecord
from memray.store.base import StoredMemory, Vector, VectorStore, Where
from memray.store.events import PROFILE_META, EventLog, Pending, StoreOp, Tombstone

SEALED = "mr_sealed"  # the one metadata key of a sealed record: the rest, sealed as JSON


def seal_record(cipher: UserCipher, record: MemoryRecord) -> MemoryRecord:
    uid = record.user_id
    return record.model_copy(update={
        "content": cipher.seal(uid, record.content),
        "source_excerpt": cipher.seal(uid, record.source_excerpt),
        "reply_to": cipher.seal(uid, record.reply_to),
        "metadata": {SEALED: cipher.seal(uid, json.dumps(record.metadata))}
        if record.metadata else {}})


def open_record(cipher: UserCipher, record: MemoryRecord) -> MemoryRecord | None:
    uid = record.user_id
    content = cipher.open(uid, record.content)
    excerpt = cipher.open(uid, record.source_excerpt)
    reply = cipher.open(uid, record.reply_to)
    sealed = record.metadata.get(SEALED)
    meta = record.metadata if not isinstance(sealed, str) else cipher.open(uid, sealed)
    if content is None or excerpt is None or reply is None or meta is None:
        return None
    return record.model_copy(update={
        "content": content, "source_excerpt": excerpt, "reply_to": reply,
        "metadata": json.loads(meta) if isinstance(meta, str) else meta})


class SealedStore:
    """A `VectorStore` whose rows hold sealed text."""

    def __init__(self, inner: VectorStore, cipher: UserCipher) -> None:
        self.inner, self._cipher = inner, cipher

    def __getattr__(self, name: str) -> Any:  # dim, model, collection, uri, alias ...
        return getattr(self.inner, name)

    def _seal(self, rows: Sequence[StoredMemory]) -> list[StoredMemory]:
        return [StoredMemory(seal_record(self._cipher, r.record), r.vector) for r in rows]

    def _open(self, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        opened = (open_record(self._cipher, r) for r in records)
        return [r for r in opened if r is not None]

    def insert(self, rows: Sequence[StoredMemory]) -> None:
        self.inner.insert(self._seal(rows))

    def replace(self, rows: Sequence[StoredMemory]) -> None:
        self.inner.replace(self._seal(rows))

    def query(self, user_id: str, where: Where, limit: int | None = None) -> list[MemoryRecord]:
        return self._open(self.inner.query(user_id, where, limit))

    def search(self, user_id: str, vector: Vector, limit: int,
               where: Where) -> list[tuple[MemoryRecord, float]]:
        hits = ((open_record(self._cipher, r), s)
                for r, s in self.inner.search(user_id, vector, limit, where))
        return [(r, s) for r, s in hits if r is not None]

    def rows(self, user_id: str, where: Where) -> list[StoredMemory]:
        opened = ((open_record(self._cipher, r.record), r.vector)
                  for r in self.inner.rows(user_id, where))
        return [StoredMemory(r, v) for r, v in opened if r is not None]


class SealedLog:
    """An `EventLog` whose history, outbox rows, logged turns and stored profiles hold
    sealed text; receipts, tombstones (hashes) and versions are not content."""

    def __init__(self, inner: EventLog, cipher: UserCipher) -> None:
        self.inner, self._cipher = inner, cipher

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    # -- history and the outbox ------------------------------------------------------------
    def commit(self, user_id: str, events: Sequence[MemoryEvent], ops: Sequence[StoreOp],
               *, purge_ids: Sequence[str] = (), purge_user: bool = False,
               clear_turns: Sequence[int] = (), tombstones: Sequence[Tombstone] = (),
               marks: Sequence[tuple[str, str]] = ()) -> list[int]:
        return self.inner.commit(
            user_id, [self._seal_event(e) for e in events], [self._seal_op(o) for o in ops],
            purge_ids=purge_ids, purge_user=purge_user, clear_turns=clear_turns,
            tombstones=tombstones, marks=marks)

    def pending(self, user_id: str | None = None) -> list[Pending]:
        return [Pending(p.seq, self._open_op(p.op)) for p in self.inner.pending(user_id)]

    def history(self, user_id: str, memory_id: str) -> list[MemoryEvent]:
        return self._events(self.inner.history(user_id, memory_id))

    def user_events(self, user_id: str) -> Iterator[MemoryEvent]:
        yield from self._events(self.inner.user_events(user_id))

    def _seal_event(self, event: MemoryEvent) -> MemoryEvent:
        c = self._cipher
        return event.model_copy(update={
            "memory": seal_record(c, event.memory) if event.memory else None,
            "previous": seal_record(c, event.previous) if event.previous else None})

    def _events(self, events: Iterator[MemoryEvent] | list[MemoryEvent]) -> list[MemoryEvent]:
        out = []
        for e in events:
            memory = open_record(self._cipher, e.memory) if e.memory else None
            previous = open_record(self._cipher, e.previous) if e.previous else None
            if (e.memory is None or memory is not None) and \
                    (e.previous is None or previous is not None):
                out.append(e.model_copy(update={"memory": memory, "previous": previous}))
        return out

    def _seal_op(self, op: StoreOp) -> StoreOp:
        rows = tuple(StoredMemory(seal_record(self._cipher, r.record), r.vector)
                     for r in op.rows)
        return StoreOp(op.kind, op.user_id, rows, op.ids)

    def _open_op(self, op: StoreOp) -> StoreOp:
        opened = ((open_record(self._cipher, r.record), r.vector) for r in op.rows)
        return StoreOp(op.kind, op.user_id, tuple(StoredMemory(r, v) for r, v in opened
                                                  if r is not None), op.ids)

    # -- turns -----------------------------------------------------------------------------
    def log_turns(self, user_id: str, session: str,
                  turns: Sequence[tuple[str, str, str]]) -> None:
        self.inner.log_turns(user_id, session, [(t, role, self._cipher.seal(user_id, text))
                                                for t, role, text in turns])

    def pending_turns(self, user_id: str, session: str) -> list[tuple[int, str, str, str]]:
        out = []
        for seq, tid, role, text in self.inner.pending_turns(user_id, session):
            plain = self._cipher.open(user_id, text)
            if plain is not None:
                out.append((seq, tid, role, plain))
        return out

    def user_turns(self, user_id: str) -> list[tuple[int, str, str]]:
        out = []
        for seq, tid, text in self.inner.user_turns(user_id):
            plain = self._cipher.open(user_id, text)
            if plain is not None:
                out.append((seq, tid, plain))
        return out

    # -- the stored profile ----------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        value = self.inner.get_meta(key)
        if value is None or not key.startswith(PROFILE_META):
            return value
        return self._cipher.open(key[len(PROFILE_META):], value)

    def set_meta(self, key: str, value: str) -> None:
        if key.startswith(PROFILE_META):
            value = self._cipher.seal(key[len(PROFILE_META):], value)
        self.inner.set_meta(key, value)

"""Deletions that reach every copy, and the receipt that proves it.

The committer hands every change set that deletes (a delete, a forget, `delete_all`)
to `Deletions` under the user's lock, before and after its commit:

- `expand`, the cascade: what was derived from a deleted memory goes with it. A merge
  keeps its members (status `merged`, metadata `merged_into`); deleting one rebuilds the
  summary from the members that remain (a new id, re-embedded) or deletes it when none
  remain; deleting a summary deletes its members. A logged turn not yet extracted that
  produced or states a deleted memory is dropped, so the next extraction cannot bring it
  back.
- `measure` before the commit and again after it (the store applied, the hot set patched,
  the stored profile rebuilt): per store, how many items hold the deleted memories. The
  receipt (ids and counts, never content) is sealed with a digest and kept in the audit
  log; `verified` only when every re-read found nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from memray.core.changes import ChangeSet
from memray.core.hotset import HotSet
from memray.core.ids import new_id
from memray.core.lookup import committed_rows
from memray.core.summary import MERGED_FROM, MERGED_INTO, SUMMARY_CHARS, rule_summary
from memray.embed.base import Embedder
from memray.errors import StoreError
from memray.models import (
    DeletionCheck,
    DeletionReceipt,
    DerivedChange,
    MemoryRecord,
    StoreCheck,
    content_hash,
    receipt_digest,
    utcnow,
)
from memray.store.base import VectorStore, Where
from memray.store.events import PROFILE_META, EventLog
from memray.store.rows import to_ms

STORES = ("vector_store", "change_log", "history", "turn_log", "hot_set", "profile")
Counts = dict[str, int]


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


class Deletions:
    """Cascade and receipts for one open backend (its store, log, hot set and model).
    `refresh_profile` rebuilds a user's stored profile from what is left."""

    def __init__(self, store: VectorStore, events: EventLog, embedder: Embedder,
                 hot: HotSet | None, refresh_profile: Callable[[str], None], *,
                 shred: Callable[[str], bool] | None = None,
                 summary_chars: int = SUMMARY_CHARS) -> None:
        self._store, self._events, self._embedder, self._hot = store, events, embedder, hot
        self._refresh_profile, self._chars, self._shred = refresh_profile, summary_chars, shred

    # -- cascade ----------------------------------------------------------------------------
    def expand(self, changes: ChangeSet) -> None:
        """Add to `changes` what the deletions in it reach: members of a deleted summary,
        summaries of deleted members (rebuilt or deleted), and logged turns."""
        if changes.delete_user or not changes.deletes:
            return
        uid, now = changes.user_id, utcnow()
        for record in list(changes.deletes.values()):
            for member in self._committed(uid, record.metadata.get(MERGED_FROM) or []):
                if member.id not in changes.deletes:
                    changes.delete(member, now, "its summary was deleted")
        summaries = {str(r.metadata[MERGED_INTO]) for r in changes.deletes.values()
                     if r.metadata.get(MERGED_INTO)}
        for summary in self._committed(uid, summaries):
            if summary.id not in changes.deletes:
                self._rebuild(changes, summary)
        changes.clear_turns = sorted(set(changes.clear_turns) | set(self._turns(changes)))

    def _committed(self, uid: str, ids: Collection[str]) -> list[MemoryRecord]:
        """The records the user's committed writes hold, queued ones too (a merge written
        while the store was down is still a merge to cascade to)."""
        return [row.record for row in committed_rows(self._store, self._events, uid, ids)]

    def _by_ids(self, uid: str, ids: Collection[str]) -> list[MemoryRecord]:
        # An empty `Where.ids` means any id: never ask the store for "no ids".
        return self._store.query(uid, Where(ids=tuple(sorted(ids)))) if ids else []

    def _rebuild(self, changes: ChangeSet, summary: MemoryRecord) -> None:
        uid, now = changes.user_id, utcnow()
        ids = tuple(summary.metadata.get(MERGED_FROM) or [])
        left = sorted((row for row in committed_rows(self._store, self._events, uid, ids)
                       if row.record.id not in changes.deletes),
                      key=lambda row: (row.record.created_at, row.record.id))
        changes.delete(summary, now, "a memory it merged was deleted")
        if not left:
            changes.derived.append(DerivedChange(memory_id=summary.id, action="deleted"))
            return
        content = rule_summary([row.record.content for row in left], self._chars)
        new = summary.model_copy(update={
            "id": new_id(), "content": content, "content_hash": content_hash(content),
            "source_excerpt": content[:200], "updated_at": now,
            "source_turn_ids": tuple(dict.fromkeys(t for row in left
                                                   for t in row.record.source_turn_ids)),
            "metadata": {**summary.metadata, MERGED_FROM: [row.record.id for row in left]}})
        changes.put(new, self._embedder.embed([new.index_text])[0], None, now,
                    f"rebuilt from {len(left)} memories after a deletion")
        for row in left:
            member = row.record.model_copy(
                update={"metadata": {**row.record.metadata, MERGED_INTO: new.id}})
            changes.restore(member, row.vector)
        changes.derived.append(DerivedChange(memory_id=summary.id, action="rebuilt",
                                             rebuilt_as=new.id))

    def _turns(self, changes: ChangeSet) -> list[int]:
        """Seqs of the user's unextracted turns that produced or state a deleted memory."""
        deleted = list(changes.deletes.values())
        sources = {t for r in deleted for t in r.source_turn_ids}
        texts = [_norm(r.content) for r in deleted if r.content.strip()]
        return [seq for seq, turn_id, content in self._events.user_turns(changes.user_id)
                if turn_id in sources or any(t in _norm(content) for t in texts)]

    # -- receipts ---------------------------------------------------------------------------
    def before(self, changes: ChangeSet) -> tuple[Counts, list[str]]:
        """Before the commit: the counts, and the ids of the memories it deletes."""
        ids = (self._store.list_ids(changes.user_id, Where()) if changes.delete_user
               else sorted(changes.deletes))
        return self.measure(changes), ids

    def measure(self, changes: ChangeSet) -> Counts:
        """Per store, the items that hold what `changes` deletes (all of the user's for
        `delete_user`)."""
        uid = changes.user_id
        ids: Collection[str] | None = None if changes.delete_user else set(changes.deletes)
        return {
            "vector_store": (self._store.count(uid) if ids is None else
                             len(self._by_ids(uid, ids))),
            "change_log": self._queued(uid, ids),
            "history": (sum(1 for _ in self._events.user_events(uid)) if ids is None else
                        sum(len(self._events.history(uid, i)) for i in ids)),
            "turn_log": len(self._events.user_turns(uid) if ids is None
                            else self._turns(changes)),
            "hot_set": self._hot.holding(uid, ids) if self._hot is not None else 0,
            "profile": self._profiled(uid, ids),
        }

    def _queued(self, uid: str, ids: Collection[str] | None) -> int:
        return sum(1 for p in self._events.pending(uid) if p.op.kind == "replace"
                   for row in p.op.rows if ids is None or row.record.id in ids)

    def _profiled(self, uid: str, ids: Collection[str] | None) -> int:
        raw = self._events.get_meta(PROFILE_META + uid)
        if not raw:
            return 0
        from memray.core.profile import Profile  # profile imports the engine: not at load

        try:
            entries = Profile.model_validate_json(raw).entries()
        except ValueError:
            return 1  # unreadable: it counts as holding something until rebuilt
        return sum(1 for e in entries if ids is None or e.memory_id in ids)

    def recheck(self, receipt: DeletionReceipt) -> DeletionCheck:
        """The receipt against the stores now: nothing may hold any id it names (the
        memories and the summaries it deleted or replaced)."""
        uid = receipt.user_id
        ids = set(receipt.memory_ids) | {d.memory_id for d in receipt.derived}
        remaining = {
            "vector_store": len(self._by_ids(uid, ids)),
            "change_log": self._queued(uid, ids),
            "history": sum(len(self._events.history(uid, i)) for i in ids),
            "hot_set": self._hot.holding(uid, ids) if self._hot is not None else 0,
            "profile": self._profiled(uid, ids),
        }
        digest_ok = receipt_digest(receipt) == receipt.digest
        return DeletionCheck(receipt_id=receipt.id, kind=receipt.kind, at=receipt.at,
                             digest_ok=digest_ok, remaining=remaining,
                             ok=digest_ok and not any(remaining.values()))

    def settle(self, changes: ChangeSet, seen: tuple[Counts, list[str]]) -> DeletionReceipt:
        """After the commit: rebuild the stored profile if it held a deleted memory,
        re-read every store, keep the sealed receipt in the audit log."""
        uid, (before, ids) = changes.user_id, seen
        derived = {d.memory_id for d in changes.derived}
        if before["profile"]:
            self._refresh_profile(uid)
        try:
            after, error = self.measure(changes), None
        except StoreError as exc:  # committed and queued: the outbox applies it later
            after, error = before, f"could not re-read: {exc}"
        stores = {name: StoreCheck(removed=before[name], remaining=after[name])
                  for name in STORES}
        # Last: any copy the re-reads could not see (a replica, a backup, a row a bug
        # missed) was sealed under this key.
        shredded = bool(changes.delete_user and self._shred is not None and self._shred(uid))
        receipt = DeletionReceipt(
            id=new_id(), user_id=uid, kind="delete_all" if changes.delete_user else changes.kind,
            at=utcnow(), memory_ids=[i for i in ids if i not in derived],
            derived=list(changes.derived), stores=stores,
            verified=error is None and all(c.remaining == 0 for c in stores.values()),
            error=error, shredded=shredded).sealed()
        self._events.record_receipt(uid, receipt.id, to_ms(receipt.at),
                                    receipt.model_dump_json())
        return receipt


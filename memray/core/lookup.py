"""One memory by id as the user's last commit left it.

A write is acknowledged once the log has it; the store applies it right after, or, when
the store was down or timed out, at the next drain. A lookup that asks the store alone
would then answer "no such memory" for a memory the user was just told exists (and a
delete of it would fail), or show one the user has just deleted. So the log's queued ops
are laid over the store's row. The queue is read first: an op applied between the two
reads is then in the store when the store is read.
"""

from __future__ import annotations

from collections.abc import Collection

from memray.models import MemoryRecord
from memray.store.base import StoredMemory, VectorStore, Where
from memray.store.events import ChangeLog, overlaid, overlaid_rows
from memray.store.filters import matches


def committed(store: VectorStore, log: ChangeLog, user_id: str,
              memory_id: str) -> MemoryRecord | None:
    """The memory (any status) if the user's committed writes hold it, else None."""
    return next(iter(committed_query(store, log, user_id, Where(ids=(memory_id,)))), None)


def committed_rows(store: VectorStore, log: ChangeLog, user_id: str,
                   ids: Collection[str]) -> list[StoredMemory]:
    """The rows (records and vectors) of `ids` (any status) that the user's committed
    writes hold: what a deletion's cascade must see, the store down or not."""
    if not ids:  # an empty `Where.ids` means any id: never ask the store for "no ids"
        return []
    queued = [p.op for p in log.pending(user_id)]
    rows = store.rows(user_id, Where(ids=tuple(sorted(ids))))
    return [row for row in overlaid_rows(rows, queued) if row.record.id in ids]


def committed_query(store: VectorStore, log: ChangeLog, user_id: str,
                    where: Where) -> list[MemoryRecord]:
    """`store.query(user_id, where)` as the user's committed writes hold it: a writer's
    check for what is already there (a verbatim repeat, a LangGraph key) sees an add or a
    delete that the store has not applied yet."""
    queued = [p.op for p in log.pending(user_id)]
    found = store.query(user_id, where)
    if not queued:
        return found
    return [r for r in overlaid(found, queued) if matches(r, user_id, where)]

"""Memory Doctor: checks that the vector store agrees with the event log, per user, and
repairs what is safe to repair through the normal write path (the committer: one commit of
the event log, then the outbox applies it).

The event log is the truth. A user's memories according to the log are what their
history folds to (ADD / UPDATE set a memory, DELETE drops it; a deleted memory's history
is purged, so it is simply absent). Against that, the store may hold:

- missing vectors: a memory the log holds, with no row in the store;
- orphan vectors: a row for which the log holds no memory (a deleted memory back, or a
  write that bypassed the log);
- stale rows: a row whose content, status or expiry differs from the log's record;
- bad vectors (not of the store's dimension, or with NaN / inf values) and wrong-model
  rows (a memory embedded by another model than the collection's: invariant 4);
- expired-but-active rows (`expires_at` passed, still active or candidate) and
  candidates unconfirmed past their term (what the nightly job retires);
- an outbox backlog: committed store ops not applied yet (store down, a process died).
  The outbox keeps no time, so its age is read from the oldest `updated_at` the
  queued rows carry (None when only deletions wait).

`repair` first replays the user's outbox; then, in one commit: missing and stale rows
are written again from the log's record, wrong-model rows and bad vectors are
re-embedded with the live model (an UPDATE event says so), expired rows and overdue
candidates become `expired` (UPDATE events, as the nightly job writes them), and orphan
rows are deleted. Orphans are kept when the log holds no history at all for the user
(`log_missing`): an empty log beside a full store is more likely a lost or new log than
a store full of ghosts, and deleting would lose data; that needs a person.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, computed_field

from memray.core.changes import ChangeSet
from memray.core.engine import Engine
from memray.models import MemoryRecord, MemoryStatus, utcnow
from memray.store.base import StoredMemory, Vector, Where
from memray.store.events import Pending
from memray.store.rows import to_ms

log = logging.getLogger(__name__)
_LIVE = (MemoryStatus.ACTIVE, MemoryStatus.CANDIDATE)
_SHOWN_IDS = 50


class Finding(BaseModel):
    """How many memories have one problem, and the first `ids` of them (at most 50)."""

    model_config = ConfigDict(frozen=True)

    count: int = 0
    ids: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, ids: Iterable[str]) -> Finding:
        found = sorted(ids)
        return cls(count=len(found), ids=found[:_SHOWN_IDS])


class Outbox(BaseModel):
    """Store ops committed to the log but not applied to the store yet."""

    model_config = ConfigDict(frozen=True)

    ops: int = 0
    rows: int = Field(0, description="Rows the queued replace ops carry.")
    oldest_age_s: float | None = Field(None, description="Seconds since the oldest "
                                       "`updated_at` among queued rows; None: unknown "
                                       "(no queued rows, or only deletions).")


class UserReport(BaseModel):
    """One user's check; `problems` is 0 when the store and the log agree."""

    model_config = ConfigDict(frozen=True)

    user_id: str
    version: int = Field(description="The user's memory version when checked.")
    log_memories: int = Field(description="Memories the event log holds (any status).")
    store_rows: int = Field(description="Rows in the vector store (any status).")
    missing_vectors: Finding = Finding()
    orphan_vectors: Finding = Finding()
    stale_rows: Finding = Finding()
    bad_vectors: Finding = Finding()
    wrong_model: Finding = Finding()
    expired_active: Finding = Finding()
    overdue_candidates: Finding = Finding()
    outbox: Outbox = Outbox()
    log_missing: bool = Field(False, description="The store holds rows but the log holds "
                              "no history for this user: orphans are reported, never "
                              "deleted by repair.")
    repaired: dict[str, int] = Field(default_factory=dict, description="What `repair` "
                                     "changed, by problem; empty when not repairing.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def problems(self) -> int:
        """Problems found: each finding's count, queued ops, and a missing log."""
        return (sum(f.count for f in self._findings()) + self.outbox.ops
                + int(self.log_missing))

    def _findings(self) -> list[Finding]:
        return [self.missing_vectors, self.orphan_vectors, self.stale_rows,
                self.bad_vectors, self.wrong_model, self.expired_active,
                self.overdue_candidates]


class DoctorReport(BaseModel):
    """Every checked user; after a repair, each user is checked again (`after`)."""

    model_config = ConfigDict(frozen=True)

    checked_at: datetime
    store_model: str
    store_dim: int
    repair: bool
    users: list[UserReport]
    after: list[UserReport] | None = Field(None, description="With repair: each repaired "
                                           "user checked again.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def problems(self) -> int:
        """Problems left: after the repair when there was one."""
        return sum(u.problems for u in (self.after if self.after is not None else self.users))


class Doctor:
    """Checks (and repairs) users of one open engine. `candidate_days`: a candidate not
    confirmed for this many days is overdue (the nightly job's default)."""

    def __init__(self, engine: Engine, *, candidate_days: int = 30) -> None:
        self._engine = engine
        self._candidate_days = candidate_days

    def users(self) -> list[str]:
        """Every user the store or the log knows, sorted."""
        e = self._engine
        return sorted(set(e.store.user_ids()) | set(e.events.versions())
                      | set(e.events.pending_users()))

    def run(self, user_ids: Sequence[str] | None = None, *, repair: bool = False) -> DoctorReport:
        """Check the given users (None: every user); with `repair`, repair each user
        with problems and check it again."""
        uids = list(user_ids) if user_ids is not None else self.users()
        reports = [self.check(u) for u in uids]
        after = None
        if repair:
            after = [self.repair(r.user_id) if r.problems else r for r in reports]
        store = self._engine.store
        return DoctorReport(checked_at=utcnow(), store_model=store.model, store_dim=store.dim,
                            repair=repair, users=reports, after=after)

    def check(self, user_id: str) -> UserReport:
        """One user's problems; changes nothing."""
        with self._engine.committer.locked(user_id):
            return self._diagnose(user_id, utcnow()).report()

    def _diagnose(self, uid: str, now: datetime) -> _Diagnosis:
        e = self._engine
        version = e.events.version(uid)
        pending = e.events.pending(uid)
        logged, seen = self._logged(uid)
        rows = {r.record.id: r for r in e.store.rows(uid, Where())}
        busy = _touched(pending, set(logged) | set(rows))  # the outbox will settle these
        d = _Diagnosis(uid, version, logged, rows, _outbox(pending, now),
                       log_missing=bool(rows) and not seen)
        d.found["missing_vectors"] = {i for i in logged if i not in rows and i not in busy}
        d.found["orphan_vectors"] = {i for i in rows if i not in logged and i not in busy}
        d.found["stale_rows"] = {i for i in rows if i in logged and i not in busy
                                 and _differs(rows[i].record, logged[i])}
        d.found["bad_vectors"] = {i for i, r in rows.items()
                                      if not _ok(r.vector, e.store.dim)}
        d.found["wrong_model"] = {i for i, r in rows.items()
                                  if r.record.embedding_model != e.store.model}
        d.found["expired_active"] = {i for i, r in rows.items() if _expired(r.record, now)}
        d.found["overdue_candidates"] = {i for i, r in rows.items()
                                         if self._overdue(r.record, now)}
        return d

    def _logged(self, uid: str) -> tuple[dict[str, MemoryRecord], bool]:
        """(the memories the user's history folds to, whether it has any event)."""
        state: dict[str, MemoryRecord] = {}
        seen = False
        for event in self._engine.events.user_events(uid):
            seen = True
            if event.op in ("ADD", "UPDATE") and event.memory is not None:
                state[event.memory_id] = event.memory
            elif event.op == "DELETE":
                state.pop(event.memory_id, None)
        return state, seen

    def _overdue(self, record: MemoryRecord, now: datetime) -> bool:
        return (record.status == MemoryStatus.CANDIDATE and not _expired(record, now)
                and record.last_confirmed_at < now - timedelta(days=self._candidate_days))

    # -- repair --------------------------------------------------------------------------
    def repair(self, user_id: str) -> UserReport:
        """Repair one user (see the module docstring), then check it again; the report
        says what was changed in `repaired`."""
        e = self._engine
        with e.committer.locked(user_id):
            if e.events.has_pending(user_id) and not e.committer.drain_user(user_id):
                log.warning("doctor: the store refused the queued ops of a user; "
                            "nothing else repaired")
                return self._diagnose(user_id, utcnow()).report(
                    {"outbox_failed": len(e.events.pending(user_id))})
            now = utcnow()
            done = self._fix(self._diagnose(user_id, now), now)
            return self._diagnose(user_id, utcnow()).report(done)

    def _fix(self, d: _Diagnosis, now: datetime) -> dict[str, int]:
        model, found = self._engine.embedder.model, d.found
        fixes = _Fixes(now)
        for mid in sorted(found["missing_vectors"] | found["stale_rows"]):
            why = "missing_vectors" if mid in found["missing_vectors"] else "stale_rows"
            fixes.rewrite(d.logged[mid].model_copy(update={"embedding_model": model}), why)
        for mid in sorted(found["wrong_model"] | found["bad_vectors"]):
            if mid not in fixes.rows:
                why = "wrong_model" if mid in found["wrong_model"] else "bad_vectors"
                fixes.reembed(d.rows[mid].record, model, why)
        for why in ("expired_active", "overdue_candidates"):
            for mid in sorted(found[why]):
                record, vector = fixes.rows.get(mid, (d.rows[mid].record, d.rows[mid].vector))
                fixes.expire(record, vector, why)
        gone = [] if d.log_missing else [d.rows[i].record for i in sorted(found["orphan_vectors"])]
        self._write(d.user_id, fixes, gone)
        done = dict(fixes.counts)
        if gone:
            done["orphan_vectors"] = len(gone)
        return done

    def _write(self, uid: str, fixes: _Fixes, gone: list[MemoryRecord]) -> None:
        e = self._engine
        todo = [r for r, v in fixes.rows.values() if v is None or not _ok(v, e.store.dim)]
        vectors = {r.id: v for r, v in fixes.rows.values() if v is not None}
        if todo:
            fresh = e.embedder.embed([r.index_text for r in todo])
            vectors.update((r.id, v) for r, v in zip(todo, fresh, strict=True))
        changes = ChangeSet(uid)
        for record, _ in fixes.rows.values():
            if record.id in fixes.changed:
                previous, why = fixes.changed[record.id]
                changes.put(record, vectors[record.id], previous, fixes.now, why)
            else:
                changes.restore(record, vectors[record.id])
        for orphan in gone:  # rows the log never had: nothing to remember or to purge
            changes.delete(orphan, fixes.now, "doctor: orphan vector", tombstone=False)
        if not changes.empty:
            e.committer.commit(changes)


@dataclass
class _Diagnosis:
    """A user's state as checked: the log's memories, the store's rows, every problem
    with all its ids (the report shows the first 50)."""

    user_id: str
    version: int
    logged: dict[str, MemoryRecord]
    rows: dict[str, StoredMemory]
    outbox: Outbox
    log_missing: bool
    found: dict[str, set[str]] = field(default_factory=dict)

    def report(self, repaired: dict[str, int] | None = None) -> UserReport:
        return UserReport(user_id=self.user_id, version=self.version,
                          log_memories=len(self.logged), store_rows=len(self.rows),
                          outbox=self.outbox, log_missing=self.log_missing,
                          repaired=repaired or {},
                          **{k: Finding.of(v) for k, v in self.found.items()})


class _Fixes:
    """The rows a repair writes (record, and its vector or None to embed it), the UPDATE
    events of the records it changes, and counts by problem."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.rows: dict[str, tuple[MemoryRecord, Vector | None]] = {}
        self.changed: dict[str, tuple[MemoryRecord, str]] = {}  # id: (previous, reason)
        self.counts: dict[str, int] = {}

    def _count(self, why: str) -> None:
        self.counts[why] = self.counts.get(why, 0) + 1

    def rewrite(self, record: MemoryRecord, why: str) -> None:
        """Write the log's record again, re-embedded: no event (the log says so already)."""
        self.rows[record.id] = (record, None)
        self._count(why)

    def reembed(self, record: MemoryRecord, model: str, why: str) -> None:
        new = record.model_copy(update={"embedding_model": model,
                                        "updated_at": max(self.now, record.updated_at)})
        self.rows[record.id] = (new, None)
        self.changed.setdefault(record.id, (record, f"doctor: re-embedded with {model}"))
        self._count(why)

    def expire(self, record: MemoryRecord, vector: Vector | None, why: str) -> None:
        new = record.model_copy(update={"status": MemoryStatus.EXPIRED,
                                        "updated_at": max(self.now, record.updated_at)})
        self.rows[record.id] = (new, vector)
        previous = self.changed.get(record.id, (record, ""))[0]
        self.changed[record.id] = (previous, "expired" if why == "expired_active"
                                   else "retired")
        self._count(why)


def _ok(vector: Vector, dim: int) -> bool:
    """A vector of the store's size with finite values."""
    v = np.asarray(vector)
    return v.shape == (dim,) and bool(np.isfinite(v).all())


def _touched(pending: list[Pending], known: set[str]) -> set[str]:
    """Ids a queued op will still change (all of the user's on a queued delete_user)."""
    out: set[str] = set()
    for p in pending:
        if p.op.kind == "delete_user":
            return set(known)
        out.update(p.op.ids)
        out.update(r.record.id for r in p.op.rows)
    return out


def _outbox(pending: list[Pending], now: datetime) -> Outbox:
    times = [r.record.updated_at for p in pending for r in p.op.rows]
    age = round((now - min(times)).total_seconds(), 3) if times else None
    return Outbox(ops=len(pending), rows=sum(len(p.op.rows) for p in pending),
                  oldest_age_s=age)


def _expired(record: MemoryRecord, now: datetime) -> bool:
    return (record.status in _LIVE and record.expires_at is not None
            and record.expires_at <= now)


def _differs(row: MemoryRecord, logged: MemoryRecord) -> bool:
    """The row says something else than the log (the model is left out: a migration
    re-embeds rows without an event)."""
    return (row.content_hash != logged.content_hash or row.status != logged.status
            or to_ms(row.expires_at) != to_ms(logged.expires_at)
            or row.slot != logged.slot or row.type != logged.type)


_LABELS = {"missing_vectors": "memories without a vector",
           "orphan_vectors": "vectors without a live memory",
           "stale_rows": "rows that differ from the log",
           "bad_vectors": "vectors of the wrong dimension or not finite",
           "wrong_model": "rows embedded by another model",
           "expired_active": "expired but still active",
           "overdue_candidates": "candidates unconfirmed past their term"}


def describe(report: DoctorReport) -> str:
    """The report as a few readable lines: each user with problems, what was found and
    (after a repair) what was fixed and what is left."""
    lines = [f"memray doctor: {len(report.users)} user(s), store {report.store_model} "
             f"({report.store_dim} dims)"]
    after = {u.user_id: u for u in report.after or []}
    for user in report.users:
        if not user.problems:
            continue
        lines.append(f"  {user.user_id}: {user.log_memories} in the log, "
                     f"{user.store_rows} in the store")
        lines += [f"    {f.count} {label}" for name, label in _LABELS.items()
                  if (f := getattr(user, name)).count]
        if user.outbox.ops:
            age = "unknown age" if user.outbox.oldest_age_s is None else \
                f"oldest {user.outbox.oldest_age_s:.0f} s"
            lines.append(f"    {user.outbox.ops} queued store op(s) ({age})")
        if user.log_missing:
            lines.append("    the log holds no history for this user: orphans kept")
        fixed = after.get(user.user_id)
        if fixed is not None:
            done = ", ".join(f"{n} {k}" for k, n in sorted(fixed.repaired.items())) or "nothing"
            lines.append(f"    repaired: {done}; problems left: {fixed.problems}")
    lines.append("no problems found" if not any(u.problems for u in report.users)
                 else f"problems left: {report.problems}")
    return "\n".join(lines)

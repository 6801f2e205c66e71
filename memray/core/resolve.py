"""Resolution: each candidate fact against the same user's memories -> ADD / UPDATE /
DELETE / NOOP, as a change set (core/changes.py; nothing is written here).

Order of evidence: an explicit op from the extractor (the LLM) > the same slot > embedding
bands (>= same_fact_similarity: the same fact; grey band: a judge decides; below: new).
A fact in a single-valued slot (city, job, availability ...) that differs from the active
one supersedes it; so does a correction, and a like/dislike of the same thing.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memray.config import WriteConfig
from memray.core import lexical, policies
from memray.core.changes import ChangeSet
from memray.core.records import new_record
from memray.core.summary import MERGED_FROM
from memray.embed.base import Embedder
from memray.extract.base import Extraction, Fact, Forget, Judge, is_single_valued
from memray.extract.rules import classify
from memray.hanzi import simplified
from memray.models import MemoryRecord, MemoryStatus, content_hash
from memray.store.base import Vector, VectorStore, Where
from memray.store.events import Tombstone
from memray.store.rows import to_ms

LIVE_STATUSES = (MemoryStatus.ACTIVE.value, MemoryStatus.CANDIDATE.value)


def _norm(text: str) -> str:
    return "".join(ch for ch in unicodedata.normalize("NFKC", text).casefold() if ch.isalnum())


def rule_judge(fact: Fact, record: MemoryRecord) -> bool:
    """Same slot, or same type and one content contains the other."""
    if fact.slot and record.slot:
        return fact.slot == record.slot
    if fact.type != record.type:
        return False
    a, b = _norm(fact.content), _norm(record.content)
    return bool(a and b and (a in b or b in a))


def _opposite(slot: str | None) -> str | None:
    if slot and slot.startswith("like:"):
        return "dislike:" + slot[5:]
    if slot and slot.startswith("dislike:"):
        return "like:" + slot[8:]
    return None


def about(record: MemoryRecord) -> str:
    """What a forget is matched against: a verbatim answer is also about what it answers
    ("forget my diagnosis" reaches "Fine, thanks" said to "How is the diagnosis?")."""
    return f"{record.reply_to} {record.content}" if record.reply_to else record.content


def forgotten(slot: str | None, content: str, forget: Forget) -> bool:
    """Whether a memory matches a forget. A memory stored without a slot (verbatim) is
    classified from its content, so "forget my working hours" reaches it too; a topic
    given as terms matches a memory that contains every term (Latin words compared
    stemmed, Chinese runs as substrings)."""
    if forget.everything:
        return True
    if slot is None and forget.slots:
        found = classify(content)
        slot = found[1] if found else None
    slot = simplified(slot) if slot else slot  # one stored before slots were folded
    if slot and any(slot == s or (s.endswith(":") and slot.startswith(s))
                    for s in forget.slots):
        return True
    if not forget.terms:
        return False
    words, folded = set(lexical.tokens(content)), simplified(content).casefold()
    for term in forget.terms:
        if "\u4e00" <= term[0] <= "\u9fff":
            if term not in folded:
                return False
        elif not set(lexical.tokens(term)) <= words:
            return False
    return True


@dataclass(frozen=True)
class Scope:
    user_id: str
    session_id: str | None
    agent_id: str | None
    metadata: dict[str, object]
    consent: int
    occurred_at: datetime | None = None  # the round's own time, when its messages carry one


class Resolver:
    def __init__(self, store: VectorStore, embedder: Embedder, cfg: WriteConfig,
                 judge: Judge | None = None) -> None:
        self._store, self._embedder, self._cfg = store, embedder, cfg
        self._judge = judge or rule_judge

    def embed_one(self, text: str) -> Vector:
        vec: Vector = self._embedder.embed([text])[0]
        return vec

    def session_records(self, scope: Scope, facts: Sequence[Fact],
                        now: datetime) -> list[MemoryRecord]:
        """Admitted facts as records for session memory (consent 1): never stored."""
        fitted = [policies.fit(f) for f in facts]
        return [self._record(scope, f, now) for f in fitted if policies.admit(f) is None]

    def plan(self, scope: Scope, extraction: Extraction, now: datetime,
             into: ChangeSet | None = None) -> ChangeSet:
        """The change set that `extraction` makes to the user's memories. `into`:
        continue one (a backfill resolves a user's rounds in order, each against the
        memories the earlier rounds planned)."""
        plan = into if into is not None else ChangeSet(scope.user_id)
        for forget in extraction.forgets:
            self._forget(scope.user_id, forget, plan, now)
        facts = []
        for fact in map(policies.fit, extraction.facts):
            reason = policies.admit(fact)
            if reason:
                policies.log_drop(reason)
            else:
                facts.append(fact)
        vectors = self._embedder.embed([f.content for f in facts])
        for fact, vec in zip(facts, vectors, strict=True):
            self._resolve(scope, fact, vec, plan, now)
        return plan

    # -- forget ------------------------------------------------------------------
    def _forget(self, uid: str, forget: Forget, plan: ChangeSet, now: datetime) -> None:
        at = to_ms(now)
        if forget.everything:
            plan.tombstones.append(Tombstone("all", "*", at))
        plan.tombstones.extend(Tombstone("slot", s, at) for s in forget.slots)
        known = {r.id: r for r in self._store.query(uid, Where())}
        known |= {rid: row.record for rid, row in plan.upserts.items()}  # planned, not stored
        hit = {r.id: r for r in known.values() if r.id not in plan.deletes
               and self._forgotten(r, forget)
               and r.created_at <= now}  # a forget in an old log spares what came later
        for record in hit.values():
            # A summary whose members are forgotten is rebuilt from the rest (the cascade
            # of core/deletions.py); it goes whole only when the forget names it alone.
            members = record.metadata.get(MERGED_FROM) or []
            if not any(m in hit for m in members):
                plan.delete(record, now, "forget command")

    @staticmethod
    def _forgotten(record: MemoryRecord, forget: Forget) -> bool:
        return forgotten(record.slot, about(record), forget)

    # -- facts -------------------------------------------------------------------
    def _related(self, uid: str, fact: Fact, vec: Vector, plan: ChangeSet, now: datetime,
                 stored: dict[str, Vector]) -> list[tuple[MemoryRecord, float]]:
        """Live memories to compare with: nearest by vector, same slot, opposite slot,
        and this plan's own new rows; the latest planned version of each wins. The
        vectors of the same-slot rows go into `stored` (read with them, no extra call)."""
        alive = to_ms(now)
        found: dict[str, tuple[MemoryRecord, float]] = {}
        for rec, sim in self._store.search(uid, vec, 5, Where(statuses=LIVE_STATUSES,
                                                              alive_at_ms=alive)):
            found[rec.id] = (rec, sim)
        slots = tuple(s for s in (fact.slot, _opposite(fact.slot)) if s)
        if slots:
            for row in self._store.rows(uid, Where(slots=slots, statuses=LIVE_STATUSES)):
                stored[row.record.id] = row.vector
                found.setdefault(row.record.id, (row.record, -1.0))
        for rid, row in plan.upserts.items():
            if row.record.status.value in LIVE_STATUSES and row.record.user_id == uid:
                found[rid] = (row.record, float(row.vector @ vec))
        out = []
        for rid, (rec, sim) in found.items():
            if rid in plan.deletes:
                continue
            latest = plan.upserts[rid].record if rid in plan.upserts else rec
            if latest.status.value in LIVE_STATUSES:
                out.append((latest, sim))
        return sorted(out, key=lambda p: -p[1])

    def _resolve(self, scope: Scope, fact: Fact, vec: Vector, plan: ChangeSet,
                 now: datetime) -> None:
        stored: dict[str, Vector] = {}
        related = self._related(scope.user_id, fact, vec, plan, now, stored)
        if fact.op is not None:
            self._follow_op(scope, fact, vec, related, plan, now, stored)
            return
        opposite = _opposite(fact.slot)
        # A slot names one fact when it holds one value (city) or carries its object
        # (like:jazz); "task" or "diet" alone hold many different facts, which only
        # similarity tells apart.
        same = [r for r, _ in related if fact.slot and r.slot == fact.slot
                and (is_single_valued(fact.slot) or ":" in fact.slot)]
        rivals = [r for r, _ in related if opposite and r.slot == opposite]
        if same and is_single_valued(fact.slot):
            rivals += [r for r in same if r.content_hash != content_hash(fact.content)]
        if any(r.created_at > now for r in rivals):
            # A fact from an old log (backfill) never overrides a newer memory.
            plan.noop(rivals[0], now, "older than the memory it would replace")
            return
        for rec in rivals:
            if rec.slot == opposite:
                self._supersede(scope, rec, plan, now, stored)
        if same and is_single_valued(fact.slot):
            if any(r.content_hash == content_hash(fact.content) for r in same):
                self._confirm(scope.user_id, same[0], fact, vec, plan, now, stored)
                return
            for rec in same:
                self._supersede(scope, rec, plan, now, stored)
            self._add(scope, fact, vec, plan, now)
            return
        if same:
            self._confirm(scope.user_id, same[0], fact, vec, plan, now, stored)
            return
        match = self._match_by_similarity(fact, related)
        if match is not None:
            if fact.correction and match.content_hash != content_hash(fact.content):
                self._supersede(scope, match, plan, now, stored)
                self._add(scope, fact, vec, plan, now)
            else:
                self._confirm(scope.user_id, match, fact, vec, plan, now, stored)
            return
        self._add(scope, fact, vec, plan, now)

    def _match_by_similarity(self, fact: Fact,
                             related: Sequence[tuple[MemoryRecord, float]]) -> MemoryRecord | None:
        for rec, sim in related:
            slots_differ = bool(fact.slot and rec.slot and fact.slot != rec.slot)
            if sim >= self._cfg.same_fact_similarity and not slots_differ:
                return rec
            if sim >= self._cfg.grey_band_low and self._judge(fact, rec):
                return rec
        return None

    def _follow_op(self, scope: Scope, fact: Fact, vec: Vector,
                   related: Sequence[tuple[MemoryRecord, float]], plan: ChangeSet,
                   now: datetime, stored: dict[str, Vector]) -> None:
        target = next((r for r, _ in related if r.id == fact.target), None)
        if target is None and fact.target is not None:
            target = self._lookup(scope.user_id, fact.target, plan)
        if fact.op == "ADD" or target is None:
            if fact.op in ("ADD", "UPDATE"):
                self._add(scope, fact, vec, plan, now)
            return
        if fact.op == "UPDATE":
            self._supersede(scope, target, plan, now, stored)
            self._add(scope, fact, vec, plan, now)
        elif fact.op == "DELETE":
            plan.delete(target, now, "extractor: delete")
        else:
            plan.noop(target, now, "extractor: already known")

    def _lookup(self, uid: str, mid: str, plan: ChangeSet) -> MemoryRecord | None:
        if mid in plan.upserts:
            return plan.upserts[mid].record
        found = self._store.query(uid, Where(ids=(mid,), statuses=LIVE_STATUSES), limit=1)
        return found[0] if found else None

    # -- plan edits --------------------------------------------------------------
    def _existing_vector(self, rec: MemoryRecord, plan: ChangeSet,
                         stored: dict[str, Vector]) -> Vector:
        """The vector a memory is stored with: a status change re-embeds nothing."""
        planned = plan.planned(rec.id)
        if planned is not None:
            return planned.vector
        if rec.id in stored:
            return stored[rec.id]
        found = self._store.rows(rec.user_id, Where(ids=(rec.id,)))
        if found:
            return found[0].vector
        vec: Vector = self._embedder.embed([rec.index_text])[0]  # the store lags the log
        return vec

    def _supersede(self, scope: Scope, rec: MemoryRecord, plan: ChangeSet, now: datetime,
                   stored: dict[str, Vector]) -> None:
        """`rec` stops being true when the correction was said (its message time, else
        now): what `as_of` reads later."""
        if rec.status == MemoryStatus.SUPERSEDED or rec.id in plan.deletes:
            return
        until = max(scope.occurred_at or now, rec.valid_since)
        new = rec.model_copy(update={"status": MemoryStatus.SUPERSEDED, "updated_at": now,
                                     "valid_to": until})
        plan.put(new, self._existing_vector(rec, plan, stored), rec, now, "superseded")

    def _confirm(self, uid: str, rec: MemoryRecord, fact: Fact, vec: Vector, plan: ChangeSet,
                 now: datetime, stored: dict[str, Vector]) -> None:
        """The same fact again: refresh last_confirmed_at; a candidate becomes active."""
        latest = max(now, rec.last_confirmed_at)  # a backfilled old turn moves nothing back
        update = {"last_confirmed_at": latest, "updated_at": max(now, rec.updated_at),
                  "importance": max(rec.importance, fact.importance),
                  "confidence": max(rec.confidence, fact.confidence),
                  "source_turn_ids": tuple(dict.fromkeys(rec.source_turn_ids + fact.turn_ids))}
        if rec.status == MemoryStatus.CANDIDATE:
            update |= {"status": MemoryStatus.ACTIVE,
                       "expires_at": policies.expires_at(rec.type, MemoryStatus.ACTIVE, now)}
        new = rec.model_copy(update=update)
        plan.put(new, self._existing_vector(rec, plan, stored), rec, now, "confirmed")

    def _add(self, scope: Scope, fact: Fact, vec: Vector, plan: ChangeSet,
             now: datetime) -> None:
        plan.put(self._record(scope, fact, now), vec, None, now, "new fact", fresh=True)

    def _record(self, scope: Scope, fact: Fact, now: datetime) -> MemoryRecord:
        status = policies.initial_status(fact)
        return new_record(
            user_id=scope.user_id, content=fact.content, embedding_model=self._embedder.model,
            at=now, type=fact.type, agent_id=scope.agent_id, session_id=scope.session_id,
            slot=fact.slot, importance=fact.importance, confidence=fact.confidence,
            status=status, source=fact.source, source_turn_ids=fact.turn_ids,
            source_excerpt=fact.excerpt[:200],
            expires_at=policies.expires_at(fact.type, status, now), consent=scope.consent,
            metadata=dict(scope.metadata), occurred_at=scope.occurred_at)

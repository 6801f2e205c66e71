"""Record types that cross memray's public API. All are pydantic models, JSON-serialisable."""

from __future__ import annotations

import hashlib
import unicodedata
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class MemoryType(StrEnum):
    """What kind of fact a memory is; decides its decay tier."""

    IDENTITY = "identity"
    PREFERENCE = "preference"
    CONSTRAINT = "constraint"
    FACT = "fact"
    TASK_STATE = "task_state"
    BEHAVIOR = "behavior"
    SUMMARY = "summary"
    MESSAGE = "message"


class MemoryStatus(StrEnum):
    """Only ACTIVE memories are ever recalled."""

    ACTIVE = "active"
    CANDIDATE = "candidate"
    SUPERSEDED = "superseded"
    EXPIRED = "expired"
    MERGED = "merged"  # kept inside a summary: never recalled, still reached by deletes


class MemorySource(StrEnum):
    USER_STATED = "user_stated"
    INFERRED = "inferred"
    IMPORTED = "imported"


Op = Literal["ADD", "UPDATE", "DELETE", "NOOP"]


def utcnow() -> datetime:
    """Now, UTC, truncated to milliseconds (the precision the store keeps)."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def content_hash(content: str) -> str:
    """A stable hash of normalised content (NFKC, case-folded, whitespace collapsed)."""
    norm = " ".join(unicodedata.normalize("NFKC", content).casefold().split())
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()


class MemoryRecord(BaseModel):
    """One short statement about one user, with its provenance and lifecycle fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(description="Time-ordered UUID (v7) string.")
    user_id: str
    agent_id: str | None = None
    session_id: str | None = None
    type: MemoryType = MemoryType.FACT
    slot: str | None = Field(None, description="What the fact is about, e.g. 'city', "
                             "'availability', 'dislike:cilantro'; one active fact per single-"
                             "valued slot.")
    content: str
    importance: float = Field(0.5, ge=0.0, le=1.0)
    confidence: float = Field(1.0, ge=0.0, le=1.0)
    status: MemoryStatus = MemoryStatus.ACTIVE
    source: MemorySource = MemorySource.USER_STATED
    source_turn_ids: tuple[str, ...] = ()
    source_excerpt: str = ""
    created_at: datetime
    updated_at: datetime
    last_confirmed_at: datetime
    expires_at: datetime | None = None
    occurred_at: datetime | None = Field(None, description="When it was said or happened "
                                         "(the message's own `timestamp`), as distinct from "
                                         "`created_at`, when memray stored it.")
    valid_from: datetime | None = Field(None, description="When it became true, when that "
                                        "differs from `occurred_at` or `created_at` (a "
                                        "merge: its earliest member); see `valid_since`.")
    valid_to: datetime | None = Field(None, description="When a correction superseded it "
                                      "(the correction's message time, else its storing).")
    reply_to: str = Field("", description="A verbatim memory's start of the turn it "
                          "answers (redacted), kept so a bare reply ('yes, in Paris') "
                          "is found by what it answers.")
    consent: int = Field(2, ge=0, le=2, description="0 keep nothing, 1 session, 2 persistent.")
    embedding_model: str
    content_hash: str
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def said_at(self) -> datetime:
        """When it was said: the message time, else when memray stored it."""
        return self.occurred_at or self.created_at

    @property
    def valid_since(self) -> datetime:
        """When it became true: `valid_from`, else when it was said."""
        return self.valid_from or self.said_at

    def valid_at(self, when: datetime) -> bool:
        """True at `when`: begun by then, not superseded and not expired before it."""
        return (self.valid_since <= when
                and (self.valid_to is None or when < self.valid_to)
                and (self.expires_at is None or when < self.expires_at))

    @property
    def index_text(self) -> str:
        """What is embedded and keyword-indexed for this memory."""
        if self.type != MemoryType.MESSAGE:
            return self.content  # an extracted fact stands on its own
        return message_index_text(self.content, self.occurred_at, self.reply_to)


def message_index_text(content: str, occurred_at: datetime | None, reply_to: str) -> str:
    """A conversation turn as it is indexed: its date and the turn it answers around it,
    so "when did ..." and questions about the other side of an exchange find it."""
    text = content
    if occurred_at is not None:
        text = f"[{_day(occurred_at, content)}] {text}"
    if reply_to:
        text = f"{text} (replying to: {reply_to})"
    return text


def _day(at: datetime, content: str) -> str:
    if any("\u4e00" <= ch <= "\u9fff" for ch in content[:200]):
        return f"{at.year}年{at.month}月{at.day}日"
    return f"{at.day} {_MONTHS[at.month - 1]} {at.year}"


_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")


class MemoryEvent(BaseModel):
    """One change to one memory, as returned by writes and kept in the history."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    op: Op
    memory_id: str
    user_id: str
    memory: MemoryRecord | None = None
    previous: MemoryRecord | None = None
    at: datetime
    reason: str = ""
    version: int | None = Field(None, description="On a write's result: the user's memory "
                                "version after the write (pass it as `min_version` to read "
                                "your write on any replica). None in the history.")
    receipt: DeletionReceipt | None = Field(None, description="On a delete's result: what "
                                            "was removed from each store, verified.")


class SearchHit(BaseModel):
    """A recalled memory: `similarity` is the cosine similarity (-1..1), `score` the rank key."""

    model_config = ConfigDict(frozen=True)

    memory: MemoryRecord
    score: float
    similarity: float


class Page(BaseModel):
    """One page of `get_all`; pass `next_cursor` back for the next page (None: no more)."""

    model_config = ConfigDict(frozen=True)

    items: list[MemoryRecord]
    next_cursor: str | None = None


class AddResult(BaseModel):
    """What an `add` changed, one event per memory touched."""

    model_config = ConfigDict(frozen=True)

    events: list[MemoryEvent] = Field(default_factory=list)
    pending_turns: int = Field(0, description="Turns logged but not extracted yet (waiting "
                               "for the round to complete).")
    version: int = Field(0, description="The user's memory version after this add (pass it "
                         "as `min_version` to read your write on any replica).")
    receipt: DeletionReceipt | None = Field(None, description="When the add deleted memories "
                                            "(a forget, a correction by the extractor): the "
                                            "deletion receipt.")

    @property
    def memories(self) -> list[MemoryRecord]:
        return [e.memory for e in self.events if e.memory is not None and e.op != "DELETE"]


class StoreCheck(BaseModel):
    """One store's part of a deletion: what held the deleted memories before, and what a
    re-read after the deletion still found (0 when verified)."""

    model_config = ConfigDict(frozen=True)

    removed: int = Field(ge=0, description="Items (rows, events, turns, entries) found "
                         "holding the deleted memories before the deletion.")
    remaining: int = Field(ge=0, description="Items a re-read after the deletion found.")


class DerivedChange(BaseModel):
    """A memory derived from a deleted one (a merge summary) and what became of it."""

    model_config = ConfigDict(frozen=True)

    memory_id: str
    action: Literal["deleted", "rebuilt"]
    rebuilt_as: str | None = Field(None, description="The new summary's id, when rebuilt "
                                   "from the members that remain.")


class DeletionReceipt(BaseModel):
    """Proof of one deletion, without content: the memory ids removed, what was derived
    from them, per store the count removed and what a re-read found afterwards. `digest`
    (SHA-256 of the rest) lets the user hold the receipt and check the audit log's copy."""

    model_config = ConfigDict(frozen=True)

    id: str
    user_id: str
    kind: Literal["delete", "delete_all", "forget"]
    at: datetime
    memory_ids: list[str] = Field(default_factory=list)
    derived: list[DerivedChange] = Field(default_factory=list)
    stores: dict[str, StoreCheck] = Field(default_factory=dict)
    verified: bool = Field(description="Every store re-read after the deletion holds none "
                           "of it (every `remaining` is 0).")
    error: str | None = Field(None, description="Why a store could not be re-read (the "
                              "deletion is committed and will be applied; not verified).")
    shredded: bool = Field(False, description="With encryption on, `delete_all` destroyed "
                           "the user's data key: every copy of what was sealed under it, "
                           "anywhere, is unreadable.")
    digest: str = ""

    @property
    def deleted(self) -> int:
        """How many memories the deletion removed (derived summaries not counted)."""
        return len(self.memory_ids)

    def sealed(self) -> DeletionReceipt:
        """This receipt with its digest computed."""
        return self.model_copy(update={"digest": receipt_digest(self)})


class DeletionCheck(BaseModel):
    """A receipt checked again later (`memray doctor --verify-deleted`): its digest still
    matches its body, and no store holds any of its memory ids now."""

    model_config = ConfigDict(frozen=True)

    receipt_id: str
    kind: Literal["delete", "delete_all", "forget"]
    at: datetime
    digest_ok: bool = Field(description="The audit log's copy hashes to its digest.")
    remaining: dict[str, int] = Field(description="Per store, items holding one of the "
                                      "receipt's memory ids now (the turn log is checked "
                                      "at deletion time only: a receipt holds no content).")
    ok: bool = Field(description="`digest_ok` and every `remaining` is 0.")


def receipt_digest(receipt: DeletionReceipt) -> str:
    """SHA-256 over the receipt's canonical JSON, its own digest left out."""
    body = receipt.model_dump_json(exclude={"digest"})
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


MemoryEvent.model_rebuild()
AddResult.model_rebuild()

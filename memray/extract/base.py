"""The `Extractor` seam and the types that cross it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from memray.models import MemoryRecord, MemorySource, MemoryType

FactOp = Literal["ADD", "UPDATE", "DELETE", "NOOP"]


@dataclass(frozen=True)
class Turn:
    """One logged conversation turn; `id` is stable across retries (session:index)."""

    id: str
    role: str
    content: str


@dataclass(frozen=True)
class Fact:
    """A candidate memory. `op`/`target` are set only by extractors that resolve against
    existing memories themselves (the LLM); `target` is a memory id, never shown raw."""

    content: str
    type: MemoryType
    importance: float
    confidence: float
    source: MemorySource = MemorySource.USER_STATED
    slot: str | None = None
    correction: bool = False
    turn_ids: tuple[str, ...] = ()
    excerpt: str = ""
    op: FactOp | None = None
    target: str | None = None


@dataclass(frozen=True)
class Forget:
    """Delete what matches: memories in these slots (a trailing ':' matches a prefix),
    or, for a topic that names no slot, memories containing every one of `terms`;
    `everything` deletes all."""

    slots: tuple[str, ...] = ()
    terms: tuple[str, ...] = ()
    everything: bool = False
    turn_id: str = ""


@dataclass(frozen=True)
class Extraction:
    facts: list[Fact] = field(default_factory=list)
    forgets: list[Forget] = field(default_factory=list)


Judge = Callable[[Fact, MemoryRecord], bool]


@runtime_checkable
class Extractor(Protocol):
    """Turns -> facts and commands. Must not write anything; may raise ExtractionError.
    `wants_existing`: whether `extract` looks at the user's related memories (fetching
    them costs an embedding and a search per extraction)."""

    wants_existing: bool

    def extract(self, turns: Sequence[Turn], existing: Sequence[MemoryRecord]) -> Extraction:
        """`existing`: the user's related memories, for extractors that resolve ops."""

    def is_urgent(self, text: str) -> bool:
        """True when a user turn is a correction, forget or remember command, which
        triggers extraction at once instead of at the end of the round."""

    def grey_band_judge(self) -> Judge | None:
        """What decides whether a fact and a memory whose similarity is in the grey band
        say the same thing; None: the resolver's rules decide."""


SINGLE_VALUED = ("name", "city", "job", "availability", "hometown", "age", "birthday")


def is_single_valued(slot: str | None) -> bool:
    """One active memory per slot: a new value supersedes the old one. A routine is keyed
    by its period ("routine:morning"): a new morning routine replaces the old one."""
    return slot in SINGLE_VALUED or bool(slot and slot.startswith("routine:"))

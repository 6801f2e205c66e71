"""A user's profile: a short, structured view of who they are (identity, preferences,
constraints, current tasks, other facts), built from their active memories only.

Built by a deterministic template: memories are put in sections by type (a verbatim
memory by the rule classifier, or left out when it states no known kind of fact), one
per slot (the most important, then the newest), most important first, at most
`Limits.per_section` a section, each entry and the summary line bounded in characters.
With an LLM configured (`write.llm`), `refresh` also asks it for a one-paragraph
summary of the same entries; the entries stay the template's.

Where it lives: in the event log's metadata under `profile:<user_id>`, with the user's
memory version it was built at, so any process (an API replica, the nightly job that
refreshes every user) reads it in one lookup. A profile is served only while its
version is the user's current one; after any write (a delete included) the next read
builds it again from the template, so a deleted memory never appears in a profile, and
the stored copy is overwritten. The LLM summary comes back with the next `refresh`
(the nightly job, or `refresh=True`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memray.config import MemoryConfig
from memray.core.engine import Engine
from memray.errors import ExtractionError
from memray.extract.rules import classify
from memray.models import MemoryRecord, MemoryStatus, MemoryType, utcnow
from memray.store.base import Where
from memray.store.events import PROFILE_META, overlaid
from memray.store.rows import to_ms

log = logging.getLogger(__name__)
META_PREFIX = PROFILE_META
Summarize = Callable[[Sequence[str], int], str]
Section = Literal["identity", "preferences", "constraints", "current_tasks", "facts"]
SECTIONS: tuple[Section, ...] = ("identity", "preferences", "constraints", "current_tasks",
                                 "facts")
_SECTION_OF: dict[MemoryType, Section] = {
    MemoryType.IDENTITY: "identity", MemoryType.PREFERENCE: "preferences",
    MemoryType.BEHAVIOR: "preferences", MemoryType.CONSTRAINT: "constraints",
    MemoryType.TASK_STATE: "current_tasks", MemoryType.FACT: "facts",
    MemoryType.SUMMARY: "facts",
}
_LABELS = {
    "en": {"identity": "Identity", "preferences": "Preferences", "constraints": "Constraints",
           "current_tasks": "Current tasks", "facts": "Other facts"},
    "zh": {"identity": "身份", "preferences": "偏好", "constraints": "限制",
           "current_tasks": "当前任务", "facts": "其他"},
}


@dataclass(frozen=True)
class Limits:
    """Bounds of a profile: entries per section, characters per entry and in `summary`."""

    per_section: int = 5
    entry_chars: int = 200
    summary_chars: int = 1000


class ProfileEntry(BaseModel):
    """One memory in a profile (its content cut to `Limits.entry_chars`)."""

    model_config = ConfigDict(frozen=True)

    memory_id: str
    content: str
    type: MemoryType
    slot: str | None = None
    importance: float
    updated_at: datetime


class Profile(BaseModel):
    """A user's profile at memory `version`; each section best first."""

    model_config = ConfigDict(frozen=True)

    user_id: str
    version: int = Field(description="The user's memory version it was built from.")
    built_at: datetime
    source: Literal["template", "llm"] = Field(description="Who wrote `summary`.")
    language: Literal["en", "zh"] = Field(description="Of the labels in `summary`: zh "
                                          "when most of the content is Chinese.")
    identity: list[ProfileEntry] = Field(default_factory=list)
    preferences: list[ProfileEntry] = Field(default_factory=list)
    constraints: list[ProfileEntry] = Field(default_factory=list)
    current_tasks: list[ProfileEntry] = Field(default_factory=list)
    facts: list[ProfileEntry] = Field(default_factory=list)
    summary: str = Field("", description="The profile as short text (one line a section "
                         "from the template, or the LLM's paragraph).")

    def entries(self) -> list[ProfileEntry]:
        return [e for s in SECTIONS for e in getattr(self, s)]


def section_of(record: MemoryRecord) -> tuple[Section, str | None] | None:
    """(section, slot) of a memory; a verbatim one is classified from its text, and is
    left out (None) when the classifier finds no fact in it."""
    if record.type != MemoryType.MESSAGE:
        return _SECTION_OF[record.type], record.slot
    found = classify(record.content)
    if found is None or found[0].type not in _SECTION_OF:
        return None
    return _SECTION_OF[found[0].type], found[1]


def build(user_id: str, version: int, records: Sequence[MemoryRecord], now: datetime,
          limits: Limits = Limits()) -> Profile:
    """The template profile of these memories (only active, unexpired ones count)."""
    best: dict[tuple[Section, str], tuple[MemoryRecord, str | None]] = {}
    for r in records:
        placed = _placed(r, now)
        if placed is None:
            continue
        section, slot = placed
        key = (section, slot or r.content_hash)
        held = best.get(key)
        if held is None or _rank(r) < _rank(held[0]):
            best[key] = (r, slot)
    sections: dict[Section, list[ProfileEntry]] = {s: [] for s in SECTIONS}
    for (section, _), (r, slot) in sorted(best.items(), key=lambda kv: _rank(kv[1][0])):
        if len(sections[section]) < limits.per_section:
            sections[section].append(_entry(r, slot, limits.entry_chars))
    language = _language([e.content for v in sections.values() for e in v])
    return Profile(user_id=user_id, version=version, built_at=now, source="template",
                   language=language, summary=_render(sections, language,
                                                      limits.summary_chars),
                   **sections)


def _placed(r: MemoryRecord, now: datetime) -> tuple[Section, str | None] | None:
    if r.status != MemoryStatus.ACTIVE or (r.expires_at is not None and r.expires_at <= now):
        return None
    return section_of(r)


def _rank(r: MemoryRecord) -> tuple[float, float, str]:
    """Sort key: most important, then most recently updated, then id (deterministic)."""
    return (-r.importance, -r.updated_at.timestamp(), r.id)


def _entry(r: MemoryRecord, slot: str | None, chars: int) -> ProfileEntry:
    text = r.content if len(r.content) <= chars else r.content[:chars - 1] + "…"
    return ProfileEntry(memory_id=r.id, content=text, type=r.type, slot=slot,
                        importance=r.importance, updated_at=r.updated_at)


def _language(texts: Sequence[str]) -> Literal["en", "zh"]:
    han = sum(1 for t in texts for c in t if "\u4e00" <= c <= "\u9fff")
    latin = sum(1 for t in texts for c in t if c.isascii() and c.isalpha())
    return "zh" if han and han * 3 >= latin else "en"  # a Chinese character says ~3 letters


def _render(sections: dict[Section, list[ProfileEntry]], language: Literal["en", "zh"],
            max_chars: int) -> str:
    """One line a non-empty section; whole entries only, within `max_chars`."""
    colon, sep = ("：", "；") if language == "zh" else (": ", "; ")
    lines: list[str] = []
    used = 0
    for section in SECTIONS:
        label = _LABELS[language][section] + colon
        parts: list[str] = []
        for e in sections[section]:
            text = e.content.rstrip("。.;；")
            cost = len(text) + (len(sep) if parts else len(label) + 1)
            if used + cost > max_chars:
                break
            parts.append(text)
            used += cost
        if parts:
            lines.append(label + sep.join(parts))
    return "\n".join(lines)


class Profiles:
    """Profiles of the users of one open engine, kept in its event log's metadata."""

    def __init__(self, engine: Engine, *, limits: Limits = Limits()) -> None:
        self._engine, self._limits = engine, limits

    def read(self, user_id: str) -> Profile:
        """The stored profile if it is at the user's current version, else a template
        profile built now (and stored)."""
        stored = self._stored(user_id)
        if stored is not None and stored.version == self._engine.events.version(user_id):
            return stored
        return self.refresh(user_id)

    def refresh(self, user_id: str, summarize: Summarize | None = None) -> Profile:
        """Build the profile now (with the LLM's summary when `summarize` is given; on an
        LLM failure the template's) and store it."""
        profile = self._template(user_id)
        if summarize is not None and profile.entries():
            profile = self._summarized(profile, summarize)
        self._engine.events.set_meta(META_PREFIX + user_id, profile.model_dump_json())
        return profile

    def refresh_all(self, summarize: Summarize | None = None) -> int:
        """Refresh every user the log knows (users with no memories left get an empty
        profile, overwriting what was stored); returns how many."""
        users = sorted(self._engine.events.versions())
        for uid in users:
            self.refresh(uid, summarize)
        return len(users)

    def _stored(self, user_id: str) -> Profile | None:
        raw = self._engine.events.get_meta(META_PREFIX + user_id)
        if raw is None:
            return None
        try:
            return Profile.model_validate_json(raw)
        except ValidationError:  # written by another version of memray: build it again
            return None

    def _template(self, uid: str) -> Profile:
        """Read under the user's lock, with the ops the outbox still holds laid over the
        rows (nothing is written), so the memories are those of the version read: a
        committed delete is gone even while the store has not applied it."""
        e, now = self._engine, utcnow()
        with e.committer.locked(uid):
            version = e.events.version(uid)
            records = e.store.query(uid, Where(statuses=(MemoryStatus.ACTIVE.value,),
                                               alive_at_ms=to_ms(now)))
            pending = [p.op for p in e.events.pending(uid)]
        return build(uid, version, overlaid(records, pending), now, self._limits)

    def _summarized(self, profile: Profile, summarize: Summarize) -> Profile:
        labels = _LABELS[profile.language]
        statements = [f"{labels[s]}: {e.content}" for s in SECTIONS
                      for e in getattr(profile, s)]
        try:
            text = summarize(statements, self._limits.summary_chars)
        except ExtractionError as exc:
            log.warning("profile summary by the LLM failed, the template's is kept: %s", exc)
            return profile
        return profile.model_copy(update={"summary": text, "source": "llm"})


@contextmanager
def llm_summarizer(config: MemoryConfig) -> Iterator[Summarize | None]:
    """The configured LLM's `summarize` (write.extractor 'llm' or 'local'), or None;
    closed after."""
    from memray.extract.choose import open_llm

    client = open_llm(config.write)
    if client is None:
        yield None
        return
    try:
        yield client.summarize
    finally:
        client.close()

"""The prompt section `context()` returns: background that may be stale, with dates."""

from __future__ import annotations

from memray.models import MemoryRecord, SearchHit

HEADER = (
    "## What you remember about this user\n"
    "Earlier impressions from past conversations. They may be out of date: prefer what the "
    "user says now, and do not mention this list unless it helps."
)


def prompt_section(hits: list[SearchHit], session: list[MemoryRecord] | None = None) -> str:
    """One memory a line as `- (YYYY-MM-DD) content`, a fact that a correction
    superseded (an `as_of` read) ending `(until YYYY-MM-DD)`, session-only facts marked
    `(this session)`; an empty string when nothing applies."""
    if not hits and not session:
        return ""
    lines = [HEADER]
    for m in [h.memory for h in hits]:
        if m.valid_to is None:
            day, until = m.last_confirmed_at.date().isoformat(), ""
        else:  # held from when it became true until the correction
            day, until = m.valid_since.date().isoformat(), f" (until {m.valid_to.date()})"
        lines.append(f"- ({day}) {' '.join(m.content.split())}{until}")
    for m in session or []:
        lines.append(f"- (this session) {' '.join(m.content.split())}")
    return "\n".join(lines)

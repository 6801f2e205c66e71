"""The prompt section `context()` returns: background that may be stale, with dates."""

from __future__ import annotations

from memray.models import SearchHit

HEADER = (
    "## What you remember about this user\n"
    "Earlier impressions from past conversations. They may be out of date: prefer what the "
    "user says now, and do not mention this list unless it helps."
)


def prompt_section(hits: list[SearchHit]) -> str:
    """One memory a line as `- (YYYY-MM-DD) content`; an empty string when nothing applies."""
    if not hits:
        return ""
    lines = [HEADER]
    for hit in hits:
        m = hit.memory
        day = m.last_confirmed_at.date().isoformat()
        text = " ".join(m.content.split())
        lines.append(f"- ({day}) {text}")
    return "\n".join(lines)

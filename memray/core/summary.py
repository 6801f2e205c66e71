"""The rule summary of a merge: what the nightly merge writes (without an LLM) and what a
deletion rebuilds a summary with when one of its members goes."""

from __future__ import annotations

from collections.abc import Sequence

from memray.models import content_hash

SUMMARY_CHARS = 400
MERGED_INTO = "merged_into"  # on a member: the summary it is kept in
MERGED_FROM = "merged_from"  # on a summary: its members' ids


def rule_summary(statements: Sequence[str], max_chars: int) -> str:
    """The distinct statements joined with '; ', whole statements only, within max_chars."""
    out: list[str] = []
    seen: set[str] = set()
    for s in statements:
        text = s.strip().rstrip(".;。；")
        key = content_hash(text)
        if not text or key in seen:
            continue
        if out and len("; ".join([*out, text])) > max_chars:
            break
        seen.add(key)
        out.append(text)
    return "; ".join(out)[:max_chars]

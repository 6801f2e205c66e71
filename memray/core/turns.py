"""Which stored turns of a conversation are next to which, for recall's neighbour stage.

Evidence often spans consecutive turns ("I adopted a dog" / "what breed?" / "a corgi"),
and only one of them resembles the question. Two stored turns are neighbours when:
- one answers the other: its `reply_to` is the start of the other's text (the write path
  keeps the answered turn's start there, core/edits.py), in the same session;
- they are consecutive among the session's stored turns (ids are time-ordered, so id
  order is the order they were stored in).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from itertools import pairwise

from memray.models import MemoryRecord, MemoryType


def _norm(text: str) -> str:
    return " ".join(text.split())


def adjacency(records: Sequence[MemoryRecord]) -> list[tuple[int, ...]]:
    """For each row of `records`, the rows next to it (indices, none for memories outside
    a session or not verbatim turns)."""
    links: list[set[int]] = [set() for _ in records]
    sessions: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        if r.session_id and r.type == MemoryType.MESSAGE:
            sessions[r.session_id].append(i)
    for rows in sessions.values():
        rows.sort(key=lambda i: records[i].id)
        for a, b in pairwise(rows):
            links[a].add(b)
            links[b].add(a)
        for a, b in _answers(records, rows):
            links[a].add(b)
            links[b].add(a)
    return [tuple(sorted(s)) for s in links]


def _answers(records: Sequence[MemoryRecord], rows: list[int]) -> list[tuple[int, int]]:
    """(turn, the turn it answers) within one session. A kept `reply_to` is the answered
    turn's whole text or its first `reply_context_chars`, so one prefix length is looked up
    besides whole texts."""
    replies = [(i, records[i].reply_to) for i in rows if records[i].reply_to]
    if not replies:
        return []
    cut = max(len(reply) for _, reply in replies)
    whole: dict[str, int] = {}
    start: dict[str, int] = {}
    for i in rows:
        text = _norm(records[i].content)
        whole.setdefault(text, i)
        if len(text) > cut:
            start.setdefault(text[:cut], i)
    out = []
    for i, reply in replies:
        j = whole.get(reply, start.get(reply) if len(reply) == cut else None)
        if j is not None and j != i:
            out.append((i, j))
    return out

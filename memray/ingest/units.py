"""Per-user work units: a user's log turns turned into what the writer needs.

A unit is plain JSON (it travels through Ray Data between workers): the session keys it
covers (the checkpoint), and either the extracted rounds (`infer`) or the user's messages
(`infer=False`). Extraction happens here, on any worker; resolution against the store
happens later, in the one process that writes.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict
from typing import Any

from memray.core.ids import stable_id
from memray.core.policies import redact
from memray.extract.base import Extraction, Extractor, Fact, Forget, Turn
from memray.ingest.logs import LogTurn
from memray.models import MemorySource, MemoryType, message_index_text
from memray.store.rows import at_ms

Unit = dict[str, Any]


def session_key(session_id: str, turns: Sequence[LogTurn]) -> str:
    """The checkpoint key of a session: its id and a digest of its turn ids, so a session
    that gained turns since the last run is imported again (its old turns are no-ops)."""
    digest = hashlib.sha256("\x1f".join(sorted(t.turn_id for t in turns)).encode()).hexdigest()
    return f"{session_id}#{digest[:16]}"


def mark_key(user_id: str, key: str) -> str:
    return f"{user_id}\x1f{key}"


def _rounds(turns: Sequence[LogTurn]) -> list[list[LogTurn]]:
    """A round ends with the first non-user turn after user turns (as online)."""
    rounds: list[list[LogTurn]] = [[]]
    for t in turns:
        if rounds[-1] and t.role != "user" and any(x.role == "user" for x in rounds[-1]):
            rounds[-1].append(t)
            rounds.append([])
        else:
            rounds[-1].append(t)
    return [r for r in rounds if any(t.role == "user" for t in r)]


def fact_json(f: Fact) -> dict[str, Any]:
    d = asdict(f)
    # Resolution runs against the store later; an LLM's op/target from a worker that saw
    # none of the user's memories would be guesses.
    d.update(type=f.type.value, source=f.source.value, op=None, target=None)
    return d


def fact_from_json(d: dict[str, Any]) -> Fact:
    return Fact(**{**d, "type": MemoryType(d["type"]), "source": MemorySource(d["source"]),
                   "turn_ids": tuple(d["turn_ids"])})


def forget_from_json(d: dict[str, Any]) -> Forget:
    return Forget(slots=tuple(d["slots"]), terms=tuple(d.get("terms", ())),
                  everything=d["everything"], turn_id=d["turn_id"])


def sessions_todo(turns: Iterable[LogTurn], done: frozenset[str]
                  ) -> tuple[list[str], list[list[LogTurn]]]:
    """One user's sessions not yet imported: their checkpoint keys and sorted turns."""
    by_session: dict[str, list[LogTurn]] = defaultdict(list)
    for t in turns:
        by_session[t.session_id].append(t)
    user_id = next(iter(by_session.values()))[0].user_id if by_session else ""
    keys, todo = [], []
    for sid, ts in by_session.items():
        ts.sort(key=lambda t: (t.ts_ms, t.turn_id))
        key = session_key(sid, ts)
        if mark_key(user_id, key) not in done:
            keys.append(key)
            todo.append(ts)
    return keys, todo


def plan_rounds(todo: Sequence[list[LogTurn]], keys: Sequence[str]
                ) -> Iterator[tuple[str, str, int, list[Turn]]]:
    """Each round of the sessions to import: (checkpoint key, session id, time, turns as
    the extractor sees them: redacted, empty ones left out)."""
    for key, ts in zip(keys, todo, strict=True):
        for r in _rounds(ts):
            sid = r[0].session_id
            yield key, sid, max(t.ts_ms for t in r), _turns(r)


def _turns(turns: list[LogTurn]) -> list[Turn]:
    sid = turns[0].session_id
    return [Turn(f"{sid}:{t.turn_id}", t.role, redact(t.content)) for t in turns
            if t.content.strip()]


def build_unit(turns: Iterable[LogTurn], *, infer: bool, extractor: Extractor | None,
               done: frozenset[str], reply_chars: int = 300) -> Unit | None:
    """One user's unit from their turns; None when every session is already imported."""
    keys, todo = sessions_todo(turns, done)
    if not keys:
        return None
    user_id = todo[0][0].user_id
    unit: Unit = {"user_id": user_id, "sessions": keys,
                  "turns": sum(len(ts) for ts in todo)}
    if infer:
        assert extractor is not None
        unit["rounds"] = sorted((_extract(r, extractor) for ts in todo for r in _rounds(ts)),
                                key=lambda r: (r["ts_ms"], r["session_id"]))
    else:
        unit["items"] = [item for ts in todo for item in _items(user_id, ts, reply_chars)]
    return unit


def _items(user_id: str, turns: list[LogTurn], reply_chars: int) -> list[dict[str, Any]]:
    """A session's user turns as verbatim memories, each with the turn it answers when
    that is another party's (as `Memory.add` does: core/messages.py)."""
    out, previous = [], ""
    for t in turns:
        text = redact(t.content.strip())
        if not text:
            continue
        if t.role == "user":
            reply = " ".join(previous.split())[:reply_chars] if reply_chars else ""
            out.append({"id": stable_id(t.ts_ms, user_id, t.session_id, t.turn_id),
                        "text": text, "session_id": t.session_id, "turn_id": t.turn_id,
                        "ts_ms": t.ts_ms, "reply_to": reply})
        previous = "" if t.role == "user" else text
    return out


def _extract(turns: list[LogTurn], extractor: Extractor) -> dict[str, Any]:
    sid = turns[0].session_id
    found: Extraction = extractor.extract(_turns(turns), [])
    return {"session_id": sid, "ts_ms": max(t.ts_ms for t in turns),
            "facts": [fact_json(f) for f in found.facts],
            "forgets": [asdict(g) for g in found.forgets]}


def unit_texts(unit: Unit) -> list[str]:
    """The texts to embed for a unit, in the order the writer expects the vectors."""
    if "items" in unit:
        return [message_index_text(i["text"], at_ms(int(i["ts_ms"])), i.get("reply_to", ""))
                for i in unit["items"]]
    return [f["content"] for r in unit["rounds"] for f in r["facts"]]

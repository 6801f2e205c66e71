"""`memray bench locomo`: the LoCoMo retrieval benchmark through the public API.

Each conversation is one user. `turns` stores every turn with `add(infer=False)`;
`observations` stores the dataset's LLM-written observations. Each question (category 5,
adversarial, excluded) is searched with `top_k=max(k)` and no threshold (with `relevance`,
with the relevance decision, as an agent searches); a hit counts when
its `dia_id` is one of the question's evidence turns. Metrics per category and overall:
recall@k (share of evidence turns found, averaged over questions), all@k (every evidence
turn found), MRR (1 / rank of the first evidence hit). A conversation with `asked_at` (a
LoCoMo date) has its questions asked then ("last week" counts from it); else now.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from memray.config import MemoryConfig
from memray.core.memory import Memory
from memray.core.when import named_dates
from memray.embed.base import Embedder
from memray.models import SearchHit, content_hash, utcnow

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
Mode = Literal["turns", "observations"]


@dataclass(frozen=True)
class LocomoArgs:
    data: str
    mode: Mode = "turns"
    ks: tuple[int, ...] = (5, 10, 20)
    config: dict[str, Any] = field(default_factory=dict)  # MemoryConfig overrides
    times: bool = True  # pass each session's date as the messages' timestamp
    conversations: tuple[str, ...] = ()  # only these sample ids (default: all)
    every: int = 1  # only every Nth question of each conversation
    relevance: bool = False  # the relevance decision on (default: threshold -1, ranking only)


@dataclass
class Scores:
    """Running sums per category."""

    n: int = 0
    recall: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    all_found: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    session: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    rr: float = 0.0
    returned: int = 0  # hits, all questions

    def add(self, hits: list[tuple[str, ...]], evidence: set[str], ks: Iterable[int]) -> None:
        """`hits`: the dia ids each recalled memory cites, best first."""
        self.n += 1
        self.returned += len(hits)
        sessions = {_session(d) for d in evidence}
        for k in ks:
            found = evidence & {d for ids in hits[:k] for d in ids}
            self.recall[k] += len(found) / len(evidence)
            self.all_found[k] += float(found == evidence)
            self.session[k] += float(bool(sessions & {_session(d) for ids in hits[:k]
                                                      for d in ids}))
        rank = next((i for i, ids in enumerate(hits, 1) if evidence & set(ids)), None)
        self.rr += 1 / rank if rank else 0.0

    def summary(self, ks: Iterable[int]) -> dict[str, float]:
        n = max(self.n, 1)
        out: dict[str, float] = {"n": self.n}
        for k in ks:
            out[f"recall@{k}"] = round(self.recall[k] / n, 4)
            out[f"all@{k}"] = round(self.all_found[k] / n, 4)
        for k in ks:
            out[f"session@{k}"] = round(self.session[k] / n, 4)
        out["mrr"] = round(self.rr / n, 4)
        out["returned"] = round(self.returned / n, 2)  # per question: < k with --relevance
        return out


def _session(dia_id: str) -> str:
    """'D3:5' -> 'D3': the session a turn belongs to."""
    return dia_id.split(":", maxsplit=1)[0]


Session = tuple[str, datetime | None, list[tuple[tuple[str, ...], str]]]


def sessions(conv: dict[str, Any], mode: Mode) -> list[Session]:
    """(session key, its time, [(dia_ids, text)]) per session of one conversation, in order.
    Turns are "Speaker: text" (with the caption of a shared photo); observations are the
    dataset's LLM-written facts, one pseudo-session without a time."""
    if mode == "observations":
        return [("observations", None, [(_ids(dia), fact) for session in
                                         conv["observation"].values()
                                         for facts in session.values() for fact, dia in facts])]
    c = conv["conversation"]
    out: list[Session] = []
    for key in sorted((k for k in c if re.fullmatch(r"session_\d+", k)),
                      key=lambda k: int(k.split("_")[1])):
        items: list[tuple[tuple[str, ...], str]] = []
        for turn in c[key]:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            items.append(((str(turn["dia_id"]),), text))
        out.append((key, session_time(str(c.get(f"{key}_date_time", ""))), items))
    return out


def session_time(value: str) -> datetime | None:
    """LoCoMo's '1:56 pm on 8 May, 2023' (or a bare '8 May 2023') as a UTC datetime."""
    text = " ".join(value.replace(",", " ").split())
    for fmt in ("%I:%M %p on %d %B %Y", "%d %B %Y", "%Y-%m-%d"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def _asked_at(conv: dict[str, Any]) -> datetime | None:
    if "asked_at" not in conv:
        return None
    at = session_time(str(conv["asked_at"]))
    if at is None:
        raise ValueError(f"{conv['sample_id']}: asked_at {conv['asked_at']!r} is no date")
    return at


def _ids(value: str | list[str]) -> tuple[str, ...]:
    """Dia ids from 'D1:3', 'D1:3; D1:4' or a list of those."""
    items = [value] if isinstance(value, str) else value
    return tuple(x.strip() for item in items for x in re.split(r"[;,\s]+", item) if x.strip())


def evidence_ids(qa: dict[str, Any]) -> set[str]:
    """The dia ids that hold the answer to a question."""
    return set(_ids(qa.get("evidence", [])))



def run(args: LocomoArgs, *, embedder: Embedder | None = None,
        rerank: Callable[[str, list[SearchHit]], list[SearchHit]] | None = None,
        progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Scores per category, and per "conversation/category" (`per_conversation`, for
    cross-validation). `rerank`: reorders each question's hits (bench/rerank.py)."""
    if args.every < 1:
        raise ValueError("every is at least 1")
    conversations = json.loads(Path(args.data).read_text(encoding="utf-8"))
    if args.conversations:
        conversations = [c for c in conversations if c["sample_id"] in args.conversations]
    per_cat: dict[str, Scores] = defaultdict(Scores)
    per_conv: dict[str, Scores] = defaultdict(Scores)
    with tempfile.TemporaryDirectory(prefix="memray-locomo-") as tmp:
        cfg = MemoryConfig.model_validate({"data_dir": tmp, "max_messages": 5000,
                                           **args.config})
        asked: list[datetime | None] = [None]  # when this conversation's questions are asked
        with Memory(cfg, embedder=embedder, clock=lambda: asked[0] or utcnow()) as m:
            for conv in conversations:
                user = conv["sample_id"]
                asked[0] = _asked_at(conv)
                cites = _store(m, user, sessions(conv, args.mode), args.times,
                               by_speaker=args.mode == "turns")
                questions = [q for q in conv["qa"] if q.get("category") in CATEGORIES]
                questions = questions[::args.every]
                for qa in questions:
                    evidence = evidence_ids(qa)
                    if not evidence:
                        continue
                    hits = m.search(str(qa["question"]), user_id=user, top_k=max(args.ks),
                                    threshold=None if args.relevance else -1.0)
                    if rerank is not None:
                        hits = rerank(str(qa["question"]), hits)
                    cited = [cites.get(h.memory.content_hash, ()) for h in hits]
                    dated = ("names a date",) if named_dates(str(qa["question"])) else ()
                    for name in (CATEGORIES[qa["category"]], "overall", *dated):
                        per_cat[name].add(cited, evidence, args.ks)
                        per_conv[f"{user}/{name}"].add(cited, evidence, args.ks)
                progress(f"{user}: {sum(len(v) for v in cites.values())} turns, "
                         f"{len(questions)} questions")
    return {"mode": args.mode, "conversations": len(conversations),
            "results": {name: s.summary(args.ks) for name, s in sorted(per_cat.items())},
            "per_conversation": {u: s.summary(args.ks) for u, s in sorted(per_conv.items())}}


def _store(m: Memory, user: str, convo: list[Session], times: bool,
           by_speaker: bool = True) -> dict[str, tuple[str, ...]]:
    """Each session through the public `add`, once per speaker: that speaker's turns as
    the user's, the other's as the other party's, so each turn is kept with the turn it
    answers and the session's time; content hash -> the dia ids."""
    cites: dict[str, tuple[str, ...]] = defaultdict(tuple)
    for key, when, items in convo:
        speakers = dict.fromkeys(_speaker(text) for _, text in items) if by_speaker else {}
        for speaker in speakers or [None]:
            for i in range(0, len(items), 500):
                chunk = items[i:i + 500]
                m.add([{"role": "user" if speaker in (None, _speaker(text)) else "assistant",
                        "content": text} for _, text in chunk], user_id=user,
                      session_id=key, infer=False, timestamp=when if times else None)
        for ids, text in items:
            cites[content_hash(text.strip())] += ids
    return cites


def _speaker(text: str) -> str:
    return text.split(":", maxsplit=1)[0]


def table(result: dict[str, Any]) -> str:
    rows = result["results"]
    cols = [c for c in next(iter(rows.values())) if c != "n"]
    lines = ["| category | n | " + " | ".join(cols) + " |",
             "|---|---|" + "---|" * len(cols)]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['n']} | " + " | ".join(f"{r[c]:.3f}" for c in cols) + " |")
    return "\n".join(lines)

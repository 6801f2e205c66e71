"""`memray bench locomo`: the LoCoMo retrieval benchmark through the public API.

Each conversation is one user. `turns` stores every turn with `add(infer=False)`;
`observations` stores the dataset's LLM-written observations. Each question (category 5,
adversarial, excluded) is searched with `top_k=max(k)` and no threshold; a hit counts when
its `dia_id` is one of the question's evidence turns. Metrics per category and overall:
recall@k (share of evidence turns found, averaged over questions), all@k (every evidence
turn found), MRR (1 / rank of the first evidence hit).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from memray.config import MemoryConfig
from memray.core.memory import Memory
from memray.embed.base import Embedder

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
Mode = Literal["turns", "observations"]


@dataclass(frozen=True)
class LocomoArgs:
    data: str
    mode: Mode = "turns"
    ks: tuple[int, ...] = (5, 10, 20)
    recall: dict[str, Any] = field(default_factory=dict)  # RecallConfig overrides
    dates: bool = False  # prefix each turn with its session's date
    context: int = 0  # characters of the previous turn stored with each turn


@dataclass
class Scores:
    """Running sums per category."""

    n: int = 0
    recall: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    all_found: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    rr: float = 0.0

    def add(self, hits: list[tuple[str, ...]], evidence: set[str], ks: Iterable[int]) -> None:
        """`hits`: the dia ids each recalled memory cites, best first."""
        self.n += 1
        for k in ks:
            found = evidence & {d for ids in hits[:k] for d in ids}
            self.recall[k] += len(found) / len(evidence)
            self.all_found[k] += float(found == evidence)
        rank = next((i for i, ids in enumerate(hits, 1) if evidence & set(ids)), None)
        self.rr += 1 / rank if rank else 0.0

    def summary(self, ks: Iterable[int]) -> dict[str, float]:
        n = max(self.n, 1)
        out: dict[str, float] = {"n": self.n}
        for k in ks:
            out[f"recall@{k}"] = round(self.recall[k] / n, 4)
            out[f"all@{k}"] = round(self.all_found[k] / n, 4)
        out["mrr"] = round(self.rr / n, 4)
        return out


def memories(conv: dict[str, Any], mode: Mode, dates: bool = False,
             context: int = 0) -> list[tuple[tuple[str, ...], str]]:
    """(dia_ids, text) pairs to store for one conversation; `dates` prefixes each turn
    with its session's date ("[8 May, 2023] ..."); `context` > 0 appends that many
    characters of the turn it answers ("(replying to Mel: ...)")."""
    if mode == "observations":
        return [(_ids(dia), fact) for session in conv["observation"].values()
                for facts in session.values() for fact, dia in facts]
    c = conv["conversation"]
    out: list[tuple[tuple[str, ...], str]] = []
    for key in sorted((k for k in c if re.fullmatch(r"session_\d+", k)),
                      key=lambda k: int(k.split("_")[1])):
        when = str(c.get(f"{key}_date_time", "")).split(" on ")[-1]
        previous = None
        for turn in c[key]:
            text = f"{turn['speaker']}: {turn['text']}"
            if dates and when:
                text = f"[{when}] {text}"
            if context and previous is not None:
                text += f" (replying to {previous['speaker']}: {previous['text'][:context]})"
            previous = turn
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            out.append(((turn["dia_id"],), text))
    return out


def _ids(value: str | list[str]) -> tuple[str, ...]:
    """Dia ids from 'D1:3', 'D1:3; D1:4' or a list of those."""
    items = [value] if isinstance(value, str) else value
    return tuple(x.strip() for item in items for x in re.split(r"[;,\s]+", item) if x.strip())


def evidence_ids(qa: dict[str, Any]) -> set[str]:
    """The dia ids that hold the answer to a question."""
    return set(_ids(qa.get("evidence", [])))



def run(args: LocomoArgs, *, embedder: Embedder | None = None,
        progress: Callable[[str], None] = print) -> dict[str, Any]:
    conversations = json.loads(Path(args.data).read_text(encoding="utf-8"))
    per_cat: dict[str, Scores] = defaultdict(Scores)
    with tempfile.TemporaryDirectory(prefix="memray-locomo-") as tmp:
        cfg = MemoryConfig.model_validate({"data_dir": tmp, "max_messages": 5000,
                                           "recall": args.recall})
        with Memory(cfg, embedder=embedder) as m:
            for conv in conversations:
                user = conv["sample_id"]
                items = memories(conv, args.mode, dates=args.dates, context=args.context)
                for i in range(0, len(items), 500):
                    chunk = items[i:i + 500]
                    m.add([{"role": "user", "content": text} for _, text in chunk],
                          user_id=user, infer=False)
                by_text: dict[str, tuple[str, ...]] = defaultdict(tuple)
                for ids, text in items:
                    by_text[text.strip()] += ids
                questions = [q for q in conv["qa"] if q.get("category") in CATEGORIES]
                for qa in questions:
                    evidence = evidence_ids(qa)
                    if not evidence:
                        continue
                    hits = m.search(str(qa["question"]), user_id=user, top_k=max(args.ks),
                                    threshold=-1.0)
                    cited = [by_text.get(h.memory.content, ()) for h in hits]
                    for name in (CATEGORIES[qa["category"]], "overall"):
                        per_cat[name].add(cited, evidence, args.ks)
                progress(f"{user}: {len(items)} memories, {len(questions)} questions")
    return {"mode": args.mode, "conversations": len(conversations),
            "results": {name: s.summary(args.ks) for name, s in sorted(per_cat.items())}}


def table(result: dict[str, Any]) -> str:
    rows = result["results"]
    cols = [c for c in next(iter(rows.values())) if c != "n"]
    lines = ["| category | n | " + " | ".join(cols) + " |",
             "|---|---|" + "---|" * len(cols)]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['n']} | " + " | ".join(f"{r[c]:.3f}" for c in cols) + " |")
    return "\n".join(lines)

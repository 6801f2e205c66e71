"""`python -m memray.bench.extraction [SET.jsonl]`: the extraction benchmark.

A labelled set of short conversations (tests/data/extraction/, see its README) is replayed
through the public write path: each conversation is one user of a fresh in-process
`Memory` (embedded default in a temporary directory, the default extractor), each line one
round (the user's turn, then an assistant "OK."). What the round's events say was kept is
compared with what a careful human would keep from that turn (`expect`).

- Facts: an expected fact matches a kept one when the slot family (the slot before ':')
  is the same and the expected `object`, if any, is contained (case-folded) in the kept
  memory's slot or content. Precision / recall / F1 per slot family, per language, overall.
- Ops: for each matched fact, the op the round produced for it: ADD (a new memory), UPDATE
  (a new memory that superseded another, or a confirmation that superseded one), NOOP (an
  existing memory confirmed or left as is). DELETE: each live (active or candidate) memory
  a forget removed, matched to the expected deletions like facts (superseded history that
  a forget also purges is not counted).
- Hedging: a new memory from a fact labelled hedged should enter as a candidate, any other
  as active.
- PII: no string a line lists under `pii` may appear anywhere in the user's export
  (memories and their history) once the conversation is over.

Usage: `python -m memray.bench.extraction [SET.jsonl] [--json] [--extractor rules|local|
rules+llm] [--llm-url URL --llm-model NAME] [--every K]` (the rules: about a minute on 2
cores; an LLM on a CPU: seconds per round). `rules+llm` is what ships with an endpoint
(`write.extractor: llm`: the rules in front for commands and PII, the LLM for facts and
ops); `local` is the same with the packaged model in process. `--every K` keeps every K-th
conversation (a smaller, still mixed, sample). Each round's latency (the whole `add`) and,
for an LLM, its tokens are reported.
Leave MEMRAY_MILVUS_URI / MEMRAY_POSTGRES_DSN unset: like every `Memory`, the bench follows
them, and it is meant for the embedded default.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memray.config import MemoryConfig
from memray.core.memory import Memory
from memray.embed.base import Embedder
from memray.errors import ExtractionError
from memray.models import MemoryEvent, MemoryRecord, MemoryStatus

DEFAULT_SET = Path(__file__).resolve().parents[2] / "tests/data/extraction/conversations.jsonl"
OPS = ("ADD", "UPDATE", "NOOP", "DELETE")
FAMILIES = ("name", "age", "birthday", "city", "hometown", "job", "family", "availability",
            "diet", "task", "like", "dislike", "routine", "learning", "pet", "own", "hobby")
_LIVE = (MemoryStatus.ACTIVE, MemoryStatus.CANDIDATE)


def family(slot: str | None) -> str:
    """"like:jazz" -> "like"; a memory without a slot -> "none"."""
    return (slot or "none").split(":", 1)[0] or "none"


@dataclass(frozen=True)
class Kept:
    """What one round kept, from its events: a fact (op ADD / UPDATE / NOOP) or a deletion."""

    family: str
    slot: str | None
    content: str
    type: str
    op: str
    status: str

    def label(self) -> str:
        return f"{self.op} {self.slot} [{self.status}] {self.content[:60]!r}"


def kept_from_events(events: Iterable[MemoryEvent]) -> list[Kept]:
    """One `Kept` per fact the round resolved, and one per live memory a forget deleted.

    Resolution emits a superseded copy (UPDATE) of each memory a fact replaces just before
    the fact's own event (ADD, or a confirmation); those fold into the fact's op."""
    out: list[Kept] = []
    superseded = False
    for e in events:
        rec = e.memory or e.previous
        if rec is None:
            continue
        if e.op == "DELETE":
            if e.previous is not None and e.previous.status in _LIVE:
                out.append(Kept(family(rec.slot), rec.slot, rec.content, rec.type.value,
                                "DELETE", rec.status.value))
            continue
        if e.op == "UPDATE" and rec.status == MemoryStatus.SUPERSEDED:
            superseded = True
            continue
        if e.op == "ADD":
            op = "UPDATE" if superseded else "ADD"
        elif e.op == "UPDATE":  # a confirmation
            op = "UPDATE" if superseded else "NOOP"
        else:
            op = "NOOP"
        superseded = False
        out.append(Kept(family(rec.slot), rec.slot, rec.content, rec.type.value, op,
                        rec.status.value))
    return out


def _contains(obj: str, kept: Kept) -> bool:
    key = obj.casefold()
    return key in (kept.slot or "").casefold() or key in kept.content.casefold()


def matches(e: dict[str, Any], kept: Kept) -> bool:
    """Whether a kept fact (or deletion) is the expected one. A fact: same slot family and
    the object, if any, in its slot or content. A deletion with an object: any deleted
    memory about that object, whatever slot it was filed under (the question is whether
    the memory is gone); without an object, the family decides."""
    if (kept.op == "DELETE") != (e["op"] == "DELETE"):
        return False
    if e["op"] == "DELETE" and "object" in e:
        return _contains(str(e["object"]), kept)
    return kept.family == family(str(e["slot"])) and (
        "object" not in e or _contains(str(e["object"]), kept))


def match(expect: list[dict[str, Any]], kept: list[Kept]
          ) -> tuple[list[tuple[dict[str, Any], Kept]], list[dict[str, Any]], list[Kept]]:
    """Greedy one-to-one matching: (pairs, missed, extra). Expected items with an object
    are matched first (they are the pickier ones)."""
    free = list(kept)
    pairs, missed = [], []
    for e in sorted(expect, key=lambda e: "object" not in e):
        found = next((k for k in free if matches(e, k)), None)
        if found is None:
            missed.append(e)
        else:
            free.remove(found)
            pairs.append((e, found))
    return pairs, missed, free


def as_deleted(record: MemoryRecord) -> Kept:
    """A live memory as the deletion that would remove it (to ask whether it was there)."""
    return Kept(family(record.slot), record.slot, record.content, record.type.value,
                "DELETE", record.status.value)


@dataclass
class Counts:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    op_ok: int = 0
    type_ok: int = 0

    def add(self, other: Counts) -> None:
        self.tp += other.tp
        self.fp += other.fp
        self.fn += other.fn
        self.op_ok += other.op_ok
        self.type_ok += other.type_ok

    def summary(self) -> dict[str, float]:
        p = self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0
        r = self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        return {"expected": self.tp + self.fn, "kept": self.tp + self.fp, "tp": self.tp,
                "precision": round(p, 4), "recall": round(r, 4), "f1": round(f1, 4),
                "op_accuracy": round(self.op_ok / self.tp, 4) if self.tp else 0.0,
                "type_accuracy": round(self.type_ok / self.tp, 4) if self.tp else 0.0}


@dataclass
class Tally:
    """Running counts for one run: facts per family and language, deletions, ops, hedging."""

    families: dict[str, Counts] = field(default_factory=lambda: defaultdict(Counts))
    languages: dict[str, Counts] = field(default_factory=lambda: defaultdict(Counts))
    lang_deletes: dict[str, Counts] = field(default_factory=lambda: defaultdict(Counts))
    facts: Counts = field(default_factory=Counts)
    deletes: Counts = field(default_factory=Counts)
    ops: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    hedge: Counter[str] = field(default_factory=Counter)
    empty_turns: int = 0
    empty_clean: int = 0
    unstored: int = 0  # expected deletions of memories that were never stored
    pii_checked: int = 0
    pii_leaks: list[str] = field(default_factory=list)  # PII found in what was stored

    def add_turn(self, row: dict[str, Any], kept: list[Kept],
                 live: list[Kept] | None = None) -> dict[str, Any]:
        """`live`: the user's live memories before the turn (as deletions), to tell a
        forget that missed a memory from a memory that was never stored."""
        expect: list[dict[str, Any]] = row["expect"]
        pairs, missed, extra = match(expect, kept)
        lang = str(row["lang"])
        if not expect:
            self.empty_turns += 1
            self.empty_clean += not kept
        for e, k in pairs:
            c = Counts(tp=1, op_ok=int(e["op"] == k.op), type_ok=int(e["type"] == k.type))
            self._count(e, c, lang)
            self.ops[str(e["op"])][k.op] += 1
            if k.op in ("ADD", "UPDATE"):  # a new memory: its status says if it was hedged
                hedged = bool(e.get("hedged", row.get("hedged", False)))
                candidate = k.status == MemoryStatus.CANDIDATE.value
                key = "hedged" if hedged else "plain"
                self.hedge[f"{key}_n"] += 1
                self.hedge[f"{key}_ok"] += int(candidate == hedged)
        for e in missed:
            self._count(e, Counts(fn=1), lang)
            self.ops[str(e["op"])]["missed"] += 1
            if e["op"] == "DELETE" and not any(matches(e, k) for k in live or ()):
                self.unstored += 1
        for k in extra:
            fam = "delete" if k.op == "DELETE" else k.family
            c = Counts(fp=1)
            (self.deletes if k.op == "DELETE" else self.facts).add(c)
            (self.lang_deletes if k.op == "DELETE" else self.languages)[lang].add(c)
            if k.op != "DELETE":
                self.families[fam].add(c)
        return {"conv": row["conv"], "lang": lang, "turn": row["turn"],
                "expected": [_expect_label(e) for e in expect],
                "got": [k.label() for k in kept],
                "missed": [_expect_label(e) for e in missed],
                "extra": [k.label() for k in extra],
                "wrong_op": [f"{_expect_label(e)} -> {k.op}" for e, k in pairs
                             if e["op"] != k.op]}

    def _count(self, e: dict[str, Any], c: Counts, lang: str) -> None:
        if e["op"] == "DELETE":
            self.deletes.add(c)
            self.lang_deletes[lang].add(c)
        else:
            self.facts.add(c)
            self.languages[lang].add(c)
            self.families[family(str(e["slot"]))].add(c)

    def result(self) -> dict[str, Any]:
        ops: dict[str, dict[str, Any]] = {}
        for op, c in sorted(self.ops.items()):
            n = sum(c.values()) - c["missed"]
            ops[op] = {"n": n, "correct": c[op], "missed": c["missed"], "got": dict(c),
                       "accuracy": round(c[op] / n, 4) if n else 0.0}
        h = self.hedge
        return {
            "families": {f: self.families[f].summary() for f in sorted(self.families)},
            "languages": {lang: {"facts": self.languages[lang].summary(),
                                 "deletes": self.lang_deletes[lang].summary()}
                          for lang in sorted(self.languages)},
            "overall": self.facts.summary(),
            "deletes": self.deletes.summary() | {"missed_never_stored": self.unstored},
            "ops": ops,
            "hedging": {"hedged": h["hedged_n"], "hedged_to_candidate": _ratio(h, "hedged"),
                        "plain": h["plain_n"], "plain_to_active": _ratio(h, "plain")},
            "pii": {"checked": self.pii_checked, "leaks": self.pii_leaks},
            "nothing_to_keep": {"turns": self.empty_turns, "kept_nothing": self.empty_clean,
                                "accuracy": round(self.empty_clean / self.empty_turns, 4)
                                if self.empty_turns else 1.0},
        }


def _ratio(c: Counter[str], key: str) -> float:
    return round(c[f"{key}_ok"] / c[f"{key}_n"], 4) if c[f"{key}_n"] else 0.0


def _expect_label(e: dict[str, Any]) -> str:
    obj = f" {e['object']}" if "object" in e else ""
    return f"{e['op']} {e['slot']}{obj}"


def load(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """The set's lines grouped by conversation, in file order."""
    convs: dict[str, list[dict[str, Any]]] = {}
    with Path(path).open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                convs.setdefault(str(row["conv"]), []).append(row)
    return convs


def _default_embedder() -> Embedder:
    from memray.embed.cache import CachedEmbedder
    from memray.embed.sentence import SentenceTransformerEmbedder

    embedder = CachedEmbedder(SentenceTransformerEmbedder())
    embedder.open()
    return embedder


def run(path: str | Path = DEFAULT_SET, *, progress: Callable[[str], None] | None = None,
        embedder: Embedder | None = None, config: dict[str, Any] | None = None,
        every: int = 1) -> dict[str, Any]:
    """Replay every conversation of the set (or every `every`-th); `config`: MemoryConfig
    overrides (e.g. the write section). One embedder (the bundled model, cached) serves
    all conversations."""
    convs = load(path)
    convs = {c: rows for i, (c, rows) in enumerate(convs.items()) if i % every == 0}
    emb = embedder or _default_embedder()
    try:
        return _run(convs, path, emb, progress, config or {})
    finally:
        if embedder is None:
            emb.close()


def _run(convs: dict[str, list[dict[str, Any]]], path: str | Path, emb: Embedder,
         progress: Callable[[str], None] | None, config: dict[str, Any]) -> dict[str, Any]:
    from memray.extract.llm import TOTAL

    tally = Tally()
    turns: list[dict[str, Any]] = []
    rounds: list[dict[str, float]] = []
    failures: list[str] = []
    started = time.perf_counter()
    for conv, rows in convs.items():
        with tempfile.TemporaryDirectory(prefix="memray-xbench-") as tmp:
            cfg = MemoryConfig.model_validate({**config, "data_dir": tmp})
            with Memory(cfg, embedder=emb) as m:
                for i, row in enumerate(rows):
                    live = None
                    if any(e["op"] == "DELETE" for e in row["expect"]):
                        live = [as_deleted(r) for r in
                                m.get_all(user_id=f"u-{conv}", limit=1000).items
                                if r.status in _LIVE]
                    before = (time.perf_counter(), TOTAL.calls, TOTAL.prompt_tokens,
                                  TOTAL.completion_tokens, TOTAL.cached_tokens)
                    try:
                        events = m.add([{"role": "user", "content": row["turn"]},
                                        {"role": "assistant", "content": "OK."}],
                                       user_id=f"u-{conv}", session_id=f"{conv}-s{i}").events
                    except ExtractionError as exc:  # counted; its turns wait in the log
                        failures.append(f"{conv}#{i}: {exc}")
                        events = []
                    rounds.append({"seconds": time.perf_counter() - before[0],
                                   "calls": TOTAL.calls - before[1],
                                   "prompt_tokens": TOTAL.prompt_tokens - before[2],
                                   "completion_tokens": TOTAL.completion_tokens - before[3],
                                   "cached_tokens": TOTAL.cached_tokens - before[4]})
                    turns.append(tally.add_turn(row, kept_from_events(events), live))
                dump = json.dumps(list(m.export(user_id=f"u-{conv}")), ensure_ascii=False,
                                  default=str)
                secrets = [p for row in rows for p in row.get("pii", ())]
                tally.pii_checked += len(secrets)
                tally.pii_leaks += [f"{conv}: {p}" for p in secrets if p in dump]
        if progress is not None:
            progress(f"{conv}: {len(rows)} turns")
    out = tally.result()
    out |= {"set": str(path), "conversations": len(convs), "turns": len(turns),
            "seconds": round(time.perf_counter() - started, 1), "per_turn": turns,
            "rounds": _round_costs(rounds), "failed_rounds": failures}
    return out


def _round_costs(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Latency per round (p50/p95, seconds) and mean tokens per round."""
    if not rounds:
        return {}
    lat = sorted(r["seconds"] for r in rounds)
    n = len(rounds)
    out = {"p50_s": round(lat[n // 2], 3), "p95_s": round(lat[min(n - 1, int(n * 0.95))], 3)}
    for key in ("calls", "prompt_tokens", "completion_tokens", "cached_tokens"):
        out[f"{key}_per_round"] = round(sum(r[key] for r in rounds) / n, 1)
    return out


def _pct(x: float) -> str:
    return f"{x:.3f}"


def table(result: dict[str, Any]) -> str:
    """Markdown: facts per slot family and per language, deletions, ops, hedging."""
    head = ("| {} | expected | kept | matched | precision | recall | F1 | op acc. | "
            "type acc. |\n|---|---|---|---|---|---|---|---|---|")

    def row(name: str, s: dict[str, float]) -> str:
        return (f"| {name} | {s['expected']} | {s['kept']} | {s['tp']} | "
                f"{_pct(s['precision'])} | {_pct(s['recall'])} | {_pct(s['f1'])} | "
                f"{_pct(s['op_accuracy']) if s['tp'] else '-'} | "
                f"{_pct(s['type_accuracy']) if s['tp'] else '-'} |")

    lines = [head.format("slot family")]
    lines += [row(f, s) for f, s in result["families"].items()]
    lines.append(row("**all facts**", result["overall"]))
    lines.append(row("forget (DELETE)", result["deletes"]))
    lines += ["", head.format("language")]
    for lang, s in result["languages"].items():
        lines.append(row(f"{lang} facts", s["facts"]))
        lines.append(row(f"{lang} deletes", s["deletes"]))
    lines += ["", "| expected op | matched | op correct | accuracy | missed | got |",
              "|---|---|---|---|---|---|"]
    for op, o in result["ops"].items():
        got = ", ".join(f"{k} {v}" for k, v in sorted(o["got"].items()) if k != "missed")
        lines.append(f"| {op} | {o['n']} | {o['correct']} | {_pct(o['accuracy'])} | "
                     f"{o['missed']} | {got} |")
    h, e = result["hedging"], result["nothing_to_keep"]
    lines += ["", "| check | n | accuracy |", "|---|---|---|",
              f"| hedged fact -> candidate | {h['hedged']} | {_pct(h['hedged_to_candidate'])} |",
              f"| plain fact -> active | {h['plain']} | {_pct(h['plain_to_active'])} |",
              f"| nothing to keep -> nothing kept | {e['turns']} | {_pct(e['accuracy'])} |",
              f"| PII strings never stored | {result['pii']['checked']} | "
              f"{_pct(1 - len(result['pii']['leaks']) / max(result['pii']['checked'], 1))} |",
              f"| expected deletion of a memory never stored | "
              f"{result['deletes']['missed_never_stored']} | - |"]
    return "\n".join(lines)


def extractor_config(kind: str, url: str | None, model: str | None) -> dict[str, Any]:
    """The write section for `--extractor`."""
    if kind == "rules":
        return {"write": {"extractor": "rules"}}
    if kind == "local":
        return {"write": {"extractor": "local"}}
    if kind == "rules+llm":
        if not url or not model:
            raise SystemExit("--extractor rules+llm needs --llm-url and --llm-model")
        return {"write": {"extractor": "llm", "llm": {
            "base_url": url, "model": model, "timeout_s": 600, "max_retries": 1}}}
    raise SystemExit(f"--extractor must be rules, local or rules+llm, not {kind!r}")


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m memray.bench.extraction")
    p.add_argument("set", nargs="?", default=str(DEFAULT_SET))
    p.add_argument("--json", action="store_true")
    p.add_argument("--extractor", default="rules")
    p.add_argument("--llm-url")
    p.add_argument("--llm-model")
    p.add_argument("--every", type=int, default=1, help="keep every K-th conversation")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    path = args.set
    config = extractor_config(args.extractor, args.llm_url, args.llm_model)
    result = run(path, progress=lambda msg: print(msg, file=sys.stderr), config=config,
                 every=args.every)
    result["extractor"] = args.extractor
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=1))
    else:
        print(table(result))
        print(f"\n{result['turns']} turns, {result['conversations']} conversations, "
              f"{result['seconds']} s; per round: {result['rounds']}; failed rounds: "
              f"{len(result['failed_rounds'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

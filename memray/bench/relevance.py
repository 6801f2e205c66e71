"""`python -m memray.bench.relevance`: is what `search` returns relevant, and is it all?

The labelled set (tests/data/relevance/, synthetic, zh and en) holds cases of one user's
small memory set, a query and the ids of the memories that should come back (possibly
none). Each case is replayed in a fresh in-process `Memory` (embedded milvus-lite in a
temporary dir, one shared cached MiniLM): verbatim memories through `add(text,
infer=False)`, extracted ones through a round (`add([user, assistant])`, the rule
extractor). Then `search` and `context` run with the default `top_k` and threshold.

Figures (overall, per language, per case kind): micro precision (relevant returned /
returned), micro recall (relevant returned / relevant), their F1, `empty_ok` (share of
the cases that should return nothing that do), `missed_all` (share of the cases with
relevant memories that return none of them), `case_f1` (per-case F1, a case that should
return nothing scoring 1 when it does and 0 otherwise, averaged) and, from `context`,
`context_recall` (relevant memories whose text is in the prompt section).

`cross_validate` tunes the given recall knobs on k-1 folds (folds are whole memory sets,
so a user's cases never sit on both sides) by `case_f1`, and reports every held-out
fold and their mean and standard deviation, not the best fold.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memray.config import MemoryConfig, RecallConfig
from memray.core.factory import build_embedder
from memray.core.memory import Memory
from memray.embed.base import Embedder
from memray.embed.cache import CachedEmbedder
from memray.embed.sentence import SentenceTransformerEmbedder

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "tests" / "data" / "relevance" / \
    "cases.jsonl"
MODES = ("verbatim", "extracted")
USER = "relevance-user"
# The knobs the relevance decision introduced, and the values cross-validation tries.
DEFAULT_GRID: dict[str, tuple[Any, ...]] = {
    "threshold": (0.3, 0.35, 0.4, 0.45),
    "intent_min_similarity": (-0.1, 0.0, 0.05, 0.1),
    "keyword_min": (0.5, 1.01),
    "relative_margin": (0.1, 0.2, 0.3, 0.5),
}


@dataclass(frozen=True)
class CaseMemory:
    id: str
    mode: str
    text: str


@dataclass(frozen=True)
class Case:
    id: str
    lang: str
    group: str
    kind: str
    memories: tuple[CaseMemory, ...]
    query: str
    relevant: frozenset[str]


@dataclass(frozen=True)
class Answer:
    """What one configuration returned for one case: case memory ids, best first."""

    case: Case
    returned: tuple[str, ...]
    context_found: frozenset[str] | None = None  # relevant ids whose text is in context


def load(path: str | Path = DEFAULT_PATH) -> list[Case]:
    """The cases of a JSONL file; ValueError names the line of anything malformed."""
    cases: list[Case] = []
    seen: set[str] = set()
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            cases.append(_case(json.loads(line)))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{n}: {exc}") from exc
        if cases[-1].id in seen:
            raise ValueError(f"{path}:{n}: duplicate case id {cases[-1].id}")
        seen.add(cases[-1].id)
    return cases


def _case(raw: dict[str, Any]) -> Case:
    memories = tuple(CaseMemory(str(m["id"]), str(m["mode"]), str(m["text"]))
                     for m in raw["memories"])
    ids = [m.id for m in memories]
    if len(set(ids)) != len(ids):
        raise ValueError("memory ids repeat")
    if any(m.mode not in MODES for m in memories):
        raise ValueError(f"memory mode must be one of {MODES}")
    relevant = frozenset(str(r) for r in raw["relevant"])
    if not relevant <= set(ids):
        raise ValueError(f"relevant ids {sorted(relevant - set(ids))} are not memories")
    if raw["lang"] not in ("en", "zh"):
        raise ValueError("lang must be en or zh")
    return Case(id=str(raw["id"]), lang=raw["lang"], group=str(raw["group"]),
                kind=str(raw["kind"]), memories=memories, query=str(raw["query"]),
                relevant=relevant)


def default_embedder(model: str | None = None) -> Embedder:
    """The configured default model (or `model`), cached, shared by every case."""
    if model is None:
        embedder: Embedder = CachedEmbedder(SentenceTransformerEmbedder())
    else:
        cfg = MemoryConfig.model_validate({"embedder": {"model": model, "share_passes": False,
                                                        "cache_size": 200_000}})
        embedder = build_embedder(cfg)
    embedder.open()
    return embedder


def _fill(mem: Memory, case: Case, user: str) -> tuple[dict[str, str], list[str]]:
    """Store the case's memories as `user`'s; (stored id -> case memory id, setup
    problems)."""
    owner: dict[str, str] = {}
    problems: list[str] = []
    for i, m in enumerate(case.memories):
        if m.mode == "verbatim":
            result = mem.add(m.text, user_id=user, infer=False)
        else:
            result = mem.add([{"role": "user", "content": m.text},
                              {"role": "assistant", "content": "OK."}],
                             user_id=user, session_id=f"s{i}")
        ids = [e.memory_id for e in result.events if e.op in ("ADD", "UPDATE", "NOOP")]
        if not ids:
            problems.append(f"{case.id}/{m.id}: nothing stored from {m.text!r}")
        owner.update(dict.fromkeys(ids, m.id))
    return owner, problems


def replay(cases: Sequence[Case], recalls: Sequence[RecallConfig], *,
           embedder: Embedder | None = None, context: bool = True,
           progress: Callable[[str], None] | None = None,
           ) -> tuple[list[list[Answer]], list[str]]:
    """Every case under every recall config: answers[config][case], setup problems.
    Each case is stored once, as its own user of one fresh `Memory`, and searched once
    per config."""
    embedder = embedder or default_embedder()
    answers: list[list[Answer]] = [[] for _ in recalls]
    problems: list[str] = []
    # One store for every case, a user per case: what a search sees (its candidates, the
    # keyword index, the hot set) is the user's own, and opening a store per case was
    # most of the replay's time.
    with tempfile.TemporaryDirectory(prefix="memray-relevance-") as tmp:
        base = MemoryConfig(data_dir=tmp)
        with Memory(base, embedder=embedder) as mem:
            for n, case in enumerate(cases, 1):
                user = f"{USER}-{n}"
                owner, trouble = _fill(mem, case, user)
                problems += trouble
                stored = mem.get_all(user_id=user).items if context else []
                for slot, recall in enumerate(recalls):
                    mem.config = base.model_copy(update={"recall": recall})
                    hits = mem.search(case.query, user_id=user)
                    returned = tuple(dict.fromkeys(owner.get(h.memory.id, "?") for h in hits))
                    found = None
                    if context:
                        section = mem.context(case.query, user_id=user)
                        found = frozenset(owner[r.id] for r in stored
                                          if owner.get(r.id) in case.relevant
                                          and r.content in section)
                    answers[slot].append(Answer(case, returned, found))
                if progress is not None and n % 20 == 0:
                    progress(f"{n}/{len(cases)} cases")
    return answers, problems


def _ratio(a: float, b: float, empty: float = 1.0) -> float:
    return round(a / b, 4) if b else empty


def score(answers: Iterable[Answer]) -> dict[str, Any]:
    """Precision, recall, F1, empty_ok, missed_all, case_f1 (and context_recall)."""
    tp = returned = relevant = n = empties = empty_ok = with_gold = missed = 0
    case_f1 = ctx_found = ctx_total = 0.0
    for a in answers:
        n += 1
        got = set(a.returned)
        hit = len(got & a.case.relevant)
        tp += hit
        returned += len(got)
        relevant += len(a.case.relevant)
        if not a.case.relevant:
            empties += 1
            empty_ok += not got
            case_f1 += not got
        else:
            with_gold += 1
            missed += hit == 0
            p, r = (hit / len(got) if got else 0.0), hit / len(a.case.relevant)
            case_f1 += 2 * p * r / (p + r) if p + r else 0.0
        if a.context_found is not None:
            ctx_found += len(a.context_found)
            ctx_total += len(a.case.relevant)
    precision, recall = _ratio(tp, returned), _ratio(tp, relevant)
    out: dict[str, Any] = {
        "cases": n, "precision": precision, "recall": recall,
        "f1": round(2 * precision * recall / (precision + recall), 4)
        if precision + recall else 0.0,
        "empty_ok": _ratio(empty_ok, empties), "missed_all": _ratio(missed, with_gold, 0.0),
        "case_f1": _ratio(case_f1, n, 0.0), "returned_per_case": _ratio(returned, n, 0.0),
    }
    if ctx_total:
        out["context_recall"] = _ratio(ctx_found, ctx_total)
    return out


def report(answers: Sequence[Answer]) -> dict[str, Any]:
    """`score` overall, per language and per case kind."""
    out: dict[str, Any] = {"overall": score(answers)}
    for key in ("lang", "kind"):
        values = sorted({getattr(a.case, key) for a in answers})
        out[f"by_{key}"] = {v: score(a for a in answers if getattr(a.case, key) == v)
                            for v in values}
    return out


def recall_config(overrides: Mapping[str, Any] | None = None) -> RecallConfig:
    return RecallConfig.model_validate(dict(overrides or {}))


def run(path: str | Path = DEFAULT_PATH, config_overrides: Mapping[str, Any] | None = None,
        *, embedder: Embedder | None = None,
        progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Replay every case under the default recall config (plus `config_overrides`, any
    `RecallConfig` fields) and report its figures; `problems` lists cases whose memories
    could not be stored as written."""
    cases = load(path)
    recall = recall_config(config_overrides)
    answers, problems = replay(cases, [recall], embedder=embedder, progress=progress)
    return {"path": str(path), "recall": recall.model_dump(exclude={"half_life_days"}),
            **report(answers[0]), "problems": problems,
            "failures": [_failure(a) for a in answers[0]
                         if set(a.returned) != a.case.relevant]}


def _failure(a: Answer) -> dict[str, Any]:
    return {"id": a.case.id, "query": a.case.query, "relevant": sorted(a.case.relevant),
            "returned": list(a.returned)}


def folds(cases: Sequence[Case], k: int) -> list[int]:
    """A fold per case: memory sets dealt round-robin per language, so each fold holds
    whole users and both languages."""
    groups: dict[str, list[str]] = {}
    for c in cases:
        groups.setdefault(c.lang, [])
        if c.group not in groups[c.lang]:
            groups[c.lang].append(c.group)
    fold_of = {g: i % k for names in groups.values() for i, g in enumerate(sorted(names))}
    return [fold_of[c.group] for c in cases]


def _grid_points(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    names = list(grid)
    return [dict(zip(names, values, strict=True))
            for values in itertools.product(*(grid[n] for n in names))]


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {"mean": round(statistics.fmean(values), 4),
            "std": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0}


def cross_validate(path: str | Path = DEFAULT_PATH, k: int = 4,
                   grid: Mapping[str, Sequence[Any]] | None = None, *,
                   base: Mapping[str, Any] | None = None, embedder: Embedder | None = None,
                   objective: str = "case_f1",
                   progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """For each of `k` folds: the grid point (over `base` recall overrides) with the best
    `objective` on the other folds, and its figures on the held-out fold. Also the
    defaults' figures per fold, for comparison. Reports mean and std over folds."""
    cases = load(path)
    points = _grid_points(grid if grid is not None else DEFAULT_GRID)
    recalls = [recall_config({**(base or {}), **p}) for p in points]
    defaults = recall_config(base)
    answers, problems = replay(cases, [*recalls, defaults], embedder=embedder,
                               context=False, progress=progress)
    fold_of = folds(cases, k)
    per_fold: list[dict[str, Any]] = []
    for f in range(k):
        train = [i for i, g in enumerate(fold_of) if g != f]
        test = [i for i, g in enumerate(fold_of) if g == f]
        objectives = [score(answers[p][i] for i in train)[objective]
                      for p in range(len(points))]
        best = max(range(len(points)), key=lambda p: (objectives[p], -p))
        per_fold.append({
            "fold": f, "test_cases": len(test), "chosen": points[best],
            "train_" + objective: objectives[best],
            "test": score(answers[best][i] for i in test),
            "test_defaults": score(answers[-1][i] for i in test),
        })
    metrics = ("precision", "recall", "f1", "empty_ok", "case_f1")
    return {
        "path": str(path), "k": k, "objective": objective, "grid": dict(grid or DEFAULT_GRID),
        "base": dict(base or {}), "folds": per_fold,
        "tuned": {m: _spread([f["test"][m] for f in per_fold]) for m in metrics},
        "defaults": {m: _spread([f["test_defaults"][m] for f in per_fold]) for m in metrics},
        "problems": problems,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memray.bench.relevance",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", default=str(DEFAULT_PATH))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                        help="a RecallConfig override, e.g. threshold=0.35 (repeatable)")
    parser.add_argument("--cv", type=int, default=0, metavar="K",
                        help="cross-validate the default grid over K folds instead")
    parser.add_argument("--grid", default=None, help="JSON {knob: [values]} for --cv")
    parser.add_argument("--failures", action="store_true", help="list every wrong case")
    parser.add_argument("--embedder", default=None, metavar="MODEL",
                        help="embedder.model (default: all-MiniLM-L6-v2)")
    args = parser.parse_args(argv)
    embedder = default_embedder(args.embedder)
    overrides = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)}
    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if args.cv:
        grid = json.loads(args.grid) if args.grid else None
        out = cross_validate(args.data, args.cv, grid, base=overrides, embedder=embedder,
                             progress=progress)
    else:
        out = run(args.data, overrides, embedder=embedder, progress=progress)
        if not args.failures:
            out.pop("failures")
    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`memray bench locomo --cv`: cross-validation of the write/recall knobs over conversations.

Each grid point is run once over every conversation (the embeddings are cached between
runs); then for each conversation held out, the grid point with the best recall@10 on the
others (question-weighted) is chosen and scored on the held-out one. The spread over the
folds is what to expect on an unseen conversation; the defaults are scored the same way.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable
from typing import Any

from memray.bench.locomo import LocomoArgs, Mode, run
from memray.config import MemoryConfig
from memray.core.factory import build_embedder

GRID: dict[str, tuple[Any, ...]] = {
    "write.reply_context_chars": (150, 300),
    "recall.w_lexical": (0.2, 0.3, 0.5),
    "recall.session_spread": (0.0, 0.03, 0.08),
}
METRICS = ("overall", "multi-hop", "temporal", "single-hop", "open-domain", "names a date")
K = 10


def _config(point: dict[str, Any], base: dict[str, Any] | None = None) -> dict[str, Any]:
    """`base` (a config dict by section) with the grid point's dotted keys set in it."""
    out: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (base or {}).items()}
    for dotted, value in point.items():
        section, key = dotted.split(".")
        out.setdefault(section, {})[key] = value
    return out


def cross_validate(data: str, *, mode: Mode = "turns",
                   grid: dict[str, tuple[Any, ...]] | None = None,
                   base: dict[str, Any] | None = None,
                   progress: Callable[[str], None] = print) -> dict[str, Any]:
    """`base`: config sections every run starts from (the embedder among them); the
    "defaults" rows are `base` alone."""
    grid = grid or GRID
    base = base or {}
    embedder = build_embedder(MemoryConfig.model_validate(
        {**base, "embedder": {**base.get("embedder", {}), "cache_size": 200_000}}))
    embedder.open()
    points = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]
    runs: list[dict[str, Any]] = []
    default = run(LocomoArgs(data=data, mode=mode, config=_config({}, base)), embedder=embedder,
                  progress=lambda _: None)
    for point in points:
        result = run(LocomoArgs(data=data, mode=mode, config=_config(point, base)),
                     embedder=embedder, progress=lambda _: None)
        runs.append(result["per_conversation"])
        progress(f"{point}: recall@{K} {result['results']['overall'][f'recall@{K}']:.3f}")
    convs = sorted({key.split("/")[0] for key in default["per_conversation"]})
    folds = [_fold(held, convs, points, runs) for held in convs]
    return {"k": K, "grid": {k: list(v) for k, v in grid.items()}, "folds": folds,
            "tuned": _spread([f["held_out"] for f in folds]),
            "defaults": _spread([_scores(default["per_conversation"], c) for c in convs]),
            "defaults_per_conversation": {c: _scores(default["per_conversation"], c)
                                          for c in convs}}


def _fold(held: str, convs: list[str], points: list[dict[str, Any]],
          runs: list[dict[str, Any]]) -> dict[str, Any]:
    def train_score(per_conv: dict[str, Any]) -> float:
        rows = [per_conv[f"{c}/overall"] for c in convs if c != held]
        return float(sum(r[f"recall@{K}"] * r["n"] for r in rows) / sum(r["n"] for r in rows))

    best = max(range(len(points)), key=lambda i: train_score(runs[i]))
    return {"held_out_conversation": held, "chosen": points[best],
            "train_recall": round(train_score(runs[best]), 4),
            "held_out": _scores(runs[best], held)}


def _scores(per_conv: dict[str, Any], conv: str) -> dict[str, float]:
    out = {}
    for metric in METRICS:
        row = per_conv.get(f"{conv}/{metric}")
        if row:
            out[metric] = row[f"recall@{K}"]
    overall = per_conv[f"{conv}/overall"]
    out["session"] = overall[f"session@{K}"]
    return out


def _spread(rows: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    out = {}
    for metric in rows[0]:
        values = [r[metric] for r in rows if metric in r]
        out[metric] = {"mean": round(statistics.mean(values), 4),
                       "std": round(statistics.pstdev(values), 4),
                       "min": round(min(values), 4), "max": round(max(values), 4)}
    return out


def cv_table(cv: dict[str, Any]) -> str:
    k = cv["k"]
    metrics = list(cv["defaults"])
    head = "| | " + " | ".join(f"{m} r@{k}" if m != "session" else f"session@{k}"
                               for m in metrics) + " |"
    lines = [head, "|---|" + "---|" * len(metrics)]
    for fold in cv["folds"]:
        row = fold["held_out"]
        lines.append(f"| held out {fold['held_out_conversation']} (chose {fold['chosen']}) | "
                     + " | ".join(f"{row.get(m, float('nan')):.3f}" for m in metrics) + " |")
    for name in ("tuned", "defaults"):
        s = cv[name]
        lines.append(f"| **{name}**, mean ± std over folds | "
                     + " | ".join(f"{s[m]['mean']:.3f} ± {s[m]['std']:.3f}" for m in metrics)
                     + " |")
    return "\n".join(lines)

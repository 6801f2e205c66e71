"""`memray bench embed`: the embedding runtimes side by side on the same model.

For each runtime (sentence-transformers on torch, ONNX Runtime float, ONNX Runtime int8):
single-query latency (p50/p95 over distinct LoCoMo questions, one call each, no cache),
throughput at batch sizes 1/8/64 (LoCoMo turns, texts/s), the lowest cosine to torch's
vectors on the same questions, and retrieval recall on the LoCoMo development split
(memray/bench/locomo.py, turns mode). Every runtime gets the same intra-op thread count,
and the runtimes take turns in rounds while timed.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memray.bench.locomo import LocomoArgs
from memray.bench.locomo import run as run_locomo
from memray.bench.recall import percentiles
from memray.config import INT8_SUFFIX, MemoryConfig
from memray.core.factory import build_embedder
from memray.embed.base import Embedder

RUNTIMES = ("torch", "onnx", "onnx-int8")
DEV_SPLIT = Path(__file__).parents[2] / "tests" / "data" / "locomo" / "locomo_dev.json"


@dataclass(frozen=True)
class EmbedBenchArgs:
    model: str = "all-MiniLM-L6-v2"
    runtimes: tuple[str, ...] = RUNTIMES
    threads: int = 2
    queries: int = 200
    texts: int = 512  # per batch size
    rounds: int = 5  # the runtimes take turns this many times
    batch_sizes: tuple[int, ...] = (1, 8, 64)
    data: str = str(DEV_SPLIT)
    recall: bool = True


def build(model: str, runtime: str, threads: int) -> Embedder:
    """An uncached embedder of `model` on `runtime` (torch, onnx, onnx-int8)."""
    name = model + INT8_SUFFIX if runtime == "onnx-int8" else model
    cfg = MemoryConfig.model_validate({"embedder": {
        "model": name, "runtime": runtime.removesuffix("-int8"), "threads": threads,
        "cache_size": 0}})
    return build_embedder(cfg)


def corpus(path: str) -> tuple[list[str], list[str]]:
    """(questions, turns) of the LoCoMo file, each distinct, in file order."""
    questions: dict[str, None] = {}
    turns: dict[str, None] = {}
    for conv in json.loads(Path(path).read_text(encoding="utf-8")):
        questions.update({str(qa["question"]): None for qa in conv["qa"]})
        for key, session in conv["conversation"].items():
            if re.fullmatch(r"session_\d+", key):
                turns.update({f"{t['speaker']}: {t['text']}": None for t in session})
    return list(questions), list(turns)


def _single_queries(e: Embedder, queries: Sequence[str]) -> list[float]:
    samples = []
    for q in queries:
        t0 = time.perf_counter()
        e.embed([q])
        samples.append((time.perf_counter() - t0) * 1000)
    return samples


def _batched_s(e: Embedder, texts: Sequence[str], batch: int) -> float:
    """Seconds to embed `texts` in calls of `batch`."""
    t0 = time.perf_counter()
    for i in range(0, len(texts), batch):
        e.embed(list(texts[i:i + batch]))
    return time.perf_counter() - t0


def _timings(args: EmbedBenchArgs, embedders: dict[str, Embedder], questions: list[str],
             turns: list[str]) -> dict[str, dict[str, Any]]:
    """Latency and throughput, the runtimes taking turns round by round, so that a load
    from elsewhere on a shared machine falls on all of them alike."""
    for e in embedders.values():
        e.embed(questions[:8] + turns[:64])  # warm up (first-run allocations)
    latency: dict[str, list[float]] = {name: [] for name in embedders}
    seconds = {name: dict.fromkeys(args.batch_sizes, 0.0) for name in embedders}
    q_step, t_step = -(-args.queries // args.rounds), -(-args.texts // args.rounds)
    for r in range(args.rounds):
        qs = questions[r * q_step:min((r + 1) * q_step, args.queries)]
        ts = turns[r * t_step:min((r + 1) * t_step, args.texts)]
        for name, e in embedders.items():
            latency[name] += _single_queries(e, qs)
            for b in args.batch_sizes:
                seconds[name][b] += _batched_s(e, ts, b)
    return {name: {"single_query_ms": percentiles(latency[name]),
                   "texts_per_s": {str(b): round(args.texts / s, 1)
                                   for b, s in seconds[name].items()}}
            for name in embedders}


def run(args: EmbedBenchArgs, progress: Callable[[str], None] = print) -> dict[str, Any]:
    questions, turns = corpus(args.data)
    if len(questions) < args.queries or len(turns) < args.texts:
        raise ValueError(f"{args.data} has {len(questions)} questions and {len(turns)} "
                         f"turns; asked for {args.queries} and {args.texts}")
    results: dict[str, dict[str, Any]] = {}
    embedders: dict[str, Embedder] = {}
    for name in args.runtimes:
        e = embedders[name] = build(args.model, name, args.threads)
        t0 = time.perf_counter()
        e.open()
        results[name] = {"model": e.model, "open_s": round(time.perf_counter() - t0, 2)}
    for name, timing in _timings(args, embedders, questions, turns).items():
        results[name].update(timing)
        progress(f"{name}: {json.dumps(results[name])}")
    if "torch" in embedders:
        reference = embedders["torch"].embed(questions[:args.queries])
        for name, e in embedders.items():
            cosine = np.sum(e.embed(questions[:args.queries]) * reference, axis=1)
            results[name]["min_cosine_to_torch"] = round(float(cosine.min()), 6)
    for name, e in embedders.items():
        if args.recall:
            locomo = run_locomo(LocomoArgs(data=args.data), embedder=e, progress=lambda _: None)
            results[name]["locomo"] = locomo["results"]["overall"]
            progress(f"{name}: locomo {json.dumps(results[name]['locomo'])}")
        e.close()
    return {"model": args.model, "threads": args.threads, "queries": args.queries,
            "texts": args.texts, "rounds": args.rounds, "data": args.data,
            "runtimes": results}


def table(result: dict[str, Any]) -> str:
    """The BENCHMARKS.md table of a `run` result."""
    sizes = next(iter(result["runtimes"].values()))["texts_per_s"]
    head = ("| runtime | model | one query p50 / p95 ms | "
            + " | ".join(f"texts/s @{b}" for b in sizes)
            + " | min cosine to torch | LoCoMo recall@5 / @10 / MRR |")
    lines = [head, "|---" * (head.count("|") - 1) + "|"]
    for name, r in result["runtimes"].items():
        q, loc = r["single_query_ms"], r.get("locomo")
        recall = (f"{loc['recall@5']:.3f} / {loc['recall@10']:.3f} / {loc['mrr']:.3f}"
                  if loc else "-")
        lines.append(f"| {name} | {r['model']} | {q['p50']:.1f} / {q['p95']:.1f} | "
                     + " | ".join(f"{v:.0f}" for v in r["texts_per_s"].values())
                     + f" | {r.get('min_cosine_to_torch', '-')} | {recall} |")
    return "\n".join(lines)

"""The GPU embedding bound (issue 21, item 7): batched fp16 throughput and single-query
latency of the bundled all-MiniLM-L6-v2 on CUDA, the input A6 of docs/capacity.md.

A GPU machine may have torch and sentence-transformers but not memray, and may fetch
nothing, so `run` needs only those two and numpy, and everything it reads comes from the
folder `prepare` writes here (the model's weights in fp16, ~45 MB, the texts and fp32
reference vectors):

    .venv/bin/python memray/bench/gpu_embed.py prepare build/gpu-embed        # here, once
    python -P memray/bench/gpu_embed.py run build/gpu-embed --out results/     # on the GPU

(-P, Python 3.11+: the script's folder stays off sys.path, so memray/bench's modules, such
as serve.py, cannot hide a package of the same name.)

`run` stops timing new batch sizes when `--budget-s` is spent, so the whole run stays
within a lent machine's few minutes; it writes gpu-embed.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

MODEL = "all-MiniLM-L6-v2"
MAX_MB = 60  # what a lent machine takes from us besides the repository (64 MiB in all)
BATCHES = (1, 8, 32, 64, 128, 256, 512)
REFERENCE_N = 64


def prepare(folder: Path, locomo: Path) -> dict[str, Any]:
    """The fp16 copy of the packaged model, the texts (LoCoMo questions as queries, turns
    as passages) and fp32 CPU vectors of the first texts to check the GPU's against."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    from memray.embed.packaged import packaged_path

    queries, passages = _texts(locomo)
    model = SentenceTransformer(packaged_path(MODEL), device="cpu", local_files_only=True)
    sample = queries[:REFERENCE_N // 2] + passages[:REFERENCE_N // 2]
    reference = model.encode(sample, normalize_embeddings=True, convert_to_numpy=True)
    folder.mkdir(parents=True, exist_ok=True)
    model.half().save(str(folder / "model"))
    (folder / "texts.json").write_text(json.dumps(
        {"queries": queries, "passages": passages, "reference_texts": sample},
        ensure_ascii=False))
    np.save(folder / "reference.npy", reference.astype(np.float32))
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20
    if size > MAX_MB:
        raise SystemExit(f"{folder} holds {size:.1f} MB, more than the {MAX_MB} MB a GPU "
                         "machine takes")
    return {"folder": str(folder), "mb": round(size, 1), "queries": len(queries),
            "passages": len(passages)}


def _texts(locomo: Path) -> tuple[list[str], list[str]]:
    data = json.loads(locomo.read_text(encoding="utf-8"))
    queries, passages = [], []
    for conv in data:
        queries += [q["question"] for q in conv.get("qa", []) if q.get("question")]
        for key, turns in conv["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                passages += [f"{t['speaker']}: {t['text']}" for t in turns if t.get("text")]
    if not queries or not passages:
        raise SystemExit(f"{locomo}: no questions or turns found")
    return queries, passages


def run(folder: Path, *, device: str, dtype: str, queries_n: int, passages_n: int,
        batches: Sequence[int], budget_s: float,
        say: Callable[[str], None] = print) -> dict[str, Any]:
    """Single-query latency, then texts/s per batch size, until `budget_s` is spent."""
    import torch
    from sentence_transformers import SentenceTransformer

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here; pass --device cpu to try the script on a CPU")
    started = time.perf_counter()
    texts = json.loads((folder / "texts.json").read_text(encoding="utf-8"))
    model = SentenceTransformer(str(folder / "model"), device=device, local_files_only=True)
    model = model.half() if dtype == "float16" else model.float()
    on_cuda = device.startswith("cuda")

    def encode(batch: Sequence[str], size: int) -> np.ndarray:
        out: np.ndarray = model.encode(list(batch), batch_size=size, normalize_embeddings=True,
                                       convert_to_numpy=True, show_progress_bar=False)
        if on_cuda:  # timings include the kernels, not only their launch
            torch.cuda.synchronize()
        return out

    out: dict[str, Any] = {"model": MODEL, "device": _device_name(torch, device),
                           "dtype": dtype, "torch": torch.__version__,
                           "python": platform.python_version()}
    got = encode(texts["reference_texts"], 64).astype(np.float32)
    reference = np.load(folder / "reference.npy")
    out["min_cosine_to_fp32_cpu"] = round(float(np.min(np.sum(got * reference, axis=1))), 6)
    out["load_s"] = round(time.perf_counter() - started, 2)
    encode(texts["queries"][:32], 32)  # warm-up: kernels chosen, memory pools grown
    out["single_query_ms"] = _latency(encode, texts["queries"][:queries_n])
    say(f"single query p50 {out['single_query_ms']['p50']} ms")
    out["throughput"] = []
    passages = (texts["passages"] * (1 + passages_n // len(texts["passages"])))[:passages_n]
    deadline = started + budget_s
    for size in batches:
        if time.perf_counter() > deadline:
            say(f"budget of {budget_s:g} s spent: batch {size} and larger not timed")
            break
        row = _throughput(encode, passages, size, texts["queries"][:passages_n])
        out["throughput"].append(row)
        say(f"batch {size}: {row['passages_per_s']} passages/s, "
            f"{row['queries_per_s']} queries/s")
    if on_cuda:
        out["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    out["wall_s"] = round(time.perf_counter() - started, 1)
    return out


def _latency(encode: Callable[[Sequence[str], int], np.ndarray],
             queries: Sequence[str]) -> dict[str, float]:
    times = []
    for q in queries:
        t = time.perf_counter()
        encode([q], 1)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return {"n": len(times), "p50": round(statistics.median(times), 3),
            "p95": round(times[int(0.95 * (len(times) - 1))], 3),
            "p99": round(times[int(0.99 * (len(times) - 1))], 3)}


def _throughput(encode: Callable[[Sequence[str], int], np.ndarray], passages: Sequence[str],
                size: int, queries: Sequence[str]) -> dict[str, float]:
    """Texts/s embedding `passages` (LoCoMo turns) and short `queries` in batches of
    `size`; one call per batch, as a serving replica would make."""
    rates = {}
    for name, texts in (("passages", passages), ("queries", queries)):
        t = time.perf_counter()
        for i in range(0, len(texts), size):
            encode(texts[i:i + size], size)
        rates[f"{name}_per_s"] = round(len(texts) / (time.perf_counter() - t), 1)
    return {"batch": size, **rates}


def _device_name(torch: Any, device: str) -> str:
    if device.startswith("cuda"):
        return str(torch.cuda.get_device_name(torch.device(device)))
    return f"cpu ({os.cpu_count()} cores)"


def table(result: dict[str, Any]) -> str:
    """Markdown rows for BENCHMARKS.md / docs/capacity.md."""
    lat = result["single_query_ms"]
    lines = [f"{result['model']} {result['dtype']} on {result['device']}, torch "
             f"{result['torch']}: single query p50 / p95 / p99 {lat['p50']} / {lat['p95']} / "
             f"{lat['p99']} ms; min cosine to fp32 CPU {result['min_cosine_to_fp32_cpu']}",
             "", "| batch | LoCoMo turns / s | LoCoMo questions / s |", "|---|---|---|"]
    lines += [f"| {r['batch']} | {r['passages_per_s']:,} | {r['queries_per_s']:,} |"
              for r in result["throughput"]]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="write the fp16 model and texts (needs memray)")
    p.add_argument("folder", type=Path)
    p.add_argument("--locomo", type=Path, default=Path(__file__).parents[2] / "tests" /
                   "data" / "locomo" / "locomo_dev.json")
    r = sub.add_parser("run", help="time it (needs only torch and sentence-transformers)")
    r.add_argument("folder", type=Path)
    r.add_argument("--out", type=Path, help="folder for gpu-embed.json")
    r.add_argument("--device", default="cuda")
    r.add_argument("--dtype", choices=["float16", "float32"], default="float16")
    r.add_argument("--queries", type=int, default=500, help="single queries timed")
    r.add_argument("--passages", type=int, default=8192, help="texts per batch size")
    r.add_argument("--batches", default=",".join(map(str, BATCHES)))
    r.add_argument("--budget-s", type=float, default=360.0)
    args = parser.parse_args(argv)
    if args.command == "prepare":
        print(json.dumps(prepare(args.folder, args.locomo)))
        return 0
    result = run(args.folder, device=args.device, dtype=args.dtype, queries_n=args.queries,
                 passages_n=args.passages, budget_s=args.budget_s,
                 batches=[int(b) for b in args.batches.split(",")])
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu-embed.json").write_text(json.dumps(result, indent=2))
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

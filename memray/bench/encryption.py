"""`memray bench encryption`: what crypto-shredding costs, measured side by side on one
corpus: verbatim adds (the whole write path, one at a time) and searches (with the hot set
as configured by default, and with it off so every hit is opened from the store), plain
and encrypted in alternating rounds, each a fresh data dir; plus the cipher alone per
record (seal and open)."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from memray.bench.recall import percentiles
from memray.config import MemoryConfig
from memray.core.factory import build_embedder
from memray.core.memory import Memory
from memray.crypto.cipher import UserCipher
from memray.crypto.keys import from_text, new_master_key
from memray.embed.cache import CachedEmbedder
from memray.store.fake_log import InMemoryEventLog

TOPICS = ["tea", "jazz", "Hangzhou", "running", "peanuts", "Python", "cats", "hiking",
          "杭州", "芒果", "游泳", "咖啡"]


@dataclass(frozen=True)
class EncryptionBenchArgs:
    users: int = 10
    per_user: int = 50
    queries: int = 200
    rounds: int = 4


def _config(data_dir: str, encrypted: bool, hot_set: str) -> MemoryConfig:
    key = os.path.join(data_dir, "master.key")
    with open(key, "w", encoding="utf-8") as f:
        f.write(new_master_key())
    return MemoryConfig.model_validate({
        "data_dir": os.path.join(data_dir, "d"), "recall": {"hot_set": hot_set},
        "security": {"encryption": {"enabled": encrypted, "master_key_file": key}}})


def _texts(args: EncryptionBenchArgs) -> list[tuple[str, str]]:
    return [(f"u{u}", f"I like {TOPICS[(u + i) % len(TOPICS)]} number {i} of user {u}")
            for i in range(args.per_user) for u in range(args.users)]


def _queries(args: EncryptionBenchArgs) -> list[str]:
    return [f"Do I like {TOPICS[q % len(TOPICS)]}?" for q in range(args.queries)]


def _one(args: EncryptionBenchArgs, embedder: CachedEmbedder, encrypted: bool,
         hot_set: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, \
            Memory(_config(tmp, encrypted, hot_set), embedder=embedder) as m:
        texts = _texts(args)
        start = time.perf_counter()
        for uid, text in texts:
            m.add(text, user_id=uid, infer=False)
        adds_per_s = len(texts) / (time.perf_counter() - start)
        samples = []
        for q, query in enumerate(_queries(args)):
            t0 = time.perf_counter()
            m.search(query, user_id=f"u{q % args.users}")
            samples.append((time.perf_counter() - t0) * 1000)
        return {"adds_per_s": round(adds_per_s, 1), **percentiles(samples)}


def _cipher_us(n: int = 2000) -> dict[str, float]:
    cipher = UserCipher(InMemoryEventLog(dim=4), from_text(new_master_key(), "bench"))
    text = "I am allergic to peanuts and I live in Hangzhou, 我对芒果过敏"
    t0 = time.perf_counter()
    sealed = [cipher.seal("u", text) for _ in range(n)]
    t1 = time.perf_counter()
    for s in sealed:
        cipher.open("u", s)
    t2 = time.perf_counter()
    return {"seal_us": round((t1 - t0) / n * 1e6, 1), "open_us": round((t2 - t1) / n * 1e6, 1)}


def run(args: EncryptionBenchArgs) -> dict[str, Any]:
    # Every text and query embedded once up front: each run then costs the same for the
    # model, and the difference is the store, the log and the cipher.
    embedder = CachedEmbedder(build_embedder(MemoryConfig()),
                              size=args.users * args.per_user + args.queries + 64)
    embedder.open()
    embedder.embed([t for _, t in _texts(args)] + _queries(args))
    out: dict[str, Any] = {"corpus": f"{args.users} users x {args.per_user} memories, "
                           f"{args.queries} searches, embeddings cached",
                           "cipher": _cipher_us()}
    for hot_set in ("auto", "off"):
        runs: dict[str, list[dict[str, float]]] = {"plain": [], "encrypted": []}
        for r in range(args.rounds):  # alternate who goes first: warm-up and drift
            for mode in ("plain", "encrypted")[::1 if r % 2 == 0 else -1]:
                runs[mode].append(_one(args, embedder, mode == "encrypted", hot_set))
        median = {mode: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
                  for mode, rs in runs.items()}
        plain, enc = median["plain"], median["encrypted"]
        out[f"hot_set_{hot_set}"] = {
            **median,
            "ingest_slower": round(1 - enc["adds_per_s"] / plain["adds_per_s"], 3),
            "search_p95_slower": round(enc["p95"] / plain["p95"] - 1, 3)}
    return out

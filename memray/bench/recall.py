"""`memray bench recall`: in-process recall latency, and the store's share against the
embedder's, on the embedded milvus-lite or a Milvus server.

The corpus is synthetic: unit vectors drawn at random and written straight to the store
(embedding 200k texts would take longer than the measurement and does not change the
store's work). Queries are real sentences, embedded by the configured model, uncached:
one synthetic question, or a LoCoMo file's questions (`questions`), which name people,
topics and dates and so take the read path's name, topic and date steps. With
`write_every`, a verbatim add goes to the queried user before every Nth timed query, and
the searches right after a write (and the adds) are reported apart: the hot set follows
the write.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memray.config import MemoryConfig
from memray.core.changes import ChangeSet
from memray.core.committer import Committer
from memray.core.factory import build_embedder, build_event_log, build_store, embedder_runtime
from memray.core.memory import Memory
from memray.core.records import new_record
from memray.models import utcnow
from memray.settings import load_settings


@dataclass(frozen=True)
class RecallBenchArgs:
    users: int = 1
    per_user: int = 10_000
    queries: int = 200
    milvus_uri: str | None = None
    data_dir: str | None = None
    seed: int = 0
    hot_set: str = "auto"
    postgres_dsn: str | None = None  # the shared log: hot set `auto` is on for a server
    query_users: int | None = None  # queries cycle over the first N users; None: all
    runtime: str = "auto"  # embedder.runtime: auto | onnx | torch
    questions: str | None = None  # a LoCoMo JSON file: its questions are the queries
    write_every: int = 0  # a verbatim add before every Nth timed query (0: none)


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    arr = np.asarray(samples_ms)
    return {f"p{p}": round(float(np.percentile(arr, p)), 2) for p in (50, 95, 99)} | {
        "mean": round(float(arr.mean()), 2)}


def _fill(committer: Committer, args: RecallBenchArgs,
          progress: Callable[[str], None]) -> None:
    """The synthetic corpus, written as every memory is: change sets through the
    committer (bulk: committed per user, then applied in large store calls)."""
    store = committer.store
    rng = np.random.default_rng(args.seed)
    now = utcnow()
    total = args.users * args.per_user
    batch: dict[str, ChangeSet] = {}
    for n in range(total):
        user = f"user-{n % args.users:05d}"
        text = f"synthetic memory {n} of {user}"
        vec = rng.standard_normal(store.dim).astype(np.float32)
        rec = new_record(user_id=user, content=text, embedding_model=store.model, at=now)
        batch.setdefault(user, ChangeSet(user)).put(rec, vec / np.linalg.norm(vec), None, now)
        if sum(len(c.upserts) for c in batch.values()) == 5000 or n == total - 1:
            for changes in batch.values():
                committer.commit(changes, apply=False)
            committer.drain_users(list(batch))
            batch = {}
            progress(f"inserted {n + 1}/{total}")


class _Timed:  # duck-types Embedder and VectorStore
    """Wraps an embedder or store and records how long `embed`/`search` took, in ms."""

    def __init__(self, inner: Any, method: str) -> None:
        self._inner, self._method = inner, method
        self.samples: list[float] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name != self._method:
            return attr

        def timed(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return attr(*a, **kw)
            finally:
                self.samples.append((time.perf_counter() - t0) * 1000)

        return timed


def run(args: RecallBenchArgs, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Fill (if the corpus is not there yet), reopen, warm up, then time `Memory.search`
    end to end with the embedder's and the store's share of each call."""
    if args.write_every < 0 or args.write_every == 1:
        raise ValueError("write_every is 0 (no writes) or at least 2: with 1 every timed "
                         "search follows a write and none is left to compare with")
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="memray-bench-")
    # strong_window_s=0: the steady state of a long-running process (the first 10 s after
    # an open read Strong, ~400 ms on Milvus 2.3). On a server, the searches after a
    # `write_every` write may then not see it yet; lite's hot set follows each write.
    store_cfg: dict[str, Any] = {"milvus_uri": args.milvus_uri, "strong_window_s": 0,
                                 "postgres_dsn": args.postgres_dsn,
                                 "alias": f"bench_{args.users}x{args.per_user}",
                                 "collection_prefix": f"bench_{args.users}x{args.per_user}"}
    cfg = MemoryConfig.model_validate({"data_dir": data_dir, "store": store_cfg,
                                       "embedder": {"cache_size": 0,
                                                    "runtime": args.runtime},
                                       "recall": {"hot_set": args.hot_set}})
    embedder = build_embedder(cfg)
    embedder.open()
    store = build_store(cfg, load_settings(), model=embedder.model, dim=embedder.dim)
    store.open()
    t = time.perf_counter()
    if store.count("user-00000") == 0:
        events = build_event_log(cfg, load_settings(), dim=embedder.dim)
        events.open()
        try:
            _fill(Committer(store, events), args, progress)
        finally:
            events.close()
        time.sleep(6)  # past Milvus' 5 s bounded staleness, so every row is searched
    fill_s = time.perf_counter() - t
    store.close()
    store = build_store(cfg, load_settings(), model=embedder.model, dim=embedder.dim)
    timed_embedder = _Timed(embedder, "embed")
    pool = min(args.query_users or args.users, args.users)
    # 20 warm-up queries; with a user pool, at least one per user of the pool, so the
    # timed queries see a warm hot set (when the pool fits in it).
    warm = 20 if args.query_users is None else max(20, pool)
    with Memory(cfg, embedder=timed_embedder, store=store) as m:
        timed = _timed_searches(m, args, timed_embedder, warm, pool)
    total_ms, embed_ms = timed["search"], timed["embed"]
    hot, hot_loads = timed["hot"], timed["loads"]
    after_write_ms, add_ms = timed["after_write"], timed["add"]
    # The rest of each call is retrieval: the store's search (or the hot set's matrix
    # product), plus ranking.
    retrieval_ms = [t - e for t, e in zip(total_ms, embed_ms, strict=True)]
    return {
        "mode": "server" if args.milvus_uri else "lite", "hot_set": hot,
        "runtime": embedder_runtime(cfg.embedder),
        "log": "postgres" if args.postgres_dsn else "sqlite", "query_users": pool,
        "hot_set_loads": hot_loads,
        "users": args.users, "per_user": args.per_user, "rows": args.users * args.per_user,
        "queries": args.queries, "fill_s": round(fill_s, 1),
        "search_ms": percentiles(total_ms), "embed_ms": percentiles(embed_ms),
        "retrieval_ms": percentiles(retrieval_ms),
        "retrieval_share": round(sum(retrieval_ms) / sum(total_ms), 3),
        "questions": args.questions or "synthetic", "write_every": args.write_every,
        "search_after_write_ms": percentiles(after_write_ms) if after_write_ms else None,
        "add_ms": percentiles(add_ms) if add_ms else None,
    }


def _timed_searches(m: Memory, args: RecallBenchArgs, timed_embedder: _Timed, warm: int,
                    pool: int) -> dict[str, Any]:
    """`warm` untimed searches, then `args.queries` timed ones (with an add before every
    `write_every`th), each search's embedding time apart."""
    questions = _questions(args.questions)
    total_ms: list[float] = []
    embed_ms: list[float] = []
    after_write_ms: list[float] = []
    add_ms: list[float] = []
    loads = 0
    for i in range(args.queries + warm):
        if i == warm and m._backend.hot is not None:
            loads = m._backend.hot.loads
        q = (questions[i % len(questions)] if questions else
             f"what did the user mention about topic number {i} last week?")
        user = f"user-{i % pool:05d}"
        wrote = bool(args.write_every) and i >= warm and (i - warm) % args.write_every == 0
        if wrote:
            t0 = time.perf_counter()
            m.add(f"a note written while searching, number {i}", user_id=user, infer=False)
            add_ms.append((time.perf_counter() - t0) * 1000)
        n = len(timed_embedder.samples)
        t0 = time.perf_counter()
        m.search(q, user_id=user)
        if i >= warm:
            took = (time.perf_counter() - t0) * 1000
            (after_write_ms if wrote else total_ms).append(took)
            if not wrote:
                embed_ms.append(sum(timed_embedder.samples[n:]))  # all embeds of this call
    hot = m._backend.hot
    return {"search": total_ms, "embed": embed_ms, "after_write": after_write_ms,
            "add": add_ms, "hot": hot is not None,
            "loads": hot.loads - loads if hot is not None else None}


def _questions(path: str | None) -> list[str]:
    if path is None:
        return []
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    found = [q["question"] for conv in data for q in conv.get("qa", []) if q.get("question")]
    if not found:
        raise ValueError(f"{path}: no questions")
    return found

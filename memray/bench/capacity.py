"""`memray bench capacity`: the scaled-down check of docs/capacity.md. A trace of Zipf
users is replayed, in process and without servers, against the real `HotSet` of each API
replica, routed user-affine (`memray bench serve`'s affine spread: crc32 of the user id mod
replicas, a stable hash as HAProxy's header hash is) or round robin; writes bump the
user's version, as the shared log does, and the replica that took the write patches its
copy, as its committer does. Loading a user's rows is stubbed with fresh rows of
realistic size: what is checked is the hit rate and the memory the model predicts, not
latency.

The model is Che's approximation of an LRU cache under independent requests, computed
from the same popularities; the bench reports it beside the simulated figure, so the
approximation can be trusted for a population too large to simulate (`predict`).
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from memray.bench.serve import affine_index as affine
from memray.core.hotset import HotSet
from memray.core.ids import new_id
from memray.models import content_hash
from memray.store.base import StoredMemory, Where
from memray.store.events import StoreOp
from memray.store.rows import from_row

_WHERE = Where()
_TOPICS = ("green tea", "jazz", "Hangzhou", "running", "peanuts", "the cello", "杭州的西湖",
           "芒果", "游泳", "咖啡", "sushi", "chess")


@dataclass(frozen=True)
class CapacityBenchArgs:
    users: int = 100_000
    requests: int = 100_000
    warmup: float = 0.25  # share of the trace replayed before counting
    zipf: float = 1.1
    replicas: int = 3
    capacities: tuple[int, ...] = (256, 1024, 4096)
    rows_per_user: int = 20  # what BENCHMARKS.md's affine runs held per user
    write_share: float = 500 / 5_500  # the capacity doc's 500 adds/s beside 5,000 searches/s
    dim: int = 384
    seed: int = 0


@dataclass
class _Counts:
    searches: int = 0
    hits: int = 0
    stale: int = 0  # misses of a user this replica held, but at an older version
    writes: int = 0

    @property
    def misses(self) -> int:
        return self.searches - self.hits


def zipf_shares(users: int, s: float) -> np.ndarray:
    """Request share of each user by popularity rank (rank 1 first), summing to 1."""
    p = np.arange(1, users + 1, dtype=np.float64) ** -s
    out: np.ndarray = p / p.sum()
    return out


def ranked_ids(users: int, seed: int) -> list[str]:
    """The user id at each popularity rank: ranks are shuffled over ids, so popularity is
    unrelated to the routing hash."""
    order = np.random.default_rng(seed).permutation(users)
    return [f"u{i:07d}" for i in order]


def che_hit_rate(shares: np.ndarray, capacity: int) -> float:
    """Che's approximation of an LRU cache's hit rate under independent requests with
    these shares: the characteristic time T solves sum(1 - exp(-p T)) = capacity."""
    p = shares[shares > 0] / shares.sum()
    if capacity >= len(p):
        return 1.0
    lo, hi = 0.0, 1.0
    while np.sum(-np.expm1(-p * hi)) < capacity:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if np.sum(-np.expm1(-p * mid)) < capacity else (lo, mid)
    return float(np.sum(p * -np.expm1(-p * hi)))


def predict(users: int, s: float, replicas: int, capacity: int,
            seed: int = 0) -> dict[str, float]:
    """Model hit rates with `replicas` hot sets of `capacity` users: affine (each replica
    an LRU over its hash share of the users; requests-weighted mean) and round robin
    without writes (every replica sees every user; invalidations by other replicas'
    writes come on top of this). Also the busiest replica's share of all requests under
    affine routing (a popular user cannot be split)."""
    shares = zipf_shares(users, s)
    owner = np.array([affine(u, replicas) for u in ranked_ids(users, seed)])
    load = np.bincount(owner, weights=shares, minlength=replicas)
    aff = sum(float(load[r]) * che_hit_rate(shares[owner == r], capacity)
              for r in range(replicas) if load[r] > 0)
    return {"affine": round(aff, 4), "round_robin": round(che_hit_rate(shares, capacity), 4),
            "busiest_replica_share": round(float(load.max()), 4)}


def _row(user_id: str, i: int, dim: int, rng: np.random.Generator,
         mid: str | None = None) -> StoredMemory:
    """A verbatim memory as the store returns it: read back through `from_row`."""
    text = f"I like {_TOPICS[i % len(_TOPICS)]} and said so on day {i} of the year"
    now = int(time.time() * 1000)
    record = from_row({
        "id": mid or new_id(), "user_id": user_id, "agent_id": "", "session_id": "",
        "type": "message", "slot": "", "status": "active", "content": text,
        "importance": 0.5, "confidence": 1.0, "created_at": now, "updated_at": now,
        "last_confirmed_at": now, "expires_at": 0, "content_hash": content_hash(text),
        "embedding_model": "all-MiniLM-L6-v2-384",
        "payload": {"source": "user_stated", "source_turn_ids": [new_id()],
                    "source_excerpt": text[:40], "consent": 2, "metadata": {},
                    "occurred_at": now}})
    return StoredMemory(record, rng.standard_normal(dim).astype(np.float32))


class _Loader:
    """Fresh rows on every load (a real load reads them from Milvus): one template row
    per slot, copied with the user's id, so a load costs what the hot set itself does."""

    def __init__(self, rows: int, dim: int, rng: np.random.Generator) -> None:
        self._templates = [_row("template", i, dim, rng) for i in range(rows)]
        self._rng, self._dim = rng, dim

    def rows(self, user_id: str) -> list[StoredMemory]:
        # The hot set copies vectors into its own matrix: sharing the templates' is safe.
        return [StoredMemory(t.record.model_copy(update={"user_id": user_id}), t.vector)
                for t in self._templates]

    def rewrite(self, user_id: str, held: list[str]) -> StoreOp:
        """An update of one of the user's memories (the row count stays put)."""
        mid = held[0] if held else new_id()
        return StoreOp("replace", user_id, (_row(user_id, 0, self._dim, self._rng, mid),))


def trace(args: CapacityBenchArgs) -> Iterator[tuple[str, bool]]:
    """(user id, is a write) per request, users drawn by Zipf rank."""
    ids = ranked_ids(args.users, args.seed)
    rng = np.random.default_rng(args.seed + 2)
    picks = rng.choice(args.users, size=args.requests, p=zipf_shares(args.users, args.zipf))
    writes = rng.random(args.requests) < args.write_share
    for rank, write in zip(picks, writes, strict=True):
        yield ids[rank], bool(write)


def simulate(args: CapacityBenchArgs, spread: str, capacity: int) -> dict[str, Any]:
    """Replay the trace against `args.replicas` hot sets of `capacity` users each."""
    rng = np.random.default_rng(args.seed + 1)
    loader = _Loader(args.rows_per_user, args.dim, rng)
    replicas = [HotSet(dim=args.dim, max_users=capacity) for _ in range(args.replicas)]
    versions: dict[str, int] = {}
    counted, query = _Counts(), rng.standard_normal(args.dim).astype(np.float32)
    start = int(args.warmup * args.requests)
    for n, (uid, write) in enumerate(trace(args)):
        r = affine(uid, args.replicas) if spread == "affine" else n % args.replicas
        counts = counted if n >= start else _Counts()
        if write:
            _write(replicas[r], uid, versions, loader)
            counts.writes += 1
        else:
            _search(replicas[r], uid, versions.get(uid, 0), query, loader, counts)
    return _result(args, spread, capacity, counted, replicas)


def _search(hot: HotSet, uid: str, version: int, query: np.ndarray, loader: _Loader,
            counts: _Counts) -> None:
    before, was_held = hot.loads, hot.holding(uid) > 0
    hot.search(uid, version, query, 5, _WHERE, lambda: loader.rows(uid))
    counts.searches += 1
    if hot.loads == before:
        counts.hits += 1
    elif was_held:
        counts.stale += 1


def _write(hot: HotSet, uid: str, versions: dict[str, int], loader: _Loader) -> None:
    """The shared version moves; the writing replica patches a copy it holds at the
    version before (its committer's `applied`); other replicas find theirs stale."""
    before = versions.get(uid, 0)
    versions[uid] = before + 1
    held = hot.query(uid, before, _WHERE)
    hot.applied(uid, [loader.rewrite(uid, [r.id for r in held or []])], before, before + 1)


def _result(args: CapacityBenchArgs, spread: str, capacity: int, c: _Counts,
            replicas: list[HotSet]) -> dict[str, Any]:
    held = [hot.held for hot in replicas]
    return {"spread": spread, "capacity": capacity, "searches": c.searches, "hits": c.hits,
            "misses": c.misses, "stale_misses": c.stale, "writes": c.writes,
            "hit_rate": round(c.hits / c.searches, 4) if c.searches else 0.0,
            "held_users_per_replica": held,
            "held_memories_per_replica": [h * args.rows_per_user for h in held]}


def held_bytes_per_memory(rows: int = 200, dim: int = 384, seed: int = 0) -> dict[str, float]:
    """Python heap bytes a hot set keeps per memory for one user of `rows` memories
    (tracemalloc): after a dense search, and after a keyword search builds BM25."""
    rng = np.random.default_rng(seed)
    query = rng.standard_normal(dim).astype(np.float32)
    hot = HotSet(dim=dim)

    def make() -> list[StoredMemory]:
        return [_row("u-size", i, dim, rng) for i in range(rows)]

    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        hot.search("u-size", 0, query, 5, _WHERE, make)
        gc.collect()
        dense = tracemalloc.get_traced_memory()[0] - base
        hot.hybrid("u-size", 0, query, "green tea on day 7", 5, _WHERE, make)
        gc.collect()
        hybrid = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    return {"rows": rows, "dim": dim, "vector_bytes": dim * 4,
            "dense_bytes_per_memory": round(dense / rows, 1),
            "with_bm25_bytes_per_memory": round(hybrid / rows, 1)}


def run(args: CapacityBenchArgs,
        progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Every (spread, capacity) simulated, the model beside each, and the bytes per held
    memory that turn held users into a replica's memory."""
    size = held_bytes_per_memory(dim=args.dim)
    per_memory = size["with_bm25_bytes_per_memory"]
    rows = []
    for capacity in args.capacities:
        model = predict(args.users, args.zipf, args.replicas, capacity, args.seed)
        for spread in ("affine", "round_robin"):
            started = time.perf_counter()
            row = simulate(args, spread, capacity)
            row["model_hit_rate"] = model[spread]
            row["held_mib_per_replica"] = [round(m * per_memory / 2**20, 1)
                                           for m in row["held_memories_per_replica"]]
            rows.append(row)
            progress(f"{spread} capacity {capacity}: hit rate {row['hit_rate']} "
                     f"(model {model[spread]}) in {time.perf_counter() - started:.1f} s")
    return {"args": {k: v for k, v in vars(args).items()}, "hot_set_bytes": size,
            "runs": rows}


def table(result: dict[str, Any]) -> str:
    """The runs as a markdown table."""
    out = ["| spread | users per replica | hit rate | model (Che, no writes) | hits / searches "
           "| stale misses | held users per replica | held MiB per replica |",
           "|---|---|---|---|---|---|---|---|"]
    for r in result["runs"]:
        out.append(f"| {r['spread']} | {r['capacity']:,} | {r['hit_rate']:.3f} | "
                   f"{r['model_hit_rate']:.3f} | {r['hits']:,} / {r['searches']:,} | "
                   f"{r['stale_misses']:,} | {', '.join(map(str, r['held_users_per_replica']))} "
                   f"| {', '.join(map(str, r['held_mib_per_replica']))} |")
    return "\n".join(out)

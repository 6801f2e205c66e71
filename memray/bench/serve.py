"""`memray bench serve`: a bounded HTTP load on 127.0.0.1 against the Serve app.

By default it starts the app itself from serve_configs/local.yaml (embedded milvus-lite,
temp data dir, a free port) with Ray limited to this machine, seeds memories, then runs
three closed-loop loads of `seconds` each (after a short unrecorded warm-up): search only
with `clients` clients, search only with one client, and the mixed load (`add_share` adds).
Every search text is distinct, so no cache answers one. In the same run, before the app
starts, it measures the two references the goals are stated against: the raw embedder's
batched texts/s on the same kind of query texts, and one client of an in-process `Memory`
seeded the same way. Every request has a timeout; the run stops by itself.
With --milvus-uri and --postgres-dsn the same load runs against `memray api` replicas
instead (memray/bench/cluster.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import yaml

from memray.serve_config import default_serve_config
from memray.serve_ingress import SWITCH

INGRESS = {"auto": {}, "haproxy": {SWITCH: "1"}, "python": {SWITCH: "0"}}

_QUERIES = itertools.count()  # numbers search texts across every load of this process
TOPICS = ["tea", "jazz", "chess", "hiking", "Python", "peanuts", "Hangzhou", "cats"]


def affine_index(user_id: str, replicas: int) -> int:
    """The replica a user's requests go to under the affine spread: crc32 of the id, mod
    the replica count (a stable hash, as HAProxy's header hash is; `memray bench
    capacity` routes its simulated replicas with it too, so the two compare)."""
    return zlib.crc32(user_id.encode()) % replicas


@dataclass(frozen=True)
class ServeBenchArgs:
    clients: int = 20
    seconds: float = 60.0
    users: int = 50
    seed_per_user: int = 20
    add_share: float = 0.1
    url: str | None = None
    key: str = "mr_local_dev_key"
    config: str | None = None  # None: what `memray serve` would start (config_path)
    warmup_s: float = 3.0
    references: bool = True  # the raw embedder and the in-process Memory (local app only)
    ingress: str = "auto"  # auto: what `memray serve` picks; haproxy or python: forced


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def local_server(config_path: str, stderr: Path | None = None,
                 data_dir: Path | None = None, ingress: str = "auto") -> Iterator[str]:
    """`memray serve` on a copy of `config_path` (temp data dir, free port on 127.0.0.1),
    exactly as a user runs it; stopped with SIGTERM afterwards. `stderr`: a file for what
    it prints there (default: discarded); `data_dir`: the app's (default: a temp dir);
    `ingress`: auto (what `memray serve` picks), haproxy or python."""
    config = yaml.safe_load(Path(config_path).read_text(encoding="utf-8"))
    port = _free_port()
    config["http_options"] = {"host": "127.0.0.1", "port": port}
    work = Path(tempfile.mkdtemp(prefix="memray-bench-serve-"))
    for app in config["applications"]:
        if app["import_path"] == "memray.serve:build_app":
            app.setdefault("args", {}).setdefault("memory", {})["data_dir"] = str(
                data_dir or work / "d")
    path = work / "serve.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    exe = Path(sys.executable).with_name("memray")
    err = stderr.open("wb") if stderr is not None else subprocess.DEVNULL
    env = {**os.environ, "RAY_ADDRESS": "local", **INGRESS[ingress]}
    if ingress == "auto":
        env.pop(SWITCH, None)
    proc = subprocess.Popen([str(exe), "serve", "--config", str(path)], cwd=work,
                            stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
                            env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, proc, deadline_s=180)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        if stderr is not None:
            err.close()  # type: ignore[union-attr]
            proc.wait(timeout=30)


def _wait_ready(base: str, proc: subprocess.Popen[bytes], deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"memray serve exited with {proc.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                return
        time.sleep(1)
    raise RuntimeError(f"memray serve not ready after {deadline_s} s")


@dataclass(frozen=True)
class Load:
    """One closed-loop load: `clients` clients for `seconds`, each looping search and add
    (`add_share`) for random users of `users` (uniform, or Zipf with exponent `zipf` over
    the users in order: a few users make most requests, as in real traffic), every
    request sent to the next of `bases` (round-robin over all clients' requests), a
    random one (`spread="random"`), or the one its user hashes to (`spread="affine"`,
    what a user-affine router does)."""

    bases: tuple[str, ...]
    key: str
    users: tuple[str, ...]
    clients: int = 20
    seconds: float = 60.0
    add_share: float = 0.1
    spread: str = "round-robin"
    timeout_s: float = 30.0
    zipf: float = 0.0  # 0: users uniform

    def weights(self) -> list[float] | None:
        """Each user's share of the requests (None: uniform)."""
        return None if not self.zipf else [1 / (i + 1) ** self.zipf
                                           for i in range(len(self.users))]

    def base(self, user: str, rng: random.Random, turn: Iterator[int]) -> str:
        if self.spread == "affine":
            return self.bases[affine_index(user, len(self.bases))]
        if self.spread == "random":
            return rng.choice(self.bases)
        return self.bases[next(turn) % len(self.bases)]


SPREADS = ("round-robin", "random", "affine")


def query_text(rng: random.Random, n: int) -> str:
    """A search text no earlier one repeats (the n-th of the run), query-like in length."""
    a, b = rng.sample(TOPICS, 2)
    return f"what does the user think about {a} or {b}, question {n}?"


async def _client(http: httpx.AsyncClient, load: Load, stop: float, rng: random.Random,
                  turn: Iterator[int], out: dict[str, list[float]],
                  errors: list[str], queries: Iterator[int]) -> None:
    headers = {"Authorization": f"Bearer {load.key}"}
    weights = load.weights()
    while time.monotonic() < stop:
        user = rng.choices(load.users, weights)[0]
        topic = rng.choice(TOPICS)
        base = load.base(user, rng, turn)
        if rng.random() < load.add_share:
            op, path = "add", "/v1/memories"
            body: dict[str, Any] = {"user_id": user, "messages": f"I like {topic} a lot",
                                    "infer": False}
        else:
            op, path = "search", "/v1/memories/search"
            body = {"user_id": user, "query": query_text(rng, next(queries))}
        t0 = time.perf_counter()
        try:
            r = await http.post(base + path, json=body, headers=headers)
            ok = r.status_code == 200
            if not ok:
                errors.append(f"{op} HTTP {r.status_code}")
        except httpx.HTTPError as exc:
            ok = False
            errors.append(f"{op} {type(exc).__name__}")
        if ok:
            out[op].append((time.perf_counter() - t0) * 1000)


async def seed(base: str, key: str, users: Sequence[str], per_user: int) -> None:
    """Every user gets `per_user` memories to find (`infer: false`, one add per user)."""
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        for user in users:
            messages = [{"role": "user", "content": f"fact {i}: I like {TOPICS[i % 8]}"}
                        for i in range(per_user)]
            r = await http.post("/v1/memories", headers={"Authorization": f"Bearer {key}"},
                                json={"user_id": user, "messages": messages, "infer": False})
            r.raise_for_status()


async def measure(load: Load) -> dict[str, Any]:
    """Run `load`; requests, throughput, errors and search/add latency percentiles (ms)."""
    n = load.clients * len(load.bases)
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(timeout=load.timeout_s, limits=limits) as http:
        out: dict[str, list[float]] = {"search": [], "add": []}
        errors: list[str] = []
        turn = itertools.count()
        start = time.monotonic()
        stop = start + load.seconds
        await asyncio.gather(*(_client(http, load, stop, random.Random(i), turn, out, errors,
                                       _QUERIES) for i in range(load.clients)))
        elapsed = time.monotonic() - start
    done = sum(len(v) for v in out.values()) + len(errors)
    return {"clients": load.clients, "seconds": round(elapsed, 1), "requests": done,
            "rps": round(done / elapsed, 1), "errors": len(errors),
            "error_kinds": sorted(set(errors))[:10],
            **{op: _pct(v) for op, v in out.items()}}


async def _load(base: str, args: ServeBenchArgs) -> dict[str, Any]:
    users = tuple(f"bench-{u}" for u in range(args.users))
    await seed(base, args.key, users, args.seed_per_user)
    out: dict[str, Any] = {"url": base}
    for name, clients, add_share in (("search", args.clients, 0.0), ("one_client", 1, 0.0),
                                     ("mixed", args.clients, args.add_share)):
        load = Load(bases=(base,), key=args.key, users=users, clients=clients,
                    seconds=args.seconds, add_share=add_share)
        if args.warmup_s:
            await measure(replace(load, seconds=args.warmup_s))
        out[name] = await measure(load)
    return out


def _pct(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"n": 0}
    a = np.asarray(samples)
    return {"n": len(samples), **{f"p{p}": round(float(np.percentile(a, p)), 1)
                                  for p in (50, 95, 99)}}


def references(args: ServeBenchArgs, memory: dict[str, Any]) -> dict[str, Any]:
    """The raw embedder's batched texts/s (batches of 64, 2,048 query texts) and one
    client's `Memory.search` p50 in this process, seeded as the app is (`memory`: the app's
    MemoryConfig fields; a temp data dir)."""
    from memray.config import MemoryConfig
    from memray.core.factory import build_embedder
    from memray.core.memory import Memory

    rng = random.Random(7)
    texts = [query_text(rng, n) for n in range(2048)]
    with tempfile.TemporaryDirectory(prefix="memray-bench-ref-") as tmp:
        cfg = MemoryConfig.model_validate({**memory, "data_dir": tmp})
        raw = build_embedder(cfg.model_copy(update={"embedder": cfg.embedder.model_copy(
            update={"cache_size": 0})}))
        raw.open()
        raw.embed(texts[:64])
        t0 = time.perf_counter()
        for i in range(0, len(texts), 64):
            raw.embed(texts[i:i + 64])
        rate = len(texts) / (time.perf_counter() - t0)
        raw.close()
        with Memory(cfg) as m:
            for u in range(args.users):
                m.add([{"role": "user", "content": f"fact {i}: I like {TOPICS[i % 8]}"}
                       for i in range(args.seed_per_user)], user_id=f"bench-{u}", infer=False)
            samples = []
            for n in range(320):
                t0 = time.perf_counter()
                m.search(query_text(rng, n + 10_000), user_id=f"bench-{n % args.users}")
                samples.append((time.perf_counter() - t0) * 1000)
    return {"raw_embed_per_s": round(rate, 1), "in_process_search": _pct(samples[20:])}


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """The issue's goals, each with the measured value beside it."""
    search, one = result["search"], result["one_client"]
    out: dict[str, Any] = {"search_rps": search["rps"], "search_p95_ms":
                           search["search"].get("p95"), "errors": search["errors"]}
    if "raw_embed_per_s" in result:
        out["share_of_raw_embedder"] = round(search["rps"] / result["raw_embed_per_s"], 3)
        p50 = result["in_process_search"].get("p50")
        if p50 and one["search"].get("p50"):
            out["one_client_p50_over_in_process"] = round(one["search"]["p50"] / p50, 2)
    return out


def config_path(args: ServeBenchArgs) -> str:
    """The Serve config to start: the one given, else the one `memray serve` would use (so
    the bench runs outside a checkout too)."""
    return args.config or default_serve_config()


def run(args: ServeBenchArgs) -> dict[str, Any]:
    if args.url is not None:
        if not args.url.startswith(("http://127.", "http://localhost", "http://[::1]")):
            raise ValueError("memray bench serve sends load only to this machine (127.0.0.0/8)")
        result = asyncio.run(_load(args.url, args))
        return {**result, "summary": summary(result)}
    refs: dict[str, Any] = {}
    path = config_path(args)
    if args.references:
        config = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        app = next(a for a in config["applications"]
                   if a["import_path"] == "memray.serve:build_app")
        refs = references(args, app.get("args", {}).get("memory", {}))
    with local_server(path, ingress=args.ingress) as base:
        result = {**refs, "ingress": args.ingress, **asyncio.run(_load(base, args))}
    return {**result, "summary": summary(result)}

"""`memray bench serve`: a bounded HTTP load on 127.0.0.1 against the Serve app.

By default it starts the app itself from serve_configs/local.yaml (embedded milvus-lite,
temp data dir, a free port) with Ray limited to this machine, seeds memories, then runs
`clients` concurrent clients for `seconds`: each loops search (90%) and add (10%) for
users spread over `users`. Every request has a timeout; the run stops by itself.
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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import yaml

TOPICS = ["tea", "jazz", "chess", "hiking", "Python", "peanuts", "Hangzhou", "cats"]


@dataclass(frozen=True)
class ServeBenchArgs:
    clients: int = 20
    seconds: float = 60.0
    users: int = 50
    seed_per_user: int = 20
    add_share: float = 0.1
    url: str | None = None
    key: str = "mr_local_dev_key"
    config: str = "serve_configs/local.yaml"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def local_server(config_path: str) -> Iterator[str]:
    """`memray serve` on a copy of `config_path` (temp data dir, free port on 127.0.0.1),
    exactly as a user runs it; stopped with SIGTERM afterwards."""
    config = yaml.safe_load(Path(config_path).read_text(encoding="utf-8"))
    port = _free_port()
    config["http_options"] = {"host": "127.0.0.1", "port": port}
    work = Path(tempfile.mkdtemp(prefix="memray-bench-serve-"))
    for app in config["applications"]:
        if app["import_path"] == "memray.serve:build_app":
            app.setdefault("args", {}).setdefault("memory", {})["data_dir"] = str(work / "d")
    path = work / "serve.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    exe = Path(sys.executable).with_name("memray")
    proc = subprocess.Popen([str(exe), "serve", "--config", str(path)], cwd=work,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, env={**os.environ, "RAY_ADDRESS": "local"})
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, proc, deadline_s=180)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
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
    (`add_share`) for random users of `users`, every request sent to the next of `bases`
    (round-robin over all clients' requests) or a random one (`spread="random"`)."""

    bases: tuple[str, ...]
    key: str
    users: tuple[str, ...]
    clients: int = 20
    seconds: float = 60.0
    add_share: float = 0.1
    spread: str = "round-robin"
    timeout_s: float = 30.0


async def _client(http: httpx.AsyncClient, load: Load, stop: float, rng: random.Random,
                  turn: Iterator[int], out: dict[str, list[float]],
                  errors: list[str]) -> None:
    headers = {"Authorization": f"Bearer {load.key}"}
    while time.monotonic() < stop:
        user = rng.choice(load.users)
        topic = rng.choice(TOPICS)
        base = (rng.choice(load.bases) if load.spread == "random"
                else load.bases[next(turn) % len(load.bases)])
        if rng.random() < load.add_share:
            op, path = "add", "/v1/memories"
            body: dict[str, Any] = {"user_id": user, "messages": f"I like {topic} a lot",
                                    "infer": False}
        else:
            op, path = "search", "/v1/memories/search"
            body = {"user_id": user, "query": f"what does the user think about {topic}?"}
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
        await asyncio.gather(*(_client(http, load, stop, random.Random(i), turn, out, errors)
                               for i in range(load.clients)))
        elapsed = time.monotonic() - start
    done = sum(len(v) for v in out.values()) + len(errors)
    return {"clients": load.clients, "seconds": round(elapsed, 1), "requests": done,
            "rps": round(done / elapsed, 1), "errors": len(errors),
            "error_kinds": sorted(set(errors))[:10],
            **{op: _pct(v) for op, v in out.items()}}


async def _load(base: str, args: ServeBenchArgs) -> dict[str, Any]:
    users = tuple(f"bench-{u}" for u in range(args.users))
    await seed(base, args.key, users, args.seed_per_user)
    row = await measure(Load(bases=(base,), key=args.key, users=users, clients=args.clients,
                             seconds=args.seconds, add_share=args.add_share))
    return {"url": base, **row}


def _pct(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"n": 0}
    a = np.asarray(samples)
    return {"n": len(samples), **{f"p{p}": round(float(np.percentile(a, p)), 1)
                                  for p in (50, 95, 99)}}


def run(args: ServeBenchArgs) -> dict[str, Any]:
    if args.url is not None:
        if not args.url.startswith(("http://127.", "http://localhost", "http://[::1]")):
            raise ValueError("memray bench serve sends load only to this machine (127.0.0.0/8)")
        return asyncio.run(_load(args.url, args))
    with local_server(args.config) as base:
        return asyncio.run(_load(base, args))

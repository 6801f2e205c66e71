"""`memray bench serve --milvus-uri URI --postgres-dsn DSN --replicas 1,2,3`: the same
closed-loop HTTP load as `memray bench serve`, against `memray api` replicas (plain uvicorn,
no Ray) that share one Milvus server and one PostgreSQL event log, and against the embedded
single replica (milvus-lite + SQLite in a temp data dir) as the baseline.

It starts max(replicas) replicas on 127.0.0.1 (free ports) with MEMRAY_MILVUS_URI and
MEMRAY_POSTGRES_DSN set, a collection prefix and user ids unique to this run and a
generated admin key in a temp keys file; seeds the users once; then, for each N, runs the
load spread over the first N replicas (round-robin per request, random, or affine: each
user's requests to the replica its id hashes to), users uniform or Zipf-distributed, and
reads each replica's hot-set loads from /metrics around the measured load: the hot-set
hit rate is 1 - loads / searches. Every process
it starts is stopped at the end, also on an error, Ctrl-C or SIGTERM; the run's Milvus
collections are dropped (its rows in the PostgreSQL log stay, under its own user ids).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import yaml

from memray.api.auth import ApiKey, KeyRing, hash_key, new_key
from memray.bench.serve import SPREADS, Load, _free_port, measure, seed

CLUSTER_ENV = ("MEMRAY_MILVUS_URI", "MEMRAY_POSTGRES_DSN")


@dataclass(frozen=True)
class ClusterBenchArgs:
    milvus_uri: str
    postgres_dsn: str
    replicas: tuple[int, ...] = (1, 2, 3)
    clients: int = 20
    seconds: float = 20.0
    users: int = 50
    seed_per_user: int = 20
    add_share: float = 0.1
    spread: str = "round-robin"  # or "random", "affine"
    zipf: float = 0.0  # 0: users uniform; else the Zipf exponent over users
    warmup_s: float = 3.0  # the same load, not recorded, before each configuration
    baseline: bool = True  # also the embedded single replica (milvus-lite + SQLite)
    memory: dict[str, Any] = field(default_factory=dict)  # MemoryConfig fields for all
    ready_timeout_s: float = 240.0


def parse_replicas(text: str) -> tuple[int, ...]:
    """'1,2,3' -> (1, 2, 3); each a positive integer."""
    try:
        out = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"--replicas wants a list like 1,2,3, not {text!r}") from None
    if not out or min(out) < 1:
        raise ValueError(f"--replicas wants positive integers, not {text!r}")
    return out


class Replica:
    """One `memray api` process in its own process group; its output goes to a log file."""

    def __init__(self, workdir: Path, name: str, env: dict[str, str], config: Path,
                 keys: Path, extra: Sequence[str] = ()) -> None:
        self.name = name
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / f"{name}.log"
        cmd = [sys.executable, "-m", "memray.cli", "api", "--keys", str(keys), "--config",
               str(config), "--data-dir", str(workdir / f"{name}-data"), "--host",
               "127.0.0.1", "--port", str(self.port), *extra]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def tail(self, chars: int = 2000) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]
        return ""

    def wait_ready(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"memray api {self.name} exited with "
                                   f"{self.proc.returncode}:\n{self.tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return
            time.sleep(0.5)
        raise RuntimeError(f"memray api {self.name} not ready in time:\n{self.tail()}")

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


@contextlib.contextmanager
def replicas(workdir: Path, names: Sequence[str], env: dict[str, str], config: Path,
             keys: Path, ready_timeout_s: float) -> Iterator[list[Replica]]:
    """Start the replicas together, wait until all answer /healthz, stop them all after."""
    started: list[Replica] = []
    try:
        for name in names:
            started.append(Replica(workdir, name, env, config, keys))
        deadline = time.monotonic() + ready_timeout_s
        for r in started:
            r.wait_ready(deadline)
        yield started
    finally:
        for r in started:
            r.stop()


@contextlib.contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so every `finally` (stopping the replicas) runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _drop_collections(uri: str, prefix: str, alias: str) -> None:
    """Drop this run's alias and collections from the Milvus server (best effort)."""
    from pymilvus import MilvusClient

    from memray.settings import load_settings

    token = load_settings().milvus_token or ""
    with contextlib.suppress(Exception):
        client = MilvusClient(uri=uri, token=token, timeout=30)
        try:
            with contextlib.suppress(Exception):
                client.drop_alias(alias)
            for name in client.list_collections():
                if name.startswith(prefix + "_"):
                    client.drop_collection(name)
        finally:
            client.close()


def _row(label: str, n: int, result: dict[str, Any], load_before: float) -> dict[str, Any]:
    return {"config": label, "replicas": n, **result,
            "load_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)]}


def _run_load(bases: Sequence[str], key: str, users: tuple[str, ...],
              args: ClusterBenchArgs) -> dict[str, Any]:
    def load(seconds: float) -> Load:
        return Load(bases=tuple(bases), key=key, users=users, clients=args.clients,
                    seconds=seconds, add_share=args.add_share, spread=args.spread,
                    zipf=args.zipf)

    if args.warmup_s > 0:
        asyncio.run(measure(load(args.warmup_s)))
    before = [hot_set_loads(b) for b in bases]
    result = asyncio.run(measure(load(args.seconds)))
    loads = sum(hot_set_loads(b) for b in bases) - sum(before)
    searches = int(result["search"].get("n", 0))
    return {**result, "hot_set": {"loads": loads, "searches": searches, "hit_rate":
                                  round(1 - loads / searches, 3) if searches else None}}


def hot_set_loads(base: str) -> int:
    """How often the replica at `base` read a user's memories whole (its /metrics)."""
    text = httpx.get(base + "/metrics", timeout=30).text
    line = next(x for x in text.splitlines() if x.startswith("memray_hot_set_loads "))
    return int(float(line.split()[1]))


def _check(args: ClusterBenchArgs) -> None:
    if not args.replicas or min(args.replicas) < 1:
        raise ValueError("replicas must be positive integers")
    if args.spread not in SPREADS:
        raise ValueError(f"spread is one of {', '.join(SPREADS)}")
    if args.zipf < 0:
        raise ValueError("zipf is 0 (uniform) or a positive exponent")


def run(args: ClusterBenchArgs, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """The embedded baseline, then the cluster for each N in `args.replicas`; one row per
    configuration (throughput, search and add percentiles, errors, 1-min load before/after).
    """
    _check(args)
    tag = secrets.token_hex(4)
    prefix = f"bench_{tag}"
    alias = f"{prefix}_memories"
    users = tuple(f"bench-{tag}-{u}" for u in range(args.users))
    key = new_key()
    workdir = Path(tempfile.mkdtemp(prefix="memray-bench-cluster-"))
    keys = workdir / "keys.yaml"
    ring = KeyRing(keys=[ApiKey(name="bench", sha256=hash_key(key), admin=True)])
    keys.write_text(yaml.safe_dump(ring.model_dump(mode="json")), encoding="utf-8")
    memory = {**args.memory, "store": {**args.memory.get("store", {}),
                                       "alias": alias, "collection_prefix": prefix}}
    config = workdir / "memory.yaml"
    config.write_text(yaml.safe_dump(memory), encoding="utf-8")
    base_env = {k: v for k, v in os.environ.items() if k not in CLUSTER_ENV}
    base_env["PYTHONUNBUFFERED"] = "1"
    cluster_env = {**base_env, "MEMRAY_MILVUS_URI": args.milvus_uri,
                   "MEMRAY_POSTGRES_DSN": args.postgres_dsn}
    rows: list[dict[str, Any]] = []
    try:
        with _stop_on_sigterm():
            if args.baseline:
                progress("embedded baseline: starting 1 replica (milvus-lite + SQLite)")
                with replicas(workdir, ["embedded"], base_env, config, keys,
                              args.ready_timeout_s) as (r,):
                    progress(f"seeding {len(users)} users x {args.seed_per_user}")
                    asyncio.run(seed(r.url, key, users, args.seed_per_user))
                    before = os.getloadavg()[0]
                    result = _run_load([r.url], key, users, args)
                    rows.append(_row("embedded: milvus-lite + SQLite", 1, result, before))
                    progress(f"embedded: {result['rps']} req/s, {result['errors']} errors")
            most = max(args.replicas)
            progress(f"cluster: starting {most} replicas on {args.milvus_uri} + PostgreSQL")
            names = [f"replica-{i}" for i in range(most)]
            with replicas(workdir, names, cluster_env, config, keys,
                          args.ready_timeout_s) as started:
                progress(f"seeding {len(users)} users x {args.seed_per_user}")
                asyncio.run(seed(started[0].url, key, users, args.seed_per_user))
                for n in args.replicas:
                    before = os.getloadavg()[0]
                    result = _run_load([r.url for r in started[:n]], key, users, args)
                    label = f"cluster: {n} replica{'s' if n > 1 else ''}, Milvus server " \
                            "+ PostgreSQL"
                    rows.append(_row(label, n, result, before))
                    progress(f"cluster x{n}: {result['rps']} req/s, "
                             f"{result['errors']} errors")
                    for r in started:
                        if r.proc.poll() is not None:
                            raise RuntimeError(f"memray api {r.name} died:\n{r.tail()}")
    finally:
        _drop_collections(args.milvus_uri, prefix, alias)
        shutil.rmtree(workdir, ignore_errors=True)
    return {"mode": "cluster", "clients": args.clients, "seconds": args.seconds,
            "users": args.users, "seed_per_user": args.seed_per_user,
            "add_share": args.add_share, "spread": args.spread, "zipf": args.zipf,
            "warmup_s": args.warmup_s,
            "cpus": os.cpu_count(), "rows": rows,
            "errors": sum(int(r["errors"]) for r in rows)}

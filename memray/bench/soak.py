"""`memray bench soak --minutes M`: mixed traffic against one `memray api` process (or,
with `--target serve`, the `memray serve` app of the local config) on 127.0.0.1 for M
minutes, then the store is checked against what the API acknowledged.

Clients (threads, closed loop) search, add verbatim memories (each text unique, so each
acknowledged add is one memory to find later), add conversation rounds for extraction,
delete memories they added, list pages and export. The process's RSS is sampled as it
runs. Afterwards the process is stopped and the data dir opened in process: every
acknowledged verbatim add not deleted must be there exactly once (else "lost"), no
acknowledged delete may be there (else "resurrected"), and the doctor must find the
vector store and the event log in agreement. A request whose answer never came (a
timeout) leaves its outcome in doubt: counted, never scored as lost or resurrected.
"""

from __future__ import annotations

import os
import random
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from memray.api.auth import ApiKey, hash_key, new_key
from memray.bench.cluster import Replica
from memray.config import MemoryConfig
from memray.core.memory import Memory

QUERIES = ("what do I like to drink?", "where do I live?", "what are my hobbies?",
           "我喜欢吃什么？", "when am I free?", "what pets do I have?")
ROUNDS = ("I live in {city} now", "I'm allergic to {thing}", "我喜欢{thing}",
          "I prefer {thing} in the morning", "My favourite city is {city}")
CITIES = ("Lisbon", "Hangzhou", "Oslo", "Kyoto", "Lima")
THINGS = ("peanuts", "oolong tea", "jazz", "cycling", "香菜", "sushi")


@dataclass(frozen=True)
class SoakArgs:
    minutes: float = 15.0
    clients: int = 8
    users: int = 20
    sample_s: float = 10.0
    timeout_s: float = 30.0
    seed: int = 7
    target: str = "api"  # or "serve": the Ray Serve app of serve_configs/local.yaml


@dataclass
class Ledger:
    """What the API acknowledged, per user; guarded by one lock."""

    acked: dict[str, set[str]]
    deleted: dict[str, set[str]]
    in_doubt: set[str]
    lock: threading.Lock


def run(args: SoakArgs, progress: Callable[[str], None] = print) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memray-soak-") as tmp:
        work = Path(tmp)
        key = new_key()
        keys = work / "keys.yaml"
        keys.write_text(yaml.safe_dump({"keys": [ApiKey(name="soak", sha256=hash_key(key),
                                                        admin=True).model_dump()]}))
        config = work / "memory.yaml"
        config.write_text(yaml.safe_dump({"data_dir": str(work / "soak-data")}))
        env = {k: v for k, v in os.environ.items()  # the embedded default, whatever is set
               if k not in ("MEMRAY_MILVUS_URI", "MEMRAY_POSTGRES_DSN")}
        if args.target == "serve":
            traffic = _soak_serve(args, work, key, progress)
        else:
            replica = Replica(work, "soak", env, config, keys)
            try:
                replica.wait_ready(time.monotonic() + 240)
                progress(f"memray api ready on {replica.url}; {args.clients} clients for "
                         f"{args.minutes} min")
                traffic = _drive(args, replica.url, lambda: replica.proc.pid, key, progress)
            finally:
                replica.stop()
        check = _verify(work / "soak-data", traffic.pop("ledger"))
        return {**traffic, "target": args.target, **check}


def _soak_serve(args: SoakArgs, work: Path, key: str,
                progress: Callable[[str], None]) -> dict[str, Any]:
    """The same traffic against `memray serve` (local.yaml with this run's key and data
    dir); RSS is the API replica's, the process that owns the store."""
    from memray.bench.serve import local_server
    from memray.serve_config import default_serve_config

    config = yaml.safe_load(Path(default_serve_config()).read_text(encoding="utf-8"))
    for app in config["applications"]:
        if app["import_path"] == "memray.serve:build_app":
            app["args"]["keys"] = [ApiKey(name="soak", sha256=hash_key(key),
                                          admin=True).model_dump()]
    path = work / "serve.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    with local_server(str(path), data_dir=work / "soak-data") as base:
        pid = _replica_pid()
        progress(f"memray serve ready on {base} (API replica pid {pid}); {args.clients} "
                 f"clients for {args.minutes} min")
        return _drive(args, base, lambda: pid, key, progress)


def _replica_pid() -> int:
    import subprocess

    found = subprocess.run(["pgrep", "-f", "ServeReplica:memray:memray-api"],
                           capture_output=True, text=True, check=False).stdout.split()
    return int(found[0]) if found else 0


def _drive(args: SoakArgs, url: str, pid: Callable[[], int], key: str,
           progress: Callable[[str], None]) -> dict[str, Any]:
    users = [f"soak-{i}" for i in range(args.users)]
    ledger = Ledger({u: set() for u in users}, {u: set() for u in users}, set(),
                    threading.Lock())
    ops: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    deadline = time.monotonic() + args.minutes * 60
    stop = threading.Event()
    rss: list[tuple[float, int]] = []

    def client(n: int) -> None:
        rng = random.Random(args.seed * 1000 + n)
        with httpx.Client(base_url=url, timeout=args.timeout_s,
                          headers={"Authorization": f"Bearer {key}"}) as http:
            i = 0
            while time.monotonic() < deadline:
                i += 1
                op = _one(http, rng, rng.choice(users), f"{n}-{i}", ledger)
                ops[op[0]] += 1
                if op[1]:
                    errors[f"{op[0]}: {op[1]}"] += 1

    threads = [threading.Thread(target=client, args=(n,), daemon=True)
               for n in range(args.clients)]
    sampler = threading.Thread(target=_sample_rss, args=(pid, args.sample_s, stop, rss,
                                                         progress, ops), daemon=True)
    start = time.monotonic()
    for t in [*threads, sampler]:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    sampler.join()
    seconds = time.monotonic() - start
    return {"minutes": args.minutes, "clients": args.clients, "users": args.users,
            "requests": sum(ops.values()), "req_per_s": round(sum(ops.values()) / seconds, 1),
            "ops": dict(ops), "errors": dict(errors), "error_count": sum(errors.values()),
            "rss_mb": [round(r / 2**20, 1) for _, r in rss],
            "rss_growth_mb_per_min": _growth(rss), "ledger": ledger}


def _one(http: httpx.Client, rng: random.Random, user: str, tag: str,
         ledger: Ledger) -> tuple[str, str]:
    """One request; (op, error kind or "")."""
    roll = rng.random()
    try:
        if roll < 0.5:
            r = http.post("/v1/memories/search", json={"user_id": user,
                                                       "query": rng.choice(QUERIES)})
            return "search", _status(r)
        if roll < 0.7:
            text = f"soak note {tag}: I keep {rng.choice(THINGS)} at home"
            r = http.post("/v1/memories", json={"user_id": user, "messages": text,
                                                "infer": False})
            if r.status_code == 200:
                with ledger.lock:
                    ledger.acked[user].update(e["memory_id"] for e in r.json()["events"]
                                              if e["op"] == "ADD")
            return "add_verbatim", _status(r)
        if roll < 0.8:
            said = rng.choice(ROUNDS).format(city=rng.choice(CITIES), thing=rng.choice(THINGS))
            r = http.post("/v1/memories", json={
                "user_id": f"{user}-x", "messages": [{"role": "user", "content": said},
                                                     {"role": "assistant", "content": "ok"}]})
            return "add_extracted", _status(r)
        if roll < 0.9:
            return "delete", _delete(http, rng, user, ledger)
        if roll < 0.95:
            r = http.get("/v1/memories", params={"user_id": user, "limit": 20})
            return "list", _status(r)
        return "export", _status(http.get(f"/v1/users/{user}/export"))
    except httpx.HTTPError as exc:
        return "transport", type(exc).__name__


def _delete(http: httpx.Client, rng: random.Random, user: str, ledger: Ledger) -> str:
    with ledger.lock:
        live = sorted(ledger.acked[user] - ledger.deleted[user] - ledger.in_doubt)
        if not live:
            return ""
        mid = rng.choice(live)
        ledger.in_doubt.add(mid)  # until the answer comes
    try:
        r = http.delete(f"/v1/memories/{mid}", params={"user_id": user})
    except httpx.HTTPError:
        return "timeout (in doubt)"
    with ledger.lock:
        ledger.in_doubt.discard(mid)
        if r.status_code == 200:
            ledger.deleted[user].add(mid)
    return _status(r)


def _status(r: httpx.Response) -> str:
    """"" on success, else the status and the API's error code ("404 not_found"), so a
    route that did not match tells itself apart from a memory that was not found."""
    if r.status_code < 300:
        return ""
    try:
        body = r.json()
    except ValueError:
        body = None
    code = body.get("error") if isinstance(body, dict) else None
    return f"{r.status_code} {code}" if isinstance(code, str) else str(r.status_code)


def _sample_rss(pid: Callable[[], int], every_s: float, stop: threading.Event,
                out: list[tuple[float, int]], progress: Callable[[str], None],
                ops: Counter[str]) -> None:
    start = time.monotonic()
    while not stop.is_set():
        rss = _rss_bytes(pid())
        if rss:
            out.append((time.monotonic() - start, rss))
            progress(f"[soak {out[-1][0]:6.0f}s] rss {rss / 2**20:.0f} MB, "
                     f"{sum(ops.values())} requests")
        stop.wait(every_s)


def _rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _growth(rss: list[tuple[float, int]]) -> float | None:
    """MB per minute, least squares over the samples after the first minute (warm-up:
    the model, caches and the hot set fill first)."""
    points = [(t / 60, r / 2**20) for t, r in rss if t >= 60]
    if len(points) < 3:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    var = sum((x - mx) ** 2 for x, _ in points)
    return round(sum((x - mx) * (y - my) for x, y in points) / var, 2) if var else None


def _verify(data_dir: Path, ledger: Ledger) -> dict[str, Any]:
    lost = resurrected = duplicated = 0
    with Memory(MemoryConfig(data_dir=str(data_dir))) as m:
        for user, acked in ledger.acked.items():
            ids = _all_ids(m, user)
            held = Counter(ids)
            duplicated += sum(1 for n in held.values() if n > 1)
            expected = acked - ledger.deleted[user] - ledger.in_doubt
            lost += len(expected - set(held))
            resurrected += len(ledger.deleted[user] & set(held))
        report = m.doctor()
    return {"checked_users": len(ledger.acked),
            "acknowledged_adds": sum(len(a) for a in ledger.acked.values()),
            "acknowledged_deletes": sum(len(d) for d in ledger.deleted.values()),
            "in_doubt": len(ledger.in_doubt), "lost": lost, "resurrected": resurrected,
            "duplicated": duplicated, "doctor_problems": report.problems}


def _all_ids(m: Memory, user: str) -> list[str]:
    ids, cursor = [], None
    while True:
        page = m.get_all(user_id=user, cursor=cursor, limit=500)
        ids += [r.id for r in page.items]
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor

"""Cluster mode for real: 3 API processes (`memray api`) on one Milvus server and one
PostgreSQL, a backfill job (Ray) writing at the same time, concurrent clients doing mixed
adds, async adds, updates, deletes, forgets and searches over 50 users, and one API
process killed with SIGKILL mid-run. Then every invariant is checked against what the
clients were told (acknowledged writes) and against the shared log.

Bounded: traffic goes to 127.0.0.1 only, ~2,000 requests, each client stops by itself.
"""

from __future__ import annotations

import json
import os
import random
import signal
import string
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import yaml

from memray.api.auth import ApiKey, KeyRing, hash_key
from memray.models import MemoryRecord, utcnow
from memray.store.base import StoredMemory
from memray.store.events import StoreOp

pytestmark = [pytest.mark.postgres, pytest.mark.milvus_server]

ROOT = Path(__file__).resolve().parents[2]
ADMIN = "mr_multiprocess_admin_key"
USERS = [f"mp-u{i:02d}" for i in range(50)]
OPS = 1500  # with the kill at a third: enough to cross it under load, inside the suite budget
CLIENTS = 6
KILL_AT = OPS // 3


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(9))


@dataclass
class Ledger:
    """What the clients were told: acknowledged writes and when."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    added: dict[str, tuple[str, int, float]] = field(default_factory=dict)  # id -> user, v, t
    deleted: dict[str, float] = field(default_factory=dict)  # id -> when the delete was acked
    forgot: list[tuple[str, str, float]] = field(default_factory=list)  # user, word, t
    # user -> (request start, ack time, version after) of each acknowledged delete_all
    wiped: dict[str, list[tuple[float, float, int]]] = field(
        default_factory=lambda: defaultdict(list))
    versions: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    jobs: list[tuple[str, str]] = field(default_factory=list)  # (job_id, user)
    errors: list[str] = field(default_factory=list)
    words: dict[str, str] = field(default_factory=dict)  # memory id -> its unique word
    # Deletions sent to the replica that was killed and never answered: they may or may not
    # have happened. (kind, user, memory id or word, request start)
    doubt: list[tuple[str, str, str, float]] = field(default_factory=list)
    resurrected: list[str] = field(default_factory=list)
    done: int = 0


class Replica:
    def __init__(self, workdir: Path, index: int, env: dict[str, str], config: Path,
                 keys: Path) -> None:
        from milvus_server import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / f"api-{index}.log"
        cmd = [sys.executable, "-m", "memray.cli", "api", "--keys", str(keys), "--config",
               str(config), "--data-dir", str(workdir / f"scratch-{index}"), "--port",
               str(self.port), "--job-lease-s", "3"]
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log.open("wb"),
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_ready(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise AssertionError(f"replica on {self.url} not ready: {self.log.read_text()[-2000:]}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture
def cluster(tmp_path: Path, milvus_server: str,
            fresh_postgres_dsn: str) -> Iterator[tuple[list[Replica], dict[str, str], Path]]:
    keys = tmp_path / "keys.yaml"
    ring = KeyRing(keys=[ApiKey(name="admin", sha256=hash_key(ADMIN), admin=True)])
    keys.write_text(yaml.safe_dump(ring.model_dump(mode="json")))
    config = tmp_path / "memory.yaml"
    prefix = f"mp{int(time.time() * 1000) % 10**8}"
    config.write_text(yaml.safe_dump({"store": {
        "alias": f"{prefix}_memories", "collection_prefix": prefix, "outbox_retry_s": 0.5,
        "strong_window_s": 10}}))
    env = {**os.environ, "MEMRAY_MILVUS_URI": milvus_server,
           "MEMRAY_POSTGRES_DSN": fresh_postgres_dsn, "PYTHONUNBUFFERED": "1",
           "OMP_NUM_THREADS": "1"}
    replicas = [Replica(tmp_path, i, env, config, keys) for i in range(3)]
    try:
        deadline = time.monotonic() + 240
        for r in replicas:
            r.wait_ready(deadline)
        yield replicas, env, config
    finally:
        for r in replicas:
            r.stop()


def _backfill(tmp_path: Path, env: dict[str, str], config: Path) -> subprocess.Popen[bytes]:
    memory = yaml.safe_load(config.read_text())
    memory["data_dir"] = str(tmp_path / "backfill-scratch")
    job = {"memory": memory, "input": [str(ROOT / "tests/data/logs/sample.jsonl")],
           "infer": True, "ray": {"num_cpus": 2},
           "embed": {"actors": 1, "cpus_per_actor": 1}}
    path = tmp_path / "backfill.yaml"
    path.write_text(yaml.safe_dump(job))
    log = (tmp_path / "backfill.log").open("wb")
    return subprocess.Popen([sys.executable, str(ROOT / "jobs/backfill.py"), "--config",
                             str(path)], env={**env, "RAY_AUTH_MODE": "disabled"},
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


class Client:
    """One closed-loop client: a random mix of operations on random users."""

    def __init__(self, seed: int, replicas: list[Replica], ledger: Ledger,
                 budget: list[int]) -> None:
        self.rng = random.Random(seed)
        self.replicas, self.ledger, self.budget = replicas, ledger, budget
        self.http = httpx.Client(timeout=30, headers={"Authorization": f"Bearer {ADMIN}"})
        self.mine: dict[str, list[tuple[str, str]]] = defaultdict(list)  # user -> (id, word)

    def run(self) -> None:
        while True:
            with self.ledger.lock:
                if self.budget[0] <= 0:
                    return
                self.budget[0] -= 1
            user = self.rng.choice(USERS)
            kind = self.rng.choices(["add", "async", "update", "delete", "forget", "search",
                                     "wipe"], [35, 8, 10, 10, 6, 30, 1])[0]
            replica = self.rng.choice([r for r in self.replicas if r.alive()])
            # A killed replica's answer never comes: the outcome is unknown, not acknowledged.
            self.inflight: tuple[str, str, str, float] | None = None
            try:
                getattr(self, "_" + kind)(replica.url, user)
            except httpx.TransportError:
                if self.inflight is not None:
                    with self.ledger.lock:
                        self.ledger.doubt.append(self.inflight)
            with self.ledger.lock:
                self.ledger.done += 1

    def _ack(self, response: httpx.Response, user: str) -> dict[str, Any] | None:
        if response.status_code >= 500:
            self.ledger.errors.append(f"{response.status_code} {response.text[:200]}")
            return None
        body: dict[str, Any] = response.json()
        changed = "events" not in body or any(e["op"] != "NOOP" for e in body["events"])
        # Only a write that changed something bumps the version; a NOOP reports it as is.
        if response.status_code < 300 and "version" in body and changed:
            with self.ledger.lock:
                self.ledger.versions[user].append(body["version"])
        return body

    def _add(self, url: str, user: str) -> None:
        word = _word(self.rng)
        text = f"I keep a {word} notebook"
        body = self._ack(self.http.post(url + "/v1/memories", json={
            "user_id": user, "messages": text, "infer": False}), user)
        if body is None:
            return
        now = time.monotonic()
        for event in body["events"]:
            if event["op"] == "ADD":
                with self.ledger.lock:
                    self.ledger.added[event["memory_id"]] = (user, body["version"], now)
                self.mine[user].append((event["memory_id"], word))
                self.ledger.words[event["memory_id"]] = word

    def _async(self, url: str, user: str) -> None:
        text = f"I keep a {_word(self.rng)} diary"
        r = self.http.post(url + "/v1/memories", json={
            "user_id": user, "messages": text, "infer": False, "async": True})
        if r.status_code == 202:
            with self.ledger.lock:
                self.ledger.jobs.append((r.json()["job_id"], user))

    def _pick(self, user: str) -> tuple[str, str] | None:
        live = [(i, w) for i, w in self.mine[user] if i not in self.ledger.deleted]
        return self.rng.choice(live) if live else None

    def _update(self, url: str, user: str) -> None:
        picked = self._pick(user)
        if picked is None:
            return
        self._ack(self.http.put(f"{url}/v1/memories/{picked[0]}", params={"user_id": user},
                                json={"content": f"I keep a {picked[1]} notebook, still"}),
                  user)

    def _delete(self, url: str, user: str) -> None:
        picked = self._pick(user)
        if picked is None:
            return
        self.inflight = ("delete", user, picked[0], time.monotonic())
        r = self.http.delete(f"{url}/v1/memories/{picked[0]}", params={"user_id": user})
        if self._ack(r, user) is not None and r.status_code == 200:
            with self.ledger.lock:
                self.ledger.deleted[picked[0]] = time.monotonic()

    def _forget(self, url: str, user: str) -> None:
        picked = self._pick(user)
        if picked is None:
            return
        self.inflight = ("forget", user, picked[1], time.monotonic())
        r = self.http.post(url + "/v1/memories", json={
            "user_id": user, "messages": f"please delete all your memories about {picked[1]}"})
        if self._ack(r, user) is not None and r.status_code == 200:
            with self.ledger.lock:
                self.ledger.forgot.append((user, picked[1], time.monotonic()))
                for event in r.json()["events"]:
                    if event["op"] == "DELETE":
                        self.ledger.deleted[event["memory_id"]] = time.monotonic()

    def _wipe(self, url: str, user: str) -> None:
        started = time.monotonic()
        self.inflight = ("wipe", user, "", started)
        r = self.http.delete(f"{url}/v1/users/{user}/memories")
        if self._ack(r, user) is not None and r.status_code == 200:
            with self.ledger.lock:
                self.ledger.wiped[user].append((started, time.monotonic(),
                                                r.json()["version"]))

    def _search(self, url: str, user: str) -> None:
        started = time.monotonic()
        with self.ledger.lock:  # deletions acknowledged before this search began
            gone = {i for i, t in self.ledger.deleted.items() if t < started}
            # memories acknowledged before a delete_all began that was acknowledged
            # before this search began
            wipes = [w for w in self.ledger.wiped.get(user, []) if w[1] < started]
            gone |= {i for i, (u, _, t) in self.ledger.added.items()
                     if u == user and any(t < w[0] for w in wipes)}
        r = self.http.post(url + "/v1/memories/search", json={
            "user_id": user, "query": "which notebook do I keep", "threshold": -1,
            "top_k": 50})
        body = self._ack(r, user)
        if body is None or r.status_code != 200:
            return
        for hit in body["results"]:
            memory = hit["memory"]
            assert memory["user_id"] == user  # another user's memory: never
            if memory["id"] in gone:
                with self.ledger.lock:
                    self.ledger.resurrected.append(memory["id"])


def _orphan_op(dsn: str, user: str, embed_text: str) -> str:
    """Commit a write to the shared log and never apply it: a replica that died between
    its commit and its store call. Returns the memory id; a live replica must apply it."""
    from memray.core.ids import new_id
    from memray.embed.sentence import SentenceTransformerEmbedder
    from memray.models import MemoryEvent, MemoryType, content_hash
    from memray.store.postgres_log import PostgresEventLog

    embedder = SentenceTransformerEmbedder()
    embedder.open()
    now = utcnow()
    record = MemoryRecord(id=new_id(), user_id=user, type=MemoryType.MESSAGE, content=embed_text,
                          created_at=now, updated_at=now, last_confirmed_at=now,
                          embedding_model=embedder.model, content_hash=content_hash(embed_text))
    log = PostgresEventLog(dsn, dim=embedder.dim, pool_size=2)
    log.open()
    try:
        vector = np.asarray(embedder.embed([embed_text])[0], dtype=np.float32)
        log.commit(user, [MemoryEvent(op="ADD", memory_id=record.id, user_id=user,
                                      memory=record, at=now)],
                   [StoreOp("replace", user, rows=(StoredMemory(record, vector),))])
    finally:
        log.close()
    return record.id


def test_three_replicas_a_backfill_and_a_sigkill(
        cluster: tuple[list[Replica], dict[str, str], Path], tmp_path: Path,
        fresh_postgres_dsn: str) -> None:
    replicas, env, config = cluster
    backfill = _backfill(tmp_path, env, config)
    ledger, budget = Ledger(), [OPS]
    clients = [Client(seed, replicas, ledger, budget) for seed in range(CLIENTS)]
    threads = [threading.Thread(target=c.run) for c in clients]
    for t in threads:
        t.start()
    victim = replicas[2]
    while ledger.done < KILL_AT:
        time.sleep(0.05)
    burst = _async_burst(victim, ledger)
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait(timeout=10)
    orphan = _orphan_op(fresh_postgres_dsn, "mp-orphan", "I keep an orphaned notebook")
    for t in threads:
        t.join(timeout=600)
    assert backfill.wait(timeout=600) == 0, (tmp_path / "backfill.log").read_text()[-3000:]
    live = [r for r in replicas if r.alive()]
    assert len(live) == 2
    _check(live, ledger, burst, orphan)


def _async_burst(victim: Replica, ledger: Ledger) -> list[tuple[str, str]]:
    """Async adds acknowledged (202) by the replica about to die."""
    http = httpx.Client(timeout=30, headers={"Authorization": f"Bearer {ADMIN}"})
    out = []
    for i in range(15):
        user = USERS[i]
        r = http.post(victim.url + "/v1/memories", json={
            "user_id": user, "messages": f"I keep a burst{string.ascii_lowercase[i]} ledger",
            "infer": False, "async": True})
        assert r.status_code == 202
        out.append((r.json()["job_id"], user))
    with ledger.lock:
        ledger.jobs.extend(out)
    return out


def _wait_jobs(http: httpx.Client, url: str, jobs: list[tuple[str, str]],
               wiped: set[str]) -> None:
    deadline = time.monotonic() + 120
    pending = list(jobs)
    while pending and time.monotonic() < deadline:
        pending = [(j, u) for j, u in pending if http.get(
            f"{url}/v1/jobs/{j}", params={"user_id": u}).json()["status"] == "queued"]
        time.sleep(0.5)
    assert not pending, f"{len(pending)} async adds never finished"
    for job_id, user in jobs:
        job = http.get(f"{url}/v1/jobs/{job_id}", params={"user_id": user}).json()
        if user in wiped and job["status"] == "failed":  # queued when delete_all came
            assert job["error"].startswith("cancelled") and job["result"] is None, job
        else:
            assert job["status"] == "done", job


def _check(live: list[Replica], ledger: Ledger, burst: list[tuple[str, str]],
           orphan: str) -> None:
    http = httpx.Client(timeout=60, headers={"Authorization": f"Bearer {ADMIN}"})
    assert ledger.errors == []
    assert ledger.resurrected == []
    _wait_jobs(http, live[0].url, ledger.jobs, set(ledger.wiped))  # the dead one's too
    for user, versions in ledger.versions.items():
        assert len(versions) == len(set(versions)), f"{user}: two writes, one version"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and http.get(
            f"{live[0].url}/v1/memories/{orphan}", params={"user_id": "mp-orphan"},
    ).status_code != 200:
        time.sleep(0.5)  # the background drain of a live replica applies it
    found = http.get(f"{live[0].url}/v1/memories/{orphan}", params={"user_id": "mp-orphan"})
    assert found.status_code == 200, "a dead writer's committed op was never applied"
    by_user: dict[str, list[dict[str, Any]]] = {}
    for user in USERS:
        items = http.get(f"{live[0].url}/v1/memories",
                         params={"user_id": user, "limit": 1000}).json()["items"]
        by_user[user] = items
        ids = [i["id"] for i in items]
        assert len(ids) == len(set(ids))
        contents = [i["content"] for i in items]
        assert len(contents) == len(set(contents)), f"{user}: a duplicate memory"
        assert all(i["user_id"] == user for i in items)
    _check_acknowledged(ledger, by_user)
    for replica in live:  # no replica returns a deleted memory
        for memory_id in list(ledger.deleted)[:200]:
            user = ledger.added[memory_id][0]
            r = http.get(f"{replica.url}/v1/memories/{memory_id}", params={"user_id": user})
            assert r.status_code == 404, (replica.url, memory_id)
    stored_burst = {i["content"] for u in USERS for i in by_user[u] if "burst" in i["content"]}
    wiped = set(ledger.wiped)
    expected = {f"I keep a burst{string.ascii_lowercase[i]} ledger"
                for i, (_, u) in enumerate(burst) if u not in wiped}
    assert expected <= stored_burst


def _maybe_deleted(ledger: Ledger, memory_id: str, user: str, acked: float) -> bool:
    for kind, who, target, _ in ledger.doubt:
        if who != user:
            continue
        if (kind == "delete" and target == memory_id) or (
                kind == "forget" and ledger.words.get(memory_id) == target) or (
                kind == "wipe"):  # it ran, if at all, before the kill: any earlier add
            return True
    return False


def _check_acknowledged(ledger: Ledger, by_user: dict[str, list[dict[str, Any]]]) -> None:
    present = {i["id"] for items in by_user.values() for i in items}
    in_doubt = 0
    for memory_id, (user, version, acked) in ledger.added.items():
        wiped_after = any(v > version for _, _, v in ledger.wiped.get(user, []))
        if memory_id in ledger.deleted or wiped_after:
            assert memory_id not in present, f"deleted memory {memory_id} is back"
        elif _maybe_deleted(ledger, memory_id, user, acked):
            in_doubt += 1  # an unanswered deletion may have removed it: either is right
        else:
            assert memory_id in present, f"acknowledged add {memory_id} of {user} lost"
    assert in_doubt <= 60, "an unanswered deletion cannot explain this many absences"
    print(json.dumps({"acknowledged_adds": len(ledger.added), "deletes": len(ledger.deleted),
                      "in_doubt": in_doubt, "unanswered_deletions": len(ledger.doubt),
                      "forgets": len(ledger.forgot), "wipes": len(ledger.wiped),
                      "async_jobs": len(ledger.jobs),
                      "writes_with_versions": sum(map(len, ledger.versions.values()))}))

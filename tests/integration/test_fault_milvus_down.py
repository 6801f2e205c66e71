"""The Milvus server stops mid-run (issue 13, section 3), with real processes on 127.0.0.1:
a Milvus standalone server of this test's own (ports of its own, so it runs beside the
session's shared one) and a `memray api` process on it with the embedded SQLite log
(`store.timeout_s` STORE_TIMEOUT_S, the outbox drained every 0.5 s).

Twice, while clients add, delete and read through the REST API:
  1. crash: SIGKILL the server the moment a write has been committed to the log and its
     store call has begun, so that write is acknowledged from the log alone and must be
     applied later by the outbox drain;
  2. stop: SIGTERM; the server half-serves while it shuts down (Milvus 2.3.5 does not
     finish), and is SIGKILLed HALF_ALIVE_S later.
Then the server comes back on the same data dir (same ports). Checked:
  - an add is acknowledged (200, and then its memory is in the log) or refused with 503
    `{error: store_unavailable, detail}` (and then it is in neither log nor store); a
    delete likewise; an async add accepted meanwhile ends done or failed with the reason;
  - every answer is 200 or that 503 (never a 500) and comes within a bound: a read
    while the server half-serves within one store call timeout (HALF_ALIVE_BOUND_S), any
    503 within two (WRITE_BOUND_S), anything within READ_BOUND_S;
  - after the server is back the outbox drains, and the store matches the log: every
    acknowledged add there exactly once, no acknowledged delete back, no refused add or
    delete taking effect, the doctor reporting no problem for any user.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from milvus_server import MilvusServer, available

from memray.api.auth import ApiKey, hash_key, new_key
from memray.bench.cluster import Replica

pytestmark = pytest.mark.milvus_server

USERS = tuple(f"fault-{i}" for i in range(4))
READ_BOUND_S = 30.0  # any request answers (200 or 503) within this, whatever Milvus does
RECOVER_BOUND_S = 120.0  # server back -> outbox drained and reads answering
STORE_TIMEOUT_S = 3.0  # store.timeout_s of the API: the bound of one Milvus call
HALF_ALIVE_S = 10.0  # how long the stopping server is left half-serving before SIGKILL
# A read fails at its first failing Milvus call, so it answers within one call timeout
# (plus slack for a loaded machine), long before the stopping server goes away.
HALF_ALIVE_BOUND_S = STORE_TIMEOUT_S + 2
# A write may first wait for the user's lock while the outbox drain's call fails, then
# fails at its own call: two call timeouts.
WRITE_BOUND_S = 2 * STORE_TIMEOUT_S + 3
THINGS = ("umbrella", "bicycle", "guitar", "telescope", "kettle", "chess set")


@dataclass
class Ledger:
    """What the API answered, under one lock."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (user, content)
    refused_adds: dict[str, str] = field(default_factory=dict)  # content -> user
    deleted: set[str] = field(default_factory=set)  # acknowledged deletes
    refused_deletes: set[str] = field(default_factory=set)
    in_doubt: set[str] = field(default_factory=set)  # ids or contents with no answer
    deleting: set[str] = field(default_factory=set)
    bad: list[str] = field(default_factory=list)  # answers that break the contract
    slow: list[str] = field(default_factory=list)  # answers past READ_BOUND_S
    counts: Counter[str] = field(default_factory=Counter)
    worst_503_s: float = 0.0

    def answer(self, op: str, r: httpx.Response, took: float) -> None:
        with self.lock:
            self.counts[f"{op} {r.status_code}"] += 1
            if took > READ_BOUND_S:
                self.slow.append(f"{op} {r.status_code} after {took:.1f} s")
            if r.status_code == 200:
                return
            if r.status_code != 503 or _error_body(r) is None:
                self.bad.append(f"{op} -> {r.status_code} {r.text[:300]}")
                return
            self.worst_503_s = max(self.worst_503_s, took)

    def live(self, user: str) -> list[str]:
        with self.lock:
            return sorted(m for m, (u, _) in self.acked.items() if u == user
                          and m not in self.deleted and m not in self.in_doubt
                          and m not in self.deleting)


def _error_body(r: httpx.Response) -> dict[str, Any] | None:
    """The `{error, detail}` body of a store outage, else None."""
    try:
        body = r.json()
    except ValueError:
        return None
    ok = (isinstance(body, dict) and set(body) == {"error", "detail"}
          and body["error"] == "store_unavailable" and isinstance(body["detail"], str)
          and body["detail"] != "")
    return body if ok else None


class Traffic:
    """One writer thread per user (adds, and deletes of its own acknowledged adds) and
    one reader thread (search, list, get, context), until `stop()`."""

    def __init__(self, url: str, key: str, ledger: Ledger, phase: str) -> None:
        self.url, self.key, self.ledger, self.phase = url, key, ledger, phase
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._write, args=(u,), daemon=True)
                         for u in USERS]
        self._threads.append(threading.Thread(target=self._read, daemon=True))

    def start(self) -> Traffic:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=READ_BOUND_S * 2)
        assert not any(t.is_alive() for t in self._threads), "a client is still waiting"

    def _client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=READ_BOUND_S * 2,
                            headers={"Authorization": f"Bearer {self.key}"})

    def _write(self, user: str) -> None:
        rng = random.Random(f"{self.phase}-{user}")
        with self._client() as http:
            n = 0
            while not self._stop.is_set():
                n += 1
                live = self.ledger.live(user)
                if live and n % 3 == 0:
                    delete(http, self.ledger, user, rng.choice(live))
                else:
                    add(http, self.ledger, user, f"{self.phase}-{n}: I keep a "
                        f"{rng.choice(THINGS)} in room {rng.randrange(1000)}")
                time.sleep(0.02)

    def _read(self) -> None:
        rng = random.Random(self.phase)
        with self._client() as http:
            while not self._stop.is_set():
                user = rng.choice(USERS)
                read(http, self.ledger, rng.choice(("search", "list", "get", "context")),
                     user, rng)
                time.sleep(0.05)


def add(http: httpx.Client, ledger: Ledger, user: str, text: str) -> httpx.Response | None:
    content = f"{user} note {text}"
    r = _send(ledger, "add", content, lambda: http.post(
        "/v1/memories", json={"user_id": user, "messages": content, "infer": False}))
    if r is None:
        return None
    with ledger.lock:
        if r.status_code == 200:
            ids = [e["memory_id"] for e in r.json()["events"] if e["op"] == "ADD"]
            if len(ids) != 1:
                ledger.bad.append(f"add -> {r.text[:300]}")
            for mid in ids:
                ledger.acked[mid] = (user, content)
        elif r.status_code == 503:
            ledger.refused_adds[content] = user
    return r


def _send(ledger: Ledger, op: str, subject: str,
          call: Callable[[], httpx.Response]) -> httpx.Response | None:
    """One write, timed into the ledger; no answer leaves `subject` in doubt (None)."""
    start = time.monotonic()
    try:
        r = call()
    except httpx.HTTPError as exc:
        with ledger.lock:
            ledger.in_doubt.add(subject)
            ledger.slow.append(f"{op}: no answer ({type(exc).__name__})")
        return None
    ledger.answer(op, r, time.monotonic() - start)
    return r


def delete(http: httpx.Client, ledger: Ledger, user: str, mid: str) -> httpx.Response | None:
    with ledger.lock:
        ledger.deleting.add(mid)
    r = _send(ledger, "delete", mid, lambda: http.delete(f"/v1/memories/{mid}",
                                                         params={"user_id": user}))
    if r is None:
        return None
    with ledger.lock:
        ledger.deleting.discard(mid)
        if r.status_code == 200:
            ledger.deleted.add(mid)
        elif r.status_code == 503:
            ledger.refused_deletes.add(mid)
    return r


def read(http: httpx.Client, ledger: Ledger, op: str, user: str,
         rng: random.Random) -> httpx.Response | None:
    start = time.monotonic()
    try:
        if op == "search":
            r = http.post("/v1/memories/search", json={"user_id": user,
                                                       "query": "what do I keep?"})
        elif op == "context":
            r = http.post("/v1/context", json={"user_id": user, "query": "my things"})
        elif op == "list":
            r = http.get("/v1/memories", params={"user_id": user, "limit": 20})
        else:
            live = ledger.live(user)
            if not live:
                return None
            r = http.get(f"/v1/memories/{rng.choice(live)}", params={"user_id": user})
            if r.status_code == 404:  # deleted meanwhile by the writer: fine
                return r
    except httpx.HTTPError as exc:
        with ledger.lock:
            ledger.slow.append(f"{op}: no answer ({type(exc).__name__})")
        return None
    ledger.answer(op, r, time.monotonic() - start)
    return r


def outbox_rows(db: Path) -> int:
    with sqlite3.connect(db, timeout=10) as conn:
        return int(conn.execute("SELECT count(*) FROM outbox").fetchone()[0])


def logged_ids(db: Path) -> set[str]:
    with sqlite3.connect(db, timeout=10) as conn:
        return {row[0] for row in conn.execute("SELECT DISTINCT memory_id FROM events")}


def logged_text(db: Path) -> str:
    with sqlite3.connect(db, timeout=10) as conn:
        return "\n".join(row[0] for row in conn.execute("SELECT body FROM events"))


def wait_recovered(http: httpx.Client, db: Path, since: float) -> float:
    """Seconds from `since` until the outbox is empty and every user's reads answer 200."""
    deadline = time.monotonic() + RECOVER_BOUND_S
    while time.monotonic() < deadline:
        if outbox_rows(db) == 0 and all(
                http.post("/v1/memories/search",
                          json={"user_id": u, "query": "what do I keep?"}).status_code == 200
                for u in USERS):
            return time.monotonic() - since
        time.sleep(0.5)
    raise AssertionError(f"not recovered {RECOVER_BOUND_S} s after Milvus came back: "
                         f"{outbox_rows(db)} outbox row(s) left")


def store_ids(http: httpx.Client, user: str) -> list[tuple[str, str]]:
    """(id, content) of every memory the store holds for the user, through the API."""
    out: list[tuple[str, str]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"user_id": user, "limit": 1000}
        if cursor:
            params["cursor"] = cursor
        r = http.get("/v1/memories", params=params)
        assert r.status_code == 200, r.text
        page = r.json()
        out += [(m["id"], m["content"]) for m in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return out


def verify(http: httpx.Client, ledger: Ledger, db: Path) -> dict[str, int]:
    """The store agrees with the ledger and with the log; returns the counts checked."""
    held: Counter[str] = Counter()
    contents: set[str] = set()
    for user in USERS:
        for mid, content in store_ids(http, user):
            held[mid] += 1
            contents.add(content)
    with ledger.lock:
        acked = {m for m in ledger.acked if m not in ledger.in_doubt}
        expected = acked - ledger.deleted
        refused = {c for c in ledger.refused_adds if c not in ledger.in_doubt}
        kept = ledger.refused_deletes - ledger.deleted - ledger.in_doubt
        deleted = set(ledger.deleted)
    in_log = logged_ids(db)
    text = logged_text(db)
    assert not [m for m, n in held.items() if n > 1], "a memory is held more than once"
    assert expected - set(held) == set(), "acknowledged adds lost"
    assert expected - in_log == set(), "acknowledged adds not in the log"
    assert deleted & set(held) == set(), "acknowledged deletes came back"
    assert refused & contents == set(), "a refused add was stored"
    assert not [c for c in refused if json.dumps(c)[1:-1] in text], "a refused add was logged"
    assert kept - set(held) == set(), "a refused delete deleted"
    assert set(held) <= acked | ledger.in_doubt, "the store holds memories nobody added"
    for user in USERS:
        r = http.get(f"/v1/users/{user}/doctor")
        assert r.status_code == 200, r.text
        report = r.json()
        assert report["problems"] == 0, report
    assert outbox_rows(db) == 0
    return {"held": sum(held.values()), "acked_adds": len(acked), "acked_deletes": len(deleted),
            "refused_adds": len(refused), "refused_deletes": len(kept)}


def probe_outage(http: httpx.Client, ledger: Ledger, phase: str) -> dict[str, float]:
    """Each read and write once while the server is gone: 503 with the body, in bound."""
    user = USERS[0]
    live = ledger.live(user)
    took: dict[str, float] = {}
    rng = random.Random(0)
    for op in ("search", "context", "list", "get"):
        if op == "get" and not live:
            continue
        start = time.monotonic()
        r = read(http, ledger, op, user, rng)
        assert r is not None and r.status_code == 503 and _error_body(r), \
            (op, r and r.status_code, r and r.text)
        took[op] = time.monotonic() - start
    start = time.monotonic()
    r = add(http, ledger, user, f"{phase} probe: I keep a lamp in the hall")
    assert r is not None and r.status_code == 503 and _error_body(r), r and r.text
    took["add"] = time.monotonic() - start
    if live:
        start = time.monotonic()
        r = delete(http, ledger, user, live[0])
        assert r is not None and r.status_code == 503 and _error_body(r), r and r.text
        took["delete"] = time.monotonic() - start
    return {k: round(v, 3) for k, v in took.items()}


@dataclass
class Run:
    """The processes of the test and what it saw."""

    server: MilvusServer
    http: httpx.Client
    url: str
    key: str
    db: Path  # the API's SQLite event log
    ledger: Ledger = field(default_factory=Ledger)
    report: dict[str, Any] = field(default_factory=dict)


def start_api(tmp_path: Path, server: MilvusServer, key: str) -> Replica:
    """`memray api` on the server, with the embedded SQLite log under tmp_path/api-data."""
    keys = tmp_path / "keys.yaml"
    keys.write_text(yaml.safe_dump({"keys": [ApiKey(name="t", sha256=hash_key(key),
                                                    admin=True).model_dump()]}))
    config = tmp_path / "memory.yaml"
    config.write_text(yaml.safe_dump({
        "embedder": {"provider": "hashing", "dim": 64},
        "store": {"outbox_retry_s": 0.5, "timeout_s": STORE_TIMEOUT_S}}))
    env = {k: v for k, v in os.environ.items() if k != "MEMRAY_POSTGRES_DSN"}
    env["MEMRAY_MILVUS_URI"] = server.uri
    # A short lease: an async add that met the outage is tried again every 5 s (5 tries).
    api = Replica(tmp_path, "api", env, config, keys, extra=["--job-lease-s", "5"])
    api.wait_ready(time.monotonic() + 120)
    return api


def crash(run: Run) -> str:
    """SIGKILL the server as a write's store call begins; traffic and probes against the
    dead server; returns the id of an async add accepted meanwhile."""
    traffic = Traffic(run.url, run.key, run.ledger, "crash").start()
    time.sleep(2)
    armed = time.monotonic()
    fresh = _in_store_call(run, armed + 60)
    run.server.kill()
    run.report["crash_trigger"] = {"waited_s": round(time.monotonic() - armed, 2),
                                   "caught": len(fresh)}
    time.sleep(2)  # traffic against a dead server
    run.report["crash_probe_s"] = probe_outage(run.http, run.ledger, "crash")
    r = run.http.post("/v1/memories", json={"user_id": USERS[1], "async": True,
                                            "infer": False, "messages": "async: I keep a map"})
    assert r.status_code == 202, r.text
    traffic.stop()
    run.report["crash_outbox_rows"] = outbox_rows(run.db)
    with sqlite3.connect(run.db, timeout=10) as conn:
        caught = [s for s in fresh
                  if conn.execute("SELECT 1 FROM outbox WHERE seq = ?", (s,)).fetchone()]
    # The crash landed while a write was between the log and the store: that write was
    # acknowledged (or is in doubt) from the log alone, and stays queued until the drain
    # applies it after the restart (`verify` checks that it is there then).
    assert fresh and caught == fresh, (fresh, caught, run.report)
    return str(r.json()["job_id"])


def _in_store_call(run: Run, deadline: float) -> list[int]:
    """Outbox rows of writes whose store call is under way, the server frozen. A new row
    shows as its store call begins; the server is frozen at once, and if the row is still
    queued a moment later (a reply already sent would have been read and applied), the
    call is hanging and a kill lands in it. Otherwise the call won the race: thaw, wait
    for the next one."""
    with sqlite3.connect(run.db, timeout=10) as conn:
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'outbox'").fetchone()
        base = row[0] if row else 0
        while time.monotonic() < deadline:
            fresh = [r[0] for r in conn.execute("SELECT seq FROM outbox WHERE seq > ?",
                                                (base,))]
            if not fresh:
                time.sleep(0.001)
                continue
            run.server.freeze()
            time.sleep(0.3)
            held = [s for s in fresh
                    if conn.execute("SELECT 1 FROM outbox WHERE seq = ?", (s,)).fetchone()]
            if held:
                return held
            run.server.freeze(False)
            base = max(fresh)
    return []


def stop(run: Run) -> None:
    """SIGTERM: the server half-serves while it shuts down (reads timed meanwhile), and
    is SIGKILLed HALF_ALIVE_S later; then traffic and probes against no server."""
    traffic = Traffic(run.url, run.key, run.ledger, "stop").start()
    time.sleep(2)
    run.server.terminate()
    stopping = time.monotonic()
    killer = threading.Timer(HALF_ALIVE_S, run.server.kill)
    killer.start()
    half: list[tuple[str, int, float]] = []
    rng = random.Random(1)
    while time.monotonic() - stopping < HALF_ALIVE_S - 1:
        op = ("search", "list", "get", "context")[len(half) % 4]
        start = time.monotonic()
        r = read(run.http, run.ledger, op, USERS[2], rng)
        if r is not None:
            half.append((op, r.status_code, round(time.monotonic() - start, 2)))
    killer.join()
    run.report["stop_half_alive_each"] = half
    run.report["stop_half_alive_worst_s"] = max((t for _, _, t in half), default=0.0)
    time.sleep(1)
    run.report["stop_probe_s"] = probe_outage(run.http, run.ledger, "stop")
    traffic.stop()
    run.report["stop_outbox_rows"] = outbox_rows(run.db)
    # While the stopping server still held the connections, reads did not hang on it: each
    # answered within the store's call timeout (they waited until it was killed before
    # MilvusStore passed `timeout_s` to every call).
    assert [t for _, status, t in half if status == 503], run.report
    assert run.report["stop_half_alive_worst_s"] <= HALF_ALIVE_BOUND_S, run.report


def come_back(run: Run, phase: str, job: str | None = None) -> None:
    """Restart the server on its data dir; the outbox drains; an async add accepted in
    the outage runs; the store matches."""
    back = time.monotonic()
    run.server.start()
    run.report[f"{phase}_restart_s"] = round(time.monotonic() - back, 1)
    run.report[f"{phase}_recover_s"] = round(wait_recovered(run.http, run.db, back), 1)
    if job is not None:
        check_job(run, job)
    run.report[f"{phase}_checked"] = verify(run.http, run.ledger, run.db)


def check_job(run: Run, job: str) -> None:
    """A job accepted (202) while the store was down is tried again after its lease, so
    it is done once the store is back; its memory must be there (`verify`, next)."""
    end = time.monotonic() + 40
    while True:
        r = run.http.get(f"/v1/jobs/{job}", params={"user_id": USERS[1]})
        assert r.status_code == 200, r.text
        found = r.json()
        if found["status"] != "queued" or time.monotonic() > end:
            break
        time.sleep(0.5)
    run.report["async_add_job"] = found["status"]
    assert found["status"] == "done", found
    with run.ledger.lock:
        for e in found["result"]["events"]:
            run.ledger.acked[e["memory_id"]] = (USERS[1], e["memory"]["content"])


def test_milvus_stopped_mid_run(tmp_path: Path) -> None:
    if not available():
        if os.environ.get("CI"):
            pytest.fail("the `milvus` package (dev extra) is required in CI")
        pytest.skip("needs the `milvus` package (pip install -e '.[dev]') for a Milvus server")
    began = time.monotonic()
    # A short session TTL: after a crash the restarted server waits for the dead one's
    # sessions to expire before it loads collections again (30 s by default).
    server = MilvusServer(tmp_path / "milvus", config={"common.session.ttl": 10})
    key = new_key()
    api: Replica | None = None
    run: Run | None = None
    try:
        server.start()
        api = start_api(tmp_path, server, key)
        run = Run(server, httpx.Client(base_url=api.url, timeout=READ_BOUND_S * 2,
                                       headers={"Authorization": f"Bearer {key}"}),
                  api.url, key, tmp_path / "api-data" / "events.sqlite3")
        run.report["ready_s"] = round(time.monotonic() - began, 1)
        for user in USERS:
            for i in range(3):
                r = add(run.http, run.ledger, user, f"seed-{i}: I keep a {THINGS[i]} here")
                assert r is not None and r.status_code == 200, r and r.text
        job = crash(run)
        come_back(run, "crash", job)
        stop(run)
        come_back(run, "stop")
    finally:
        if api is not None:
            api.stop()
        server.kill()
        shutil.rmtree(tmp_path / "milvus" / "bin", ignore_errors=True)  # 250 MB
        if run is not None:
            run.http.close()
            ledger = run.ledger
            run.report.update(
                api_queued_for_retry=api.log.read_text(errors="replace").count(
                    "queued for retry") if api is not None else 0,
                answers=dict(sorted(ledger.counts.items())),
                worst_503_s=round(ledger.worst_503_s, 2),
                total_s=round(time.monotonic() - began, 1))
            print("\nmilvus-down:", json.dumps(run.report))
    assert run is not None
    assert not run.ledger.bad, run.ledger.bad
    assert not run.ledger.slow, run.ledger.slow
    assert run.ledger.worst_503_s <= WRITE_BOUND_S, run.report
    assert run.ledger.counts["add 503"] > 0 and run.ledger.counts["search 503"] > 0

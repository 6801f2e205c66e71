"""SIGKILL of `memray api` during concurrent writes (embedded default): after a restart on
the same data dir every acknowledged add is there exactly once, no acknowledged delete is,
and the vector store agrees with the event log."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

import httpx
import yaml

from memray.api.auth import ApiKey, hash_key, new_key
from memray.bench.cluster import Replica
from memray.bench.soak import Ledger, _one, _verify


def test_acknowledged_writes_survive_sigkill(tmp_path: Path) -> None:
    key = new_key()
    keys = tmp_path / "keys.yaml"
    keys.write_text(yaml.safe_dump({"keys": [ApiKey(name="t", sha256=hash_key(key),
                                                    admin=True).model_dump()]}))
    config = tmp_path / "memory.yaml"
    config.write_text("{}\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("MEMRAY_MILVUS_URI", "MEMRAY_POSTGRES_DSN")}
    users = [f"k-{i}" for i in range(4)]
    ledger = Ledger({u: set() for u in users}, {u: set() for u in users}, set(),
                    threading.Lock())
    first = Replica(tmp_path, "api", env, config, keys)
    try:
        first.wait_ready(time.monotonic() + 240)
        stop = threading.Event()

        def client(n: int) -> None:
            rng = random.Random(n)
            with httpx.Client(base_url=first.url, timeout=10,
                              headers={"Authorization": f"Bearer {key}"}) as http:
                i = 0
                while not stop.is_set():
                    i += 1
                    _one(http, rng, rng.choice(users), f"{n}-{i}", ledger)

        threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(4)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while sum(map(len, ledger.acked.values())) < 20 and time.monotonic() < deadline:
            time.sleep(0.2)
        os.killpg(first.proc.pid, signal.SIGKILL)  # mid-traffic, no shutdown at all
        first.proc.wait(timeout=30)
        stop.set()
        for t in threads:
            t.join(timeout=30)
    finally:
        first.stop()
    acked = sum(map(len, ledger.acked.values()))
    assert acked >= 20 and sum(map(len, ledger.deleted.values())) > 0
    second = Replica(tmp_path, "api", env, config, keys)  # the same data dir
    try:
        second.wait_ready(time.monotonic() + 240)
        r = httpx.get(f"{second.url}/v1/memories", params={"user_id": users[0]},
                      headers={"Authorization": f"Bearer {key}"}, timeout=30)
        assert r.status_code == 200
    finally:
        second.stop()
    result = _verify(tmp_path / "api-data", ledger)
    assert (result["lost"], result["resurrected"], result["duplicated"]) == (0, 0, 0), result
    assert result["doctor_problems"] == 0, result

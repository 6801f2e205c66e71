"""`memray serve` starts the local config's app (Ray Serve, embedded default) and answers
over HTTP on 127.0.0.1; SIGTERM stops it and leaves no Ray process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from milvus_server import free_port

pytest.importorskip("ray.serve", reason="needs ray[serve] (the dev extra installs it)")
ROOT = Path(__file__).parents[2]


def test_memray_serve_local_config(tmp_path: Path) -> None:
    config = yaml.safe_load((ROOT / "serve_configs" / "local.yaml").read_text())
    port = free_port()
    config["http_options"]["port"] = port
    config["applications"][0]["args"]["memory"]["data_dir"] = str(tmp_path / "data")
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(config))
    exe = Path(sys.executable).with_name("memray")
    proc = subprocess.Popen([str(exe), "serve", "--config", str(path)], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True,
                            env={**os.environ, "RAY_ADDRESS": "local"})
    headers = {"Authorization": "Bearer mr_local_dev_key"}
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, "memray serve exited early"
            try:
                if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "memray serve not ready in 180 s"
            time.sleep(1)
        r = httpx.post(base + "/v1/memories", headers=headers, timeout=60, json={
            "user_id": "lin", "messages": "I'm allergic to peanuts"})
        assert r.status_code == 200, r.text
        assert [e["op"] for e in r.json()["events"]] == ["ADD"]
        hits = httpx.post(base + "/v1/memories/search", headers=headers, timeout=60,
                          json={"user_id": "lin", "query": "peanut butter snack?"}).json()
        assert hits["results"][0]["memory"]["content"] == "I'm allergic to peanuts"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)

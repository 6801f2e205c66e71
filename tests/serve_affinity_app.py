"""Run by tests/integration/test_serve_affinity.py in a process of its own (Ray reads the
ingress settings from the environment of the processes it starts): two Serve replicas
that answer with their pid behind Ray's HAProxy ingress, set up with the environment
`memray serve` gives a run (memray/serve_ingress.py). Prints, as JSON, which replicas
answered each user's requests (sent with the user header) and header-less requests."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections import Counter

import httpx
import ray
from local_ray import start_local_ray
from ray import serve
from starlette.requests import Request

from memray.serve_ingress import USER_HEADER


@serve.deployment(num_replicas=2, ray_actor_options={"num_cpus": 0.1})
class Who:
    async def __call__(self, request: Request) -> str:
        return str(os.getpid())


def main() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start_local_ray(2)
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(Who.bind(), name="who", route_prefix="/")
    url = f"http://127.0.0.1:{port}/"
    with httpx.Client(timeout=10) as client:
        seen: set[str] = set()
        end = time.monotonic() + 120
        while len(seen) < 2:  # both replicas registered with the ingress
            if time.monotonic() > end:
                sys.exit(f"timed out after 120 s waiting for both replicas behind {url}")
            try:
                seen.add(client.get(url).text)
            except httpx.HTTPError:
                time.sleep(0.2)
        users = {u: Counter(client.get(url, headers={USER_HEADER: u}).text for _ in range(10))
                 for u in (f"user-{i}" for i in range(8))}
        bare = Counter(client.get(url).text for _ in range(20))
    print(json.dumps({"users": users, "bare": bare}))
    ray.shutdown()  # no serve.shutdown(): the controller's graceful stop can take 30 s


if __name__ == "__main__":
    main()

"""Start a local Ray for a test the way a busy 2-core CI machine needs it started."""

from __future__ import annotations

import os
from typing import Any

# Ray's two fixed startup waits, each of which has failed CI on a loaded machine: the GCS
# publishing its port (30 s unless overridden) and the raylet registering (30 s, fixed).
# A slow start is not a failure, so the first wait is lengthened and both are retried.
# The longer wait is set only while Ray starts, so that the servers and job subprocesses
# of later tests run in the environment they would have without this helper.
GCS_PORT_WAIT_ENV, GCS_PORT_WAIT_S = "RAY_gcs_server_port_wait_time_s", "120"
_SLOW_START = ("timed out during startup", "Timed out waiting for file")
TRIES = 3


def start_local_ray(num_cpus: int, **kwargs: Any) -> None:
    """`ray.init` of a new local Ray with `num_cpus` logical CPUs (and `kwargs`), tried
    again where it only started slowly; any other error is raised at once."""
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    before = os.environ.get(GCS_PORT_WAIT_ENV)
    os.environ[GCS_PORT_WAIT_ENV] = before or GCS_PORT_WAIT_S
    try:
        _init_with_retries(ray, num_cpus, kwargs)
    finally:
        if before is None:
            del os.environ[GCS_PORT_WAIT_ENV]


def _init_with_retries(ray: Any, num_cpus: int, kwargs: dict[str, Any]) -> None:
    for attempt in range(1, TRIES + 1):
        try:
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False,
                     log_to_driver=False, **kwargs)
            return
        except Exception as exc:
            ray.shutdown()
            if not any(s in str(exc) for s in _SLOW_START):
                raise
            if attempt == TRIES:
                raise RuntimeError(
                    f"local Ray did not start in {TRIES} tries: its GCS did not publish "
                    f"its port within {os.environ[GCS_PORT_WAIT_ENV]} s, or its raylet did "
                    "not register within Ray's 30 s, each time") from exc

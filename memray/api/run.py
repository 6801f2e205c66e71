"""One API replica without Ray: the REST app under plain uvicorn, `Memory` in process.

With MEMRAY_MILVUS_URI and MEMRAY_POSTGRES_DSN set (or the config's store fields), any
number of these share all state; on the embedded default one process owns `data_dir`.
"""

from __future__ import annotations

import logging
from pathlib import Path

from memray.api.app import ApiLimits, build_api
from memray.api.auth import ReloadingKeys
from memray.config import MemoryConfig
from memray.core.memory import Memory

log = logging.getLogger(__name__)


def run_api(config: MemoryConfig, keys_file: str | Path, *, host: str = "127.0.0.1",
            port: int = 8000, job_lease_s: float = 120.0) -> None:
    """Serve until SIGTERM/SIGINT; prints one "ready on URL" line once listening."""
    import uvicorn

    keys = ReloadingKeys(keys_file)  # edits to the file apply without a restart
    with Memory(config) as memory:
        app = build_api(memory, keys, limits=ApiLimits(), job_lease_s=job_lease_s)
        server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))

        @app.on_event("startup")
        async def ready() -> None:
            print(f"memray api: ready on http://{host}:{port}", flush=True)

        try:
            server.run()
        finally:
            app.state.jobs.close()

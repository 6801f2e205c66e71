"""One API replica without Ray: the REST app under plain uvicorn, `Memory` in process.

With MEMRAY_MILVUS_URI and MEMRAY_POSTGRES_DSN set (or the config's store fields), any
number of these share all state; on the embedded default one process owns `data_dir`.
"""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from types import FrameType

from memray.api.app import ApiLimits, build_api
from memray.api.auth import ReloadingKeys
from memray.config import MemoryConfig
from memray.core.memory import Memory

log = logging.getLogger(__name__)


def _note(signum: int, frame: FrameType | None) -> None:
    log.info("signal %d: shutting down", signum)


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

        # uvicorn shuts down gracefully on SIGTERM/SIGINT and then raises the signal again
        # for its previous handler: with the default one the process dies right there,
        # before `Memory` is closed (a milvus-lite dir is left with a torn WAL). A handler
        # of our own turns that second delivery into a no-op, so the close below runs.
        previous = {sig: signal.signal(sig, _note) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            server.run()
        finally:
            app.state.jobs.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

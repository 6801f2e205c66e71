"""Start and stop a real Milvus standalone server (PyPI package `milvus`) for the tests."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(uri: str, deadline_s: float, proc: subprocess.Popen[bytes]) -> None:
    from pymilvus import MilvusClient

    end = time.monotonic() + deadline_s
    last: Exception | None = None
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"Milvus server exited with {proc.returncode} while starting "
                               "(another Milvus holding ports 2379/9091?)")
        try:
            client = MilvusClient(uri=uri, timeout=5)
            client.list_collections()
            client.close()
            return
        except Exception as exc:  # the server is still starting; keep the last reason
            last = exc
            time.sleep(1)
    raise RuntimeError(f"Milvus server at {uri} not ready after {deadline_s}s: {last}")


class MilvusServer:
    """`milvus-server --data DIR` in its own process group; SIGKILL if SIGTERM is ignored."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, deadline_s: float = 120) -> None:
        exe = str(Path(sys.executable).with_name("milvus-server"))
        if not Path(exe).exists():
            exe = shutil.which("milvus-server") or exe
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.data_dir / "server.log", "wb")  # noqa: SIM115 - lives with the process
        self._proc = subprocess.Popen(
            [exe, "--data", str(self.data_dir), "--proxy-port", str(self.port)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        try:
            wait_ready(self.uri, deadline_s, self._proc)
        except Exception:
            self.stop()
            raise

    def stop(self) -> None:
        if self._proc is None:
            return
        pgid = os.getpgid(self._proc.pid)
        os.killpg(pgid, signal.SIGTERM)
        try:
            self._proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(pgid, signal.SIGKILL)
            self._proc.wait(timeout=15)
        # The server's own children share the group; make sure none survive.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        self._proc = None

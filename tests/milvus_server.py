"""Start and stop a real Milvus standalone server (PyPI package `milvus`) for the tests.

Every port is this server's own, so several can run side by side (and beside a Milvus
started by something else): the proxy port is chosen here, the embedded etcd's client
and peer ports too (the milvus binary's embedded etcd listens on 2379/2380 unless it is
given an etcd config file through ETCD_CONFIG_PATH), and the package picks free ports
for the rest (metrics from 9091 up, the coordinators and nodes). The ports are kept for
the server's life, so `start()` after `stop()`/`kill()` brings the same server back on the
same data dir at the same URI.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

# `milvus-server`, except that the package's check of whether a port is free binds with
# SO_REUSEADDR as the Go server itself does: without it, a port the previous run of this
# server just closed (its connections in TIME_WAIT for a minute) reads as taken, and the
# package silently moves the proxy to the next port, away from the URI the tests use.
_LAUNCH = """\
import socket, sys
import milvus

def try_bind_port(self, port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        return sock
    except OSError:
        sock.close()
        return None

milvus.MilvusServerConfig.try_bind_port = try_bind_port
sys.argv[0] = "milvus-server"
milvus.main()
"""


def available() -> bool:
    """The `milvus` package (the dev extra) is installed: `MilvusServer` can run."""
    return importlib.util.find_spec("milvus") is not None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(uri: str, deadline_s: float, proc: subprocess.Popen[bytes]) -> None:
    from pymilvus import MilvusClient

    end = time.monotonic() + deadline_s
    last: Exception | None = None
    quiet = logging.getLogger("pymilvus")  # a traceback for every refused connection
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        while time.monotonic() < end:
            if proc.poll() is not None:
                raise RuntimeError(f"Milvus server exited with {proc.returncode} while "
                                   "starting")
            try:
                client = MilvusClient(uri=uri, timeout=5)
                client.list_collections(timeout=5)
                client.close()
                return
            except Exception as exc:  # the server is still starting; keep the last reason
                last = exc
                time.sleep(0.5)
    finally:
        quiet.setLevel(level)
    raise RuntimeError(f"Milvus server at {uri} not ready after {deadline_s}s: {last}")


class MilvusServer:
    """`milvus-server --data DIR` in its own process group on ports of its own; `stop()`
    sends SIGTERM (SIGKILL if it is ignored), `terminate()` SIGTERM without waiting,
    `kill()` SIGKILL; `start()` again resumes the same data dir on the same ports."""

    def __init__(self, data_dir: Path, *, config: dict[str, str | int] | None = None) -> None:
        """`config`: milvus.yaml values to change, by dotted key ("common.session.ttl")."""
        self.data_dir = data_dir
        self.config = dict(config or {})
        self.port = free_port()
        self.etcd_port, self.etcd_peer_port = free_port(), free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None

    def _etcd_config(self) -> Path:
        client = f"http://127.0.0.1:{self.etcd_port}"
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        path = self.data_dir / "embed-etcd.yaml"
        path.write_text(f"listen-client-urls: {client}\nadvertise-client-urls: {client}\n"
                        f"listen-peer-urls: {peer}\ninitial-advertise-peer-urls: {peer}\n"
                        f"initial-cluster: default={peer}\n", encoding="utf-8")
        return path

    def start(self, deadline_s: float = 120) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "ETCD_CONFIG_PATH": str(self._etcd_config())}
        log = open(self.data_dir / "server.log", "ab")  # noqa: SIM115 - lives with the process
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCH, "--data", str(self.data_dir),
             "--proxy-port", str(self.port), "--etcd-port", str(self.etcd_port),
             *(a for k, v in self.config.items() for a in ("--extra-config", f"{k}={v}"))],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True)
        log.close()
        try:
            wait_ready(self.uri, deadline_s, self._proc)
        except Exception:
            self.stop()
            raise

    def stop(self, grace_s: float = 5) -> None:
        """SIGTERM to the server's process group; SIGKILL after `grace_s` (Milvus 2.3.5
        standalone seldom finishes its graceful stop: its proxy keeps retrying the
        coordinators it stopped first)."""
        self._signal(signal.SIGTERM, grace_s)

    def terminate(self) -> None:
        """SIGTERM, without waiting: the server shuts down (it may take long, half-serving
        meanwhile); `stop()` or `kill()` then waits for it."""
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGTERM)

    def freeze(self, frozen: bool = True) -> None:
        """SIGSTOP (or, with `frozen=False`, SIGCONT) to the server's process group: while
        frozen no call to it completes, so a call seen pending then is still pending when
        `kill()` lands."""
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGSTOP if frozen else signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL at once: the server dies as in a crash."""
        self._signal(signal.SIGKILL, 15)

    def _signal(self, sig: signal.Signals, grace_s: float) -> None:
        if self._proc is None:
            return
        pgid = self._proc.pid  # the group leader (start_new_session)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        try:
            self._proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            self._proc.wait(timeout=15)
        # The wrapper dies first; the milvus binary shares its group: wait for it to go
        # (it holds the ports and the data dir), then make sure nothing survives.
        end = time.monotonic() + grace_s
        while _group_alive(pgid) and time.monotonic() < end:
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        self._proc = None


def _group_alive(pgid: int) -> bool:
    """A live (not zombie) process in the group: read from /proc, as a zombie whose parent
    went away would still answer kill(0)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False

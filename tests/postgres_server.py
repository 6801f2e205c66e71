"""Start and stop a throwaway PostgreSQL cluster (the machine's initdb/pg_ctl) for the tests."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DB = "memray"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def postgres_bindir() -> Path | None:
    """Where initdb and pg_ctl live: `pg_config --bindir`, else /usr/lib/postgresql/*/bin."""
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                             check=False)
        found = Path(out.stdout.strip())
        if out.returncode == 0 and (found / "initdb").exists():
            return found
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    return Path(candidates[0]).parent if candidates else None


class PostgresServer:
    """A cluster with trust auth on 127.0.0.1:`port` and a database `memray`.

    The cluster lives in its own temp dir, in memory (/dev/shm) where there is one: a
    database per test is then cheap. initdb refuses to run as root, so as root every
    server command runs as the `postgres` OS user (which owns that dir). The server log
    is copied to `root` at stop.
    """

    def __init__(self, root: Path) -> None:
        bindir = postgres_bindir()
        if bindir is None:
            raise RuntimeError("PostgreSQL binaries not found (apt-get install postgresql)")
        self.root, self.bindir = root, bindir
        self.port = free_port()
        self._as_root = os.geteuid() == 0
        self._home: Path | None = None

    @property
    def dsn(self) -> str:
        return self.dsn_for(DB)

    def dsn_for(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        shm = Path("/dev/shm")
        where = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
        home = Path(tempfile.mkdtemp(prefix="memray-pg-", dir=where))
        if self._as_root:
            shutil.chown(home, "postgres", "postgres")
        self._home = home
        data, sockets = home / "data", home / "sock"
        try:
            self._run("initdb", "-D", str(data), "-U", "postgres", "--auth=trust",
                      "--encoding=UTF8", "--locale=C", "--no-sync")
            self._run("mkdir", "-p", str(sockets), tool=False)
            opts = (f"-p {self.port} -k {sockets} -c listen_addresses=127.0.0.1 "
                    "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                    "-c max_connections=200")
            self._run("pg_ctl", "-D", str(data), "-l", str(home / "server.log"), "-w",
                      "-t", "60", "-o", opts, "start")
            self._wait_ready(deadline_s=60)
            self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", DB)
        except Exception:
            self._copy_log()
            self.stop()
            raise

    def stop(self) -> None:
        home, self._home = self._home, None
        if home is None:
            return
        data = str(home / "data")
        if (home / "data" / "postmaster.pid").exists():
            # fast, not immediate: an immediate stop leaves shared memory behind in /dev/shm
            fast = self._run("pg_ctl", "-D", data, "-m", "fast", "-w", "-t", "30", "stop",
                             check=False)
            if fast.returncode != 0:
                self._run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop", check=False)
        self._copy_log(home)
        shutil.rmtree(home, ignore_errors=True)

    def _wait_ready(self, deadline_s: float) -> None:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            probe = self._run("pg_isready", "-h", "127.0.0.1", "-p", str(self.port), check=False)
            if probe.returncode == 0:
                return
            time.sleep(0.2)
        raise RuntimeError(f"PostgreSQL on port {self.port} not ready after {deadline_s}s")

    def _copy_log(self, home: Path | None = None) -> None:
        """Keep the server log beside the test's files when the cluster dir goes away."""
        log = (home or self._home or self.root) / "server.log"
        if log.exists():
            shutil.copyfile(log, self.root / "server.log")

    def _run(self, name: str, *args: str, tool: bool = True,
             check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bindir / name) if tool else name, *args]
        if self._as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False,
                              stdin=subprocess.DEVNULL)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): "
                               f"{done.stderr.strip() or done.stdout.strip()}")
        return done

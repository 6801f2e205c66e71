"""Start and stop the packaged model behind its OpenAI-compatible server for the tests.

A subprocess (`python -m memray.localllm.server`), so a test can kill it mid-request the
way a real endpoint dies. Readiness is the `READY <url>` line the server prints once it
listens (after the model is joined, verified and loaded), not a fixed sleep.
"""

from __future__ import annotations

import importlib.util
import os
import queue
import subprocess
import sys
import threading
import time


def available() -> str | None:
    """None when the runtime and the model packages are installed, else what is missing."""
    if importlib.util.find_spec("cyllama") is None:
        return "cyllama (the llama.cpp runtime) is not installed"
    from memray.localllm.models import DEFAULT_MODEL, MODELS, ModelMissingError, part_files

    try:
        part_files(MODELS[DEFAULT_MODEL])
    except ModelMissingError as exc:
        return str(exc)
    return None


class LLMServer:
    def __init__(self, threads: int | None = None, ready_timeout_s: float = 600) -> None:
        self.threads, self.ready_timeout_s = threads, ready_timeout_s
        self.proc: subprocess.Popen[str] | None = None
        self.base_url = ""

    def start(self) -> str:
        cmd = [sys.executable, "-m", "memray.localllm.server", "--port", "0"]
        if self.threads:
            cmd += ["--threads", str(self.threads)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, args=(lines,), daemon=True).start()
        deadline = time.monotonic() + self.ready_timeout_s
        seen: list[str] = []
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            seen.append(line)
            if line.startswith("READY "):
                self.base_url = line.split()[1]
                return self.base_url
        self.kill()
        raise RuntimeError(f"the LLM server did not print READY within {self.ready_timeout_s:.0f}"
                           f" s (model join + load); its output: {''.join(seen)[-2000:]}")

    def _pump(self, lines: queue.Queue[str]) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            lines.put(line)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

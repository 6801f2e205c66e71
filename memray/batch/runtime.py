"""What every job shares: a Ray session, progress lines, and the closing summary table."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from memray.batch.config import JobArgs

if TYPE_CHECKING:
    from memray.core.memory import Memory


@contextmanager
def ray_session(args: JobArgs) -> Iterator[None]:
    """A local Ray (address None) or the cluster's; shut down only if started here."""
    import ray

    if ray.is_initialized():
        _configure_data()
        yield
        return
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    env = {"env_vars": {"RAY_AUTH_MODE": os.environ["RAY_AUTH_MODE"]}}
    if args.ray.address is None:  # "local": a new instance, never one already running here
        ray.init(address="local", num_cpus=args.ray.num_cpus, include_dashboard=False,
                 log_to_driver=False, runtime_env=env)
    else:
        ray.init(address=args.ray.address, runtime_env=env)
    _configure_data()
    try:
        yield
    finally:
        ray.shutdown()


def run_job(args: JobArgs, memory: Memory | None,
            body: Callable[[Memory], dict[str, Any]]) -> dict[str, Any]:
    """`body` on a Ray session and a `Memory`: the one given (left open), or one opened
    from `args.memory` for this job (closed after)."""
    from memray.core.memory import Memory

    with ray_session(args):
        mem = memory or Memory(args.memory)
        try:
            return body(mem)
        finally:
            if memory is None:
                mem.close()


def _configure_data() -> None:
    from ray.data import DataContext
    from ray.data.context import ShuffleStrategy

    ctx = DataContext.get_current()
    # At a terminal, Ray Data's own bars show each stage's progress; in logs (no TTY) they
    # are noise, and our count lines say what was done.
    ctx.enable_progress_bars = interactive()
    ctx.enable_rich_progress_bars = interactive()  # Ray Data's newer UI (the `rich` package)
    ctx.use_ray_tqdm = False
    # The hash shuffle starts aggregator actors that hold CPUs (on 2 cores they starved
    # the embedding pool) and took 10 s to group 8k rows; the sort shuffle uses tasks.
    ctx.shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED


def interactive() -> bool:
    """stderr is a terminal (progress bars), not a log."""
    return sys.stderr.isatty()


class Progress:
    """One line per interval on stderr: `[job] key=value ...`, and a last one at the end.
    At a terminal the bars of Ray Data show progress, so only the last line is printed."""

    def __init__(self, job: str, every_s: float) -> None:
        self._job, self._every = job, every_s
        self._start = self._last = time.monotonic()

    def tick(self, counts: Mapping[str, int | float], *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and (now - self._last < self._every or interactive()):
            return
        self._last = now
        parts = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
        print(f"[{self._job} {now - self._start:6.1f}s] {parts}", file=sys.stderr, flush=True)

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._start


class Pace:
    """When the first batch reached the writer, and the rate over the second half of the
    texts. A job's start (worker processes, the shuffle, the model load: ~10-20 s on 2
    cores) is paid once; the second half runs at what a large job runs at. Not "after the
    first batch": a block holds several batches, which arrive together."""

    def __init__(self) -> None:
        self._start = time.monotonic()
        self._arrivals: list[tuple[float, int]] = []  # (when, texts so far)
        self.texts = 0

    def batch(self, texts: int) -> None:
        self.texts += texts
        self._arrivals.append((time.monotonic(), self.texts))

    def summary(self) -> dict[str, float]:
        if not self._arrivals:
            return {}
        out = {"first_batch_seconds": round(self._arrivals[0][0] - self._start, 1)}
        at, before = next((t, n) for t, n in self._arrivals if n >= self.texts / 2)
        spent = time.monotonic() - at
        if spent > 0 and self.texts > before:
            out["steady_texts_per_s"] = round((self.texts - before) / spent, 1)
        return out


def summary(job: str, counts: Mapping[str, Any], args: JobArgs) -> dict[str, Any]:
    """Print the summary table (polars) and return it as a dict."""
    import polars as pl

    table = pl.DataFrame({"metric": list(counts), "value": [str(v) for v in counts.values()]})
    with pl.Config(tbl_rows=len(counts) + 1, tbl_hide_dataframe_shape=True,
                   fmt_str_lengths=80):
        print(f"{job} summary")
        print(table)
    out = {"job": job, **counts}
    if args.summary_json:
        with open(args.summary_json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2, default=str)
    return out

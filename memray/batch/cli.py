"""Command line of the jobs: `python jobs/<job>.py ...` and `memray jobs <job> ...`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from memray.errors import MemrayError

JOBS = ("backfill", "maintenance", "migrate")


def _bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parser(job: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"memray jobs {job}",
                                description=f"Run the {job} job (Ray Data).")
    p.add_argument("--config", help=f"job YAML (see jobs/configs/{job}.yaml)")
    p.add_argument("--data-dir", help="memory.data_dir (the embedded store's dir)")
    p.add_argument("--milvus-uri", help="memory.store.milvus_uri (a Milvus server)")
    p.add_argument("--ray-address", help="'auto' on a cluster (ray job submit)")
    p.add_argument("--num-cpus", type=int, help="CPUs of a local Ray")
    p.add_argument("--summary-json", help="also write the summary table here")
    if job == "backfill":
        p.add_argument("--input", nargs="+", help="Parquet / JSONL files or dirs")
        p.add_argument("--infer", type=_bool, help="true: extract facts; false: import "
                       "each user message as a memory")
    if job == "maintenance":
        p.add_argument("--dry-run", action="store_true", default=None,
                       help="report, change nothing")
    if job == "migrate":
        p.add_argument("--to-model", help="new embedder model name (a packaged one)")
        p.add_argument("--to-model-path", help="new embedder local model dir")
        p.add_argument("--rollback", action="store_true", default=None,
                       help="switch the alias back to the previous collection")
    return p


def overrides(ns: argparse.Namespace) -> dict[str, Any]:
    mapping = {"data_dir": "memory.data_dir", "milvus_uri": "memory.store.milvus_uri",
               "ray_address": "ray.address", "num_cpus": "ray.num_cpus",
               "summary_json": "summary_json", "input": "input", "infer": "infer",
               "dry_run": "dry_run", "to_model": "to.model", "to_model_path": "to.model_path",
               "rollback": "rollback"}
    out = {}
    for attr, key in mapping.items():
        value = getattr(ns, attr, None)
        if value is not None:
            out[key] = value
    return out


def _runner(job: str) -> Callable[[str | None, dict[str, Any]], dict[str, Any]]:
    if job == "backfill":
        from memray.batch.backfill import run as run_backfill
        from memray.batch.config import BackfillArgs

        return lambda cfg, ov: run_backfill(BackfillArgs.load(cfg, ov))
    if job == "maintenance":
        from memray.batch.config import MaintenanceArgs
        from memray.batch.maintenance import run as run_maintenance

        return lambda cfg, ov: run_maintenance(MaintenanceArgs.load(cfg, ov))
    from memray.batch.config import MigrateArgs
    from memray.batch.migrate import run as run_migrate

    return lambda cfg, ov: run_migrate(MigrateArgs.load(cfg, ov))


def main(job: str, argv: Sequence[str] | None = None) -> int:
    if job not in JOBS:
        print(f"unknown job {job!r}; jobs: {', '.join(JOBS)}", file=sys.stderr)
        return 2
    ns = parser(job).parse_args(argv)
    try:
        _runner(job)(ns.config, overrides(ns))
    except MemrayError as exc:
        print(f"memray jobs {job}: {exc}", file=sys.stderr)
        return 1
    return 0

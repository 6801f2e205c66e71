"""The backfill job: conversation logs -> extract -> embed -> resolve -> bulk write.

Ray Data reads the logs, groups them per user and extracts (tasks), and embeds in an
actor pool (batched; GPUs when `embed.gpus_per_actor` > 0). This process is the single
writer: it resolves each user's unit against the store and commits it with the
checkpoint marks of its sessions (memray/ingest/writer.py). One user is one unit, so two
batches of one user never race; a milvus-lite dir is opened by this process only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from memray.batch.config import BackfillArgs
from memray.batch.llm_stage import extract_with_llm
from memray.batch.runtime import Pace, Progress, run_job, summary
from memray.batch.stages import EmbedTexts, by_user, units_of_user
from memray.core.memory import Memory
from memray.errors import ConfigError
from memray.ingest.writer import JOB, BackfillWriter


def _read(args: BackfillArgs) -> Any:
    import ray.data

    paths = [str(Path(p)) for p in args.input]
    for p in paths:
        if not Path(p).exists() and "://" not in p:
            raise ConfigError(f"input {p} does not exist")
    fmt = args.format
    if fmt == "auto":
        fmt = "parquet" if all(p.endswith(".parquet") or Path(p).is_dir()
                               for p in paths) else "jsonl"
    # Fractional read tasks, so reading never waits on the CPUs the actor pool holds.
    if fmt == "parquet":
        return ray.data.read_parquet(paths, num_cpus=0.25)
    return ray.data.read_json(paths, lines=True, num_cpus=0.25)


def run(args: BackfillArgs, memory: Memory | None = None) -> dict[str, Any]:
    return run_job(args, memory, lambda mem: _run(args, mem))


def _run(args: BackfillArgs, mem: Memory) -> dict[str, Any]:
    from ray.data import ActorPoolStrategy

    engine = mem.engine()
    done = frozenset(engine.events.marks(JOB))
    pool = args.embed
    if args.llm_stage:
        units = extract_with_llm(_read(args), args.llm, args.memory, done, args.partitions)
    else:
        units = (by_user(_read(args), args.partitions)
                 .map_groups(units_of_user, batch_format="pandas",
                             fn_kwargs={"infer": args.infer, "done": done,
                                        "memory": args.memory.model_dump(mode="json")}))
    ds = (units
          .map_batches(EmbedTexts, batch_format="pandas", batch_size=pool.batch_units,
                       compute=ActorPoolStrategy(size=pool.actors),
                       num_cpus=pool.cpus_per_actor, num_gpus=pool.gpus_per_actor or None,
                       fn_constructor_kwargs={
                           "embedder": args.memory.embedder.model_dump(mode="json"),
                           "threads": pool.threads}))
    writer = BackfillWriter(engine, drain_rows=args.drain_rows)
    progress = Progress("backfill", args.progress_every_s)
    counts = writer.counts
    errors: list[str] = []
    dim = engine.embedder.dim
    pace = Pace()
    for batch in ds.iter_batches(batch_size=pool.batch_units, batch_format="pandas"):
        pace.batch(sum(len(v) for v in batch["vectors"]) // (4 * dim))
        for row in batch.to_dict("records"):
            counts["rows_read"] += int(row["rows"])
            counts["rows_invalid"] += int(row["invalid"])
            counts["llm_failed_sessions"] += int(row.get("llm_failed_sessions") or 0)
            if row["error"] and len(errors) < 5:
                errors.append(str(row["error"]))
            if not row["unit"]:
                counts["users_already_done"] += 1 if not row["invalid"] else 0
                continue
            vectors = np.frombuffer(row["vectors"], dtype=np.float32).reshape(-1, dim)
            writer.write(json.loads(row["unit"]), vectors)
            progress.tick(counts)
    writer.flush()
    progress.tick(counts, force=True)
    result: dict[str, Any] = {"input": ",".join(args.input), "infer": args.infer,
                              **dict(sorted(counts.items())),
                              "seconds": round(progress.elapsed_s, 1), **pace.summary()}
    if errors:
        result["first_errors"] = " | ".join(errors)
    return summary("backfill", result, args)

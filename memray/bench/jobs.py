"""`memray bench ingest` and `memray bench migrate`: the batch jobs, measured.

ingest: synthetic logs (users x user turns, each turn a distinct sentence) are embedded
once by the raw embedder in this process (texts/s; the texts the job embeds, each message
with its date and the turn it replies to), then imported by the backfill job
with `--infer false` into a fresh embedded store (texts/s, end to end, Ray already up);
the ratio is the figure of merit (1.0: the job costs nothing beyond embedding); the
steady ratio is the rate over the second half of the texts (the start is paid once).
migrate: a fresh store of users x memories (all-MiniLM-L6-v2) is migrated to
all-mpnet-base-v2 while a thread searches `--reads-per-s` times a second; it reports the
re-embed rate and the searches that failed or returned nothing during the run.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SUBJECTS = ["I", "My sister", "My team", "Our neighbour", "My manager", "My friend Sam"]
VERBS = ["enjoys", "prefers", "is planning", "keeps talking about", "wants to try", "avoids"]
OBJECTS = ["hiking in the Alps", "Thai green curry", "learning Japanese", "jazz records",
           "early morning runs", "board games", "sourdough baking", "watercolor painting",
           "trail cycling", "sci-fi novels", "cold brew coffee", "chess openings"]
WHEN = ["on weekends", "after work", "every Monday", "in winter", "during holidays",
        "before breakfast", "twice a month", "when it rains"]


def sentence(rng: random.Random, i: int) -> str:
    return (f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
            f"{rng.choice(WHEN)} (note {i}).")


def _logs(path: Path, users: int, turns: int) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(7)
    rows: dict[str, list[Any]] = {k: [] for k in ("user_id", "session_id", "turn_id", "role",
                                                  "content", "ts")}
    texts = []
    n = 0
    for u in range(users):
        for t in range(turns):
            text = sentence(rng, n)
            n += 1
            texts.append(text)
            for role, content in (("user", text), ("assistant", "Noted.")):
                rows["user_id"].append(f"user-{u:05d}")
                rows["session_id"].append(f"s-{u:05d}-{t // 10}")
                rows["turn_id"].append(f"{t}-{role}")
                rows["role"].append(role)
                rows["content"].append(content)
                rows["ts"].append(1_767_000_000_000 + n * 1000)
    pq.write_table(pa.table(rows), path)
    return texts


def _job_texts(logs: Path, cfg: Any) -> list[str]:
    """The texts the job embeds for these logs: each message as it is indexed (its date
    and the turn it replies to around it), built by the job's own stage. The raw
    sentences are ~40% shorter: measured on them, the raw embedder ran 1.65x faster than
    on what the job embeds, and the ratio read 0.36 where it was 0.6."""
    import json

    import pandas as pd

    from memray.batch.stages import units_of_user
    from memray.ingest.units import unit_texts

    memory = cfg.model_dump(mode="json")
    texts: list[str] = []
    for _, group in pd.read_parquet(logs).groupby("user_id", sort=False):
        unit = units_of_user(group, infer=False, memory=memory, done=frozenset())["unit"][0]
        texts += unit_texts(json.loads(unit)) if unit else []
    return texts


def ingest(ns: argparse.Namespace) -> dict[str, Any]:
    import ray

    from memray.batch import backfill
    from memray.batch.config import BackfillArgs, PoolArgs, RayArgs
    from memray.batch.runtime import ray_session
    from memray.config import MemoryConfig
    from memray.core.factory import build_embedder, embedder_runtime

    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp) / "logs.parquet"
        messages = _logs(logs, ns.users, ns.turns)
        cfg = MemoryConfig.model_validate({"data_dir": str(Path(tmp) / "data"),
                                           "embedder": {"runtime": getattr(ns, "runtime", "auto")}})
        texts = _job_texts(logs, cfg)
        raw = build_embedder(cfg.model_copy(update={"embedder": cfg.embedder.model_copy(
            update={"cache_size": 0})}))
        raw.open()
        raw.embed(texts[:64])  # warm-up
        t0 = time.perf_counter()
        for i in range(0, len(texts), 64):
            raw.embed(texts[i:i + 64])
        raw_rate = len(texts) / (time.perf_counter() - t0)
        raw.close()
        # The raw embedder uses every core; so do the pool's actors together (each holds
        # half a CPU for scheduling, so the read and sort tasks still find one).
        actors = getattr(ns, "actors", 1)
        threads = max(1, (ns.num_cpus or os.cpu_count() or 1) // actors)
        args = BackfillArgs(memory=cfg, input=[str(logs)], infer=False,
                            ray=RayArgs(num_cpus=ns.num_cpus), progress_every_s=5.0,
                            embed=PoolArgs(actors=actors, cpus_per_actor=0.5,
                                           torch_threads=threads))
        with ray_session(args):
            assert ray.is_initialized()
            t0 = time.perf_counter()
            result = backfill.run(args)
            job_s = time.perf_counter() - t0
    written = int(result.get("op_add", 0))
    return {"texts": len(texts), "messages": len(messages), "users": ns.users,
            "runtime": embedder_runtime(cfg.embedder), "raw_embed_per_s": round(raw_rate, 1),
            "backfill_per_s": round(written / job_s, 1), "memories_written": written,
            "ratio": round(written / job_s / raw_rate, 3), "job_seconds": round(job_s, 1),
            "actors": actors, "threads_per_actor": threads,
            "first_batch_seconds": result.get("first_batch_seconds"),
            "steady_ratio": round(result.get("steady_texts_per_s", 0) / raw_rate, 3)}


def migrate(ns: argparse.Namespace) -> dict[str, Any]:
    from memray.batch import migrate as migrate_job
    from memray.batch.config import MigrateArgs, RayArgs
    from memray.config import MemoryConfig
    from memray.core.memory import Memory

    rng = random.Random(11)
    stats = {"searches": 0, "errors": 0, "empty": 0}
    stop = threading.Event()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = MemoryConfig(data_dir=tmp)
        with Memory(cfg) as mem:
            for u in range(ns.users):
                msgs = [{"role": "user", "content": sentence(rng, u * ns.per_user + i)}
                        for i in range(ns.per_user)]
                mem.add(msgs, user_id=f"user-{u:04d}", infer=False)

            def reader() -> None:  # a steady read load, not a CPU hog
                while not stop.wait(1 / ns.reads_per_s):
                    uid = f"user-{rng.randrange(ns.users):04d}"
                    try:
                        hits = mem.search(sentence(rng, 0), user_id=uid, threshold=-1.0)
                        stats["empty"] += not hits
                    except Exception:
                        stats["errors"] += 1
                    stats["searches"] += 1

            thread = threading.Thread(target=reader, daemon=True)
            thread.start()
            args = MigrateArgs(memory=cfg, to={"model": "all-mpnet-base-v2"},
                               ray=RayArgs(num_cpus=ns.num_cpus), progress_every_s=5.0)
            result = migrate_job.run(args, memory=mem)
            stop.set()
            thread.join()
    return {"memories": ns.users * ns.per_user, **{k: result[k] for k in (
        "re_embedded", "re_embed_per_s", "re_embed_model_per_s", "writes_paused_ms",
        "self_recall", "overlap_at_5", "seconds")},
        "searches_during": stats["searches"],
        "failed_searches": stats["errors"], "empty_searches": stats["empty"]}

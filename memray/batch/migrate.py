"""The migration job: move every memory to another embedding model (any dimension) with
recall working throughout.

1. the new model's collection is created next to the live one (the alias stays put);
2. every memory missing or different there is staged to Parquet and re-embedded by a Ray
   Data actor pool (GPUs when asked), then written; stale target rows are deleted;
3. writes made meanwhile are caught up from the event log (users whose memory version
   moved), until a round finds none;
4. checks: recall of a sample (each memory must come first for its own content in the
   new collection), then, with writes held back for a moment, a last catch-up, equal
   counts for every user, and the alias switch in one step;
5. the old collection is kept: `--rollback` migrates back to it (only the changes since
   are re-embedded) and switches the alias back.

A crash anywhere leaves the alias on the old collection (or, after step 4, on a complete
new one); re-running resumes by difference. The running `Memory` is switched in place;
other processes on the same store must restart with the new model configured.
"""

from __future__ import annotations

import random
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from memray.batch.config import MigrateArgs
from memray.batch.runtime import Progress, run_job, summary
from memray.batch.stages import EmbedTexts
from memray.config import EmbedderConfig, MemoryConfig
from memray.core.engine import Engine
from memray.core.factory import build_embedder, build_store
from memray.core.follow import LIVE_EMBEDDER, LiveEmbedder
from memray.core.memory import Memory
from memray.errors import ConfigError, MigrationError
from memray.migrate.sync import Syncer, recall_agreement
from memray.models import MemoryRecord
from memray.settings import load_settings
from memray.store.base import Where

PREVIOUS = "migrate.previous_embedder"


def run(args: MigrateArgs, memory: Memory | None = None) -> dict[str, Any]:
    return run_job(args, memory, lambda mem: _run(args, mem))


def _target_config(args: MigrateArgs, mem: Memory, engine: Engine) -> EmbedderConfig:
    if args.rollback:
        previous = engine.events.get_meta(PREVIOUS)
        if previous is None:
            raise ConfigError("nothing to roll back: no migration was recorded here")
        return EmbedderConfig.model_validate_json(previous)
    if not args.to:
        raise ConfigError("say which model to migrate to (`to:` in the config, --to-model)")
    return EmbedderConfig.model_validate({**mem.config.embedder.model_dump(), **args.to})


def _run(args: MigrateArgs, mem: Memory) -> dict[str, Any]:
    if mem.config.security.encryption.enabled:
        # The copy would write the new collection without the cipher (plain text).
        raise ConfigError("migrating an encrypted store is not supported yet: turn "
                          "security.encryption off only on a copy, or keep the model")
    engine = mem.engine()
    new_cfg = _target_config(args, mem, engine)
    new_embedder = build_embedder(MemoryConfig(embedder=new_cfg))
    new_embedder.open()
    old = engine.embedder
    if (new_embedder.model, new_embedder.dim) == (old.model, old.dim):
        raise ConfigError(f"already on {old.model} ({old.dim} dims)")
    target = build_store(mem.config, load_settings(), model=new_embedder.model,
                         dim=new_embedder.dim, bind_alias=False)
    target.open()
    counts: Counter[str] = Counter()
    progress = Progress("migrate", args.progress_every_s)
    syncer = Syncer(engine.store, target, new_embedder)
    snapshot = engine.events.versions()
    staging = Path(mem.config.data_dir) / "migrate-staging" / target.collection
    staged = _stage(syncer, staging, counts, progress)
    started = time.monotonic()
    if staged:
        _reembed(args, new_cfg, syncer, staging, counts, progress)
    embed_s = time.monotonic() - started
    snapshot = _catch_up(engine, syncer, snapshot, counts, progress, rounds=5)
    _check_counts(syncer, None)  # every user, while writes still flow
    snapshot = _catch_up(engine, syncer, snapshot, counts, progress, rounds=5)
    self_recall, overlap = recall_agreement(engine.store, old, target, new_embedder,
                                            _sample(syncer, args.sample))
    if self_recall < args.min_agreement:
        raise MigrationError(f"self-recall {self_recall:.3f} on the sample is under "
                             f"{args.min_agreement}; the alias was not switched")
    info: dict[str, Any] = {"paused_ms": 0.0, "previous": ""}

    def final() -> None:
        # Writes are held back, in this process by its gate and in every other process
        # sharing the log by the write barrier: only the users written since the last
        # check are left. A write prepared elsewhere with the old model is refused once
        # the barrier lifts (ModelChangedError) and redone with the new one.
        t0 = time.monotonic()
        with engine.events.write_barrier():
            last = engine.events.versions()
            _catch_up(engine, syncer, snapshot, counts, progress, rounds=1)
            _check_counts(syncer, [u for u, v in last.items() if snapshot.get(u) != v])
            info["previous"] = target.point_alias_here() or ""
            engine.events.set_meta(LIVE_EMBEDDER, LiveEmbedder(
                new_embedder.model, new_embedder.dim, new_cfg).dumps())
        info["paused_ms"] = (time.monotonic() - t0) * 1000

    mem.switch_backend(new_embedder, target, final,
                       config=mem.config.model_copy(update={"embedder": new_cfg}))
    engine.events.set_meta(PREVIOUS, engine.config.embedder.model_dump_json())
    shutil.rmtree(staging, ignore_errors=True)
    progress.tick(counts, force=True)
    return summary("migrate" + (" (rollback)" if args.rollback else ""), {
        "from_model": f"{old.model} ({old.dim})",
        "to_model": f"{new_embedder.model} ({new_embedder.dim})",
        "collection": target.collection, "previous_collection": info["previous"],
        "users": len(syncer.users()), "re_embedded": counts["re_embedded"],
        "re_embed_per_s": round(counts["re_embedded"] / embed_s, 1) if embed_s else 0.0,
        # The model's own rate inside the pool (per actor), without start-up and waits.
        "re_embed_model_per_s": round(counts["re_embedded"] * 1000 / counts["model_ms"], 1)
        if counts["model_ms"] else None,
        "stale_deleted": counts["stale_deleted"],
        "caught_up_copied": counts["caught_up_copied"],
        "caught_up_deleted": counts["caught_up_deleted"],
        "self_recall": round(self_recall, 4), "overlap_at_5": round(overlap, 4),
        "writes_paused_ms": round(info["paused_ms"], 1),
        "seconds": round(progress.elapsed_s, 1)}, args)


def _check_counts(syncer: Syncer, users: list[str] | None) -> None:
    bad = syncer.count_mismatches(users)
    if bad:
        raise MigrationError(f"memory counts differ for {len(bad)} user(s), e.g. {bad[0]!r}; "
                             "the alias was not switched")


def _stage(syncer: Syncer, staging: Path, counts: Counter[str], progress: Progress) -> int:
    """Write what the target lacks to Parquet (the actor pool streams it back), and
    delete the target's stale rows. Returns how many records were staged."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    buf: list[MemoryRecord] = []
    total = part = 0

    def spill() -> None:
        nonlocal part
        table = pa.table({"text": [r.index_text for r in buf],
                          "record": [r.model_dump_json() for r in buf]})
        pq.write_table(table, staging / f"part-{part:05d}.parquet")
        part += 1
        buf.clear()

    for uid in syncer.users():
        copy, gone = syncer.plan_user(uid)
        counts["stale_deleted"] += syncer.delete_stale(uid, gone)
        buf.extend(copy)
        total += len(copy)
        counts["staged"] = total
        if len(buf) >= 10_000:
            spill()
        progress.tick(counts)
    if buf:
        spill()
    return total


def _reembed(args: MigrateArgs, new_cfg: EmbedderConfig, syncer: Syncer, staging: Path,
             counts: Counter[str], progress: Progress) -> None:
    import ray.data
    from ray.data import ActorPoolStrategy

    pool = args.embed
    # Fractional read tasks: the actor pool holds whole CPUs; on a small machine whole-CPU
    # reads then wait for it (a stall of minutes was seen on 2 cores).
    # Blocks of a few batches: a staged file (up to 10,000 rows) read as one block was
    # embedded in one task and came back whole, so the writer waited for all of it and
    # a pool of several actors had one task to share. Not one batch a block: each block
    # is an actor task, and a task's overhead would then weigh on a fast GPU's batch.
    ds = ray.data.read_parquet(str(staging), num_cpus=0.25).repartition(
        target_num_rows_per_block=4 * args.rows_per_batch).map_batches(
        EmbedTexts, batch_format="pandas", batch_size=args.rows_per_batch,
        compute=ActorPoolStrategy(size=pool.actors), num_cpus=pool.cpus_per_actor,
        num_gpus=pool.gpus_per_actor or None,
        fn_constructor_kwargs={"embedder": new_cfg.model_dump(mode="json"),
                               "threads": pool.threads, "text_of": "text"})
    dim = syncer.embedder.dim
    for batch in ds.iter_batches(batch_size=args.rows_per_batch, batch_format="pandas"):
        records = [MemoryRecord.model_validate_json(r) for r in batch["record"]]
        vectors = np.stack([np.frombuffer(v, dtype=np.float32).reshape(dim)
                            for v in batch["vectors"]])
        syncer.write(records, vectors)
        counts["re_embedded"] += len(records)
        counts["model_ms"] += int(batch["embed_ms"].sum())
        progress.tick(counts)


def _catch_up(engine: Engine, syncer: Syncer, snapshot: dict[str, int],
              counts: Counter[str], progress: Progress, *, rounds: int) -> dict[str, int]:
    """Re-sync the users whose memory version moved since `snapshot`, until none did."""
    for _ in range(rounds):
        now = engine.events.versions()
        changed = [u for u, v in now.items() if snapshot.get(u) != v]
        snapshot = now
        if not changed:
            break
        for uid in changed:
            syncer.sync_user(uid, counts)
        counts["caught_up_users"] += len(changed)
        progress.tick(counts)
    return snapshot


def _sample(syncer: Syncer, n: int) -> list[MemoryRecord]:
    rng = random.Random(0)
    users = syncer.users()
    picked: list[MemoryRecord] = []
    for uid in rng.sample(users, min(len(users), n)):
        found = syncer.source.query(uid, Where(statuses=("active",)), limit=5)
        if found:
            picked.append(rng.choice(found))
    return picked[:n]


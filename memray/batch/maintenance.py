"""The nightly maintenance job: expire, retire, decay, and merge clusters of
low-importance memories per user (memray/maintain/plan.py has the rules), then refresh
every user's profile (memray/core/profile.py; with the LLM's summary when configured).

This process reads each user's live memories (it owns the milvus-lite dir) and commits
each user's plan (memray/maintain/writer.py); Ray Data plans the users in parallel tasks
(clustering with scikit-learn, summaries by the LLM when one is configured).
`dry_run` plans and reports, and writes nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any, cast

import pandas as pd

from memray.batch.config import MaintenanceArgs
from memray.batch.runtime import Progress, run_job, summary
from memray.core.engine import Engine
from memray.core.memory import Memory
from memray.core.profile import Profiles, llm_summarizer
from memray.core.summary import rule_summary
from memray.maintain.codec import item_to_rows, plan_from_json, plan_to_json, rows_to_item
from memray.maintain.plan import MaintenanceSettings, Summarizer, plan_user
from memray.maintain.writer import commit, live_rows
from memray.models import utcnow


def plan_batch(batch: pd.DataFrame, *, settings: dict[str, Any], now_ms: int, dim: int,
               write: dict[str, Any] | None) -> pd.DataFrame:
    """map_batches: users' live rows -> their plans (JSON)."""
    from datetime import UTC, datetime

    now = datetime.fromtimestamp(now_ms / 1000, UTC)
    summarize: Summarizer = rule_summary
    if write is not None:
        from memray.config import WriteConfig
        from memray.extract.choose import open_llm

        client = open_llm(WriteConfig.model_validate(write))
        if client is not None:
            summarize = client.summarize
    plans = [plan_to_json(plan_user(item["user_id"], item_to_rows(item, dim), now,
                                    MaintenanceSettings(**settings), summarize))
             for item in batch.to_dict("records")]
    return pd.DataFrame({"plan": plans, "version": batch["version"].tolist()})


def run(args: MaintenanceArgs, memory: Memory | None = None) -> dict[str, Any]:
    return run_job(args, memory, lambda mem: _run(args, mem))


def _chunks(engine: Engine, size: int) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for uid in engine.store.user_ids():
        version = engine.events.version(uid)
        rows = live_rows(engine, uid)
        if rows:
            chunk.append(rows_to_item(uid, version, rows))
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _run(args: MaintenanceArgs, mem: Memory) -> dict[str, Any]:
    import ray.data

    engine = mem.engine()
    settings = {"candidate_days": args.candidate_days, "merge_below": args.merge_below,
                "merge_similarity": args.merge_similarity,
                "merge_max_chars": args.merge_max_chars}
    write = args.memory.write
    llm = write.model_dump(mode="json") if write.uses != "rules" else None
    now_ms, dim = int(utcnow().timestamp() * 1000), engine.embedder.dim
    counts: Counter[str] = Counter()
    progress = Progress("maintenance", args.progress_every_s)
    for chunk in _chunks(engine, args.users_per_task * args.workers):
        vectors = {r.record.id: r.vector for item in chunk for r in item_to_rows(item, dim)}
        ds = ray.data.from_items(chunk).map_batches(
            cast(Any, plan_batch), batch_format="pandas", batch_size=args.users_per_task,
            num_cpus=0.5,
            fn_kwargs={"settings": settings, "now_ms": now_ms, "dim": dim, "write": llm})
        for row in ds.iter_rows():
            plan = plan_from_json(row["plan"])
            counts["users"] += 1
            if args.dry_run:
                counts.update(plan.counts)
            elif not plan.empty:
                commit(engine, plan, vectors, int(row["version"]), counts)
            progress.tick(counts)
    if not args.dry_run:  # after the night's changes, so the profiles show them
        with llm_summarizer(args.memory) as summarize:
            counts["profiles"] = Profiles(engine).refresh_all(summarize)
    progress.tick(counts, force=True)
    result: dict[str, Any] = {"dry_run": args.dry_run,
                              **{k: counts.get(k, 0) for k in (
                                  "users", "expired", "retired", "decayed",
                                  "merged_clusters", "merged_originals",
                                  "users_changed_meanwhile", "profiles")},
                              "seconds": round(progress.elapsed_s, 1)}
    return summary("maintenance" + (" (dry run: nothing written)" if args.dry_run else ""),
                   result, args)

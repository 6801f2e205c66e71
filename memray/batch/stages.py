"""Ray Data stages shared by the jobs: building units per user, embedding in an actor
pool. They run in Ray workers; they import memray's core, never the other way round."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import numpy as np
import pandas as pd

from memray.config import EmbedderConfig, MemoryConfig
from memray.errors import InvalidInputError
from memray.ingest.logs import LogTurn, parse_turn
from memray.ingest.units import build_unit, unit_texts


def by_user(ds: Any, partitions: int) -> Any:
    """`ds` grouped by user in `partitions` blocks, for `map_groups`.

    The sort shuffle (runtime.py) keeps the number of blocks it is given and ignores
    `num_partitions`: a log read as one block came out as one block, so one actor task
    embedded every user and the writer waited for all of it (48 s of a 54 s job, then
    6 s of writes), and other actors of the pool had nothing to do. Split first, so the
    blocks reach the writer while the next ones embed. On 2 shared cores that saves no
    time (both need the same CPUs); it does where they do not share them."""
    return (ds.repartition(partitions, shuffle=False)
            .groupby("user_id", num_partitions=partitions))


def _clean(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}


def parse_group(group: pd.DataFrame, cfg: MemoryConfig) -> tuple[list[LogTurn], int, str]:
    """One user's log rows -> their valid turns, how many rows were invalid, the first
    error (for the job's summary)."""
    turns, invalid, error = [], 0, ""
    for row in group.to_dict("records"):
        try:
            turns.append(parse_turn(_clean(row), cfg.max_content_chars * 10))
        except InvalidInputError as exc:
            invalid += 1
            error = error or f"user {str(row.get('user_id'))[:64]!r}: {exc}"
    return turns, invalid, error


def units_of_user(group: pd.DataFrame, *, infer: bool, memory: dict[str, Any],
                  done: frozenset[str]) -> pd.DataFrame:
    """map_groups: one user's log rows -> one row with the user's unit as JSON."""
    cfg = MemoryConfig.model_validate(memory)
    turns, invalid, error = parse_group(group, cfg)
    unit = None
    if turns:
        from memray.core.factory import build_extractor

        extractor = build_extractor(cfg) if infer else None
        unit = build_unit(turns, infer=infer, extractor=extractor, done=done,
                          reply_chars=cfg.write.reply_context_chars)
    return pd.DataFrame({"unit": [json.dumps(unit) if unit else ""],
                         "rows": [len(group)], "invalid": [invalid], "error": [error]})


class EmbedTexts:
    """An actor: loads the model once, embeds batches of units (or of plain texts)."""

    def __init__(self, embedder: dict[str, Any], threads: int | None = None,
                 text_of: str = "unit") -> None:
        from memray.core.factory import build_embedder

        # Threads beyond the CPUs the actor holds spin against the driver's and the
        # other tasks' threads (OpenMP): 256 texts took 200 s instead of 10 under load.
        # The embedder sets them (torch.set_num_threads, or ONNX Runtime's intra-op pool).
        self._embedder = build_embedder(MemoryConfig(embedder=EmbedderConfig.model_validate(
            {**embedder, "cache_size": 0, "threads": threads or 1})))
        self._embedder.open()
        self._text_of = text_of

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        column = batch[self._text_of].tolist()
        if self._text_of == "unit":
            per_row = [unit_texts(json.loads(u)) if u else [] for u in column]
        else:
            per_row = [[t] for t in column]
        flat = [t for texts in per_row for t in texts]
        t0 = time.perf_counter()
        vectors = self._embedder.embed(flat) if flat else np.zeros((0, 1), np.float32)
        spent_ms = (time.perf_counter() - t0) * 1000
        out, i = [], 0
        for texts in per_row:
            out.append(np.ascontiguousarray(vectors[i:i + len(texts)]).tobytes())
            i += len(texts)
        batch = batch.copy()
        batch["vectors"] = out
        batch["embed_ms"] = spent_ms / max(len(per_row), 1)  # the model's own time, per row
        return batch

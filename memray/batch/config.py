"""Typed job configs, loaded from YAML (jobs/configs/*.yaml) with command-line overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memray.config import MemoryConfig
from memray.errors import ConfigError

_STRICT = ConfigDict(extra="forbid")


class RayArgs(BaseModel):
    model_config = _STRICT

    address: str | None = Field(None, description="None: start a local Ray; 'auto': join "
                                "the cluster this runs on (ray job submit).")
    num_cpus: int | None = Field(None, gt=0, description="CPUs of a local Ray (None: all).")


class PoolArgs(BaseModel):
    """The embedding actor pool. Actors hold their CPUs for the whole job, so on a small
    machine leave CPUs for the read and extract tasks (or they wait forever)."""

    model_config = _STRICT

    actors: int = Field(1, gt=0)
    cpus_per_actor: float = Field(1.0, gt=0)
    gpus_per_actor: float = Field(0.0, ge=0)
    torch_threads: int | None = Field(None, gt=0, description="None: one per CPU held "
                                      "(cpus_per_actor, at least 1).")
    batch_units: int = Field(16, gt=0, description="Users per embedding batch.")

    @property
    def threads(self) -> int:
        return self.torch_threads or max(1, int(self.cpus_per_actor))


class JobArgs(BaseModel):
    model_config = _STRICT

    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    ray: RayArgs = Field(default_factory=RayArgs)
    progress_every_s: float = Field(2.0, gt=0)
    summary_json: str | None = Field(None, description="Also write the summary here.")

    @classmethod
    def load(cls, path: str | Path | None, overrides: dict[str, Any] | None = None) -> Self:
        data: dict[str, Any] = {}
        if path is not None:
            try:
                data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
            except (OSError, yaml.YAMLError) as exc:
                raise ConfigError(f"cannot read job config {path}: {exc}") from exc
        for key, value in (overrides or {}).items():
            node = data
            *parents, leaf = key.split(".")
            for p in parents:
                node = node.setdefault(p, {})
            node[leaf] = value
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(f"invalid job config: {exc}") from exc


class BackfillArgs(JobArgs):
    input: list[str] = Field(..., min_length=1, description="Parquet / JSONL files or dirs.")
    format: Literal["auto", "parquet", "jsonl"] = "auto"
    infer: bool = Field(True, description="False: each user message becomes a memory.")
    embed: PoolArgs = Field(default_factory=PoolArgs)
    drain_rows: int = Field(2000, gt=0, description="Bulk write size (infer=False).")
    partitions: int = Field(16, gt=0, description="Hash partitions of the group-by-user "
                            "shuffle (more for big logs on big clusters).")


class MaintenanceArgs(JobArgs):
    dry_run: bool = False
    candidate_days: int = Field(30, gt=0, description="Retire candidates older than this.")
    merge_below: float = Field(0.3, ge=0, le=1, description="Merge memories under this "
                               "importance.")
    merge_similarity: float = Field(0.75, gt=0, le=1, description="Cosine similarity that "
                                    "joins two memories into one cluster.")
    merge_max_chars: int = Field(400, gt=0)
    workers: int = Field(2, gt=0, description="Planning tasks in flight.")
    users_per_task: int = Field(64, gt=0)


class MigrateArgs(JobArgs):
    to: dict[str, Any] = Field(default_factory=dict, description="The new embedder "
                               "config (memory.embedder fields).")
    rollback: bool = False
    embed: PoolArgs = Field(default_factory=PoolArgs)
    sample: int = Field(50, ge=0, description="Memories whose recall is compared.")
    min_agreement: float = Field(0.9, ge=0, le=1, description="Share of the sample that "
                                 "must recall itself first in the new collection.")
    rows_per_batch: int = Field(256, gt=0)

"""Typed job configs, loaded from YAML (jobs/configs/*.yaml) with command-line overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

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


class LLMStageArgs(BaseModel):
    """Extraction by an LLM in the backfill (`infer: true` with `write.extractor: llm`): a
    `ray.data.llm` processor. `http`: requests to `memory.write.llm`'s endpoint; `vllm`: a
    vLLM engine inside the job, on GPUs."""

    model_config = _STRICT

    processor: Literal["http", "vllm"] = "http"
    concurrency: int = Field(1, gt=0, description="Processor actors (http: request "
                             "workers; vllm: engine replicas).")
    batch_size: int = Field(8, gt=0, description="Rounds per batch sent together.")
    qps: float | None = Field(None, gt=0, description="http: request rate cap per worker.")
    max_retries: int = Field(3, ge=0, description="http: retries of 429/5xx/lost "
                             "connections per request (then the job fails; rerun resumes).")
    model_source: str | None = Field(None, description="vllm: the model (a path or hub id).")
    engine_kwargs: dict[str, Any] = Field(default_factory=dict, description="vllm: engine "
                                          "arguments (max_model_len, ...).")
    accelerator_type: str | None = Field(None, description="vllm: e.g. H100.")


class BackfillArgs(JobArgs):
    input: list[str] = Field(..., min_length=1, description="Parquet / JSONL files or dirs.")
    format: Literal["auto", "parquet", "jsonl"] = "auto"
    infer: bool = Field(True, description="False: each user message becomes a memory.")
    embed: PoolArgs = Field(default_factory=PoolArgs)
    drain_rows: int = Field(2000, gt=0, description="Bulk write size (infer=False).")
    partitions: int = Field(16, gt=0, description="Blocks of users after the group-by-user "
                            "shuffle: each is embedded, then written, as one piece (more "
                            "for big logs on big clusters).")
    llm: LLMStageArgs = Field(default_factory=LLMStageArgs)

    @property
    def llm_stage(self) -> bool:
        """Extraction through the Ray Data LLM processor: when `infer` and the memory
        config extracts with an endpoint (`http`) or the job brings vLLM (`vllm`)."""
        return self.infer and (self.memory.write.uses == "llm" or self.llm.processor == "vllm")

    @model_validator(mode="after")
    def _check_llm(self) -> Self:
        if self.llm.processor == "vllm" and not self.llm.model_source:
            raise ValueError("llm.processor 'vllm' needs llm.model_source")
        return self


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

"""Typed arguments of the memray Serve application (the `args:` of a serve config)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from memray.api.app import ApiLimits
from memray.api.auth import ApiKey, ReloadingKeys
from memray.config import MemoryConfig


class EmbedderArgs(BaseModel):
    """Where query and memory texts are embedded. `deployment`: a separate embedding
    deployment the API calls (batched with `@serve.batch`; the GPU shape); its replicas,
    CPUs and GPUs live in the YAML `deployments:` under `memray-embedder`. `replica`: each
    API replica embeds in its own process with `memory.embedder` (no hop; concurrent
    searches share forward passes): the faster choice on a CPU-only machine, where a hop
    costs more than a batch saves."""

    model_config = ConfigDict(extra="forbid")

    placement: Literal["deployment", "replica"] = Field(
        "deployment", description="deployment: a separate embedding deployment; replica: "
        "in each API replica's process (the rest of these fields are the deployment's).")

    max_batch_size: int = Field(32, gt=0, le=4096, description="@serve.batch size.")
    batch_wait_timeout_s: float = Field(0.005, ge=0, description="@serve.batch wait.")
    device: str = Field("cpu", description="cpu or cuda; fp16 is used on cuda.")
    request_timeout_s: float = Field(30.0, gt=0, description="The ingress's wait for it.")


class ServeArgs(BaseModel):
    """Everything `build_app` needs; `serve_configs/*.yaml` carry it under `args:`."""

    model_config = ConfigDict(extra="forbid")

    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    embedder: EmbedderArgs = Field(default_factory=EmbedderArgs)
    dim: int = Field(384, gt=0, description="The embedding model's dimension.")
    keys: list[ApiKey] = Field(default_factory=list, description="Inline API keys.")
    keys_file: str | None = Field(None, description="YAML with `keys:` (hashed).")
    limits: ApiLimits = Field(default_factory=ApiLimits)

    def keyring(self) -> ReloadingKeys:
        """The inline keys and the keys file, read again when the file changes."""
        return ReloadingKeys(self.keys_file, self.keys)


def load_serve_config(path: str | Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    return data


def memray_app_args(config: dict[str, Any]) -> ServeArgs:
    """The typed args of the memray application in a serve config file."""
    for app in config["applications"]:
        if app["import_path"] == "memray.serve:build_app":
            return ServeArgs.model_validate(app.get("args") or {})
    raise ValueError("no memray.serve:build_app application in this serve config")

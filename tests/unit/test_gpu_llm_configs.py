"""The GPU path, checked as far as a machine without vLLM or a GPU allows: the configs are
validated by Ray's own models (no engine is started), and they agree with each other.

`ray.serve.llm` itself cannot be imported without vLLM or SGLang, so the serving config is
validated with the model it is built on, at a private path: if Ray moves it, this test
fails and says so (update the import, never skip)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from memray.batch.config import BackfillArgs
from memray.batch.llm_stage import _vllm_row, processor_config
from memray.extract.llm import facts_request
from memray.extract.llm_prompt import FACTS_SCHEMA

ROOT = Path(__file__).parents[2]


def serve_llm_configs() -> list[dict[str, Any]]:
    cfg = yaml.safe_load((ROOT / "serve_configs" / "gpu-cluster.yaml").read_text())
    (app,) = [a for a in cfg["applications"] if a["import_path"].startswith("ray.serve.llm")]
    configs: list[dict[str, Any]] = app["args"]["llm_configs"]
    return configs


def gpu_backfills() -> list[BackfillArgs]:
    cm = yaml.safe_load((ROOT / "k8s" / "jobs" / "configmap.yaml").read_text())
    return [BackfillArgs.load(ROOT / "jobs" / "configs" / "backfill-gpu.yaml"),
            BackfillArgs.model_validate(yaml.safe_load(cm["data"]["backfill.yaml"]))]


def test_the_serving_llm_config_is_valid_for_ray_serve_llm() -> None:
    try:
        from ray.llm._internal.serve.core.configs.llm_config import LLMConfig
    except ImportError as exc:  # pragma: no cover - a Ray upgrade moved it
        pytest.fail(f"Ray moved ray.serve.llm's LLMConfig ({exc}); update this import")
    (raw,) = serve_llm_configs()
    cfg = LLMConfig.model_validate(raw)
    memray_app = yaml.safe_load((ROOT / "serve_configs" / "gpu-cluster.yaml").read_text())
    write = memray_app["applications"][0]["args"]["memory"]["write"]
    assert cfg.model_id == write["llm"]["model"]  # the API asks for the model served
    assert cfg.engine_kwargs["guided_decoding_backend"] == "xgrammar"


@pytest.mark.parametrize("args", gpu_backfills(), ids=["jobs/configs", "k8s configmap"])
def test_the_gpu_backfill_builds_a_valid_vllm_processor_config(args: BackfillArgs) -> None:
    from ray.data.llm import vLLMEngineProcessorConfig

    assert args.llm_stage
    cfg = processor_config(args.llm, args.memory)
    assert isinstance(cfg, vLLMEngineProcessorConfig)
    vllm_served = serve_llm_configs()[0]["model_loading_config"]["model_source"]
    assert cfg.model_source == vllm_served and cfg.accelerator_type == "H100"
    # The rows it gets: the same messages as online, the schema as guided decoding.
    body = facts_request("m", [], [], 256)
    row = _vllm_row({"body": json.dumps(body)})
    assert row["messages"] == body["messages"]
    assert row["sampling_params"]["guided_decoding"] == {"json": FACTS_SCHEMA}


def test_the_http_processor_config_is_built_from_the_endpoint() -> None:
    from ray.data.llm import HttpRequestProcessorConfig

    args = BackfillArgs.model_validate({
        "input": ["x"], "memory": {"write": {"llm": {
            "base_url": "http://127.0.0.1:8000/llm/v1/", "model": "m", "api_key": "k"}}},
        "llm": {"concurrency": 2, "batch_size": 4, "qps": 5}})
    cfg = processor_config(args.llm, args.memory)
    assert isinstance(cfg, HttpRequestProcessorConfig)
    assert cfg.url == "http://127.0.0.1:8000/llm/v1/chat/completions"
    assert cfg.headers == {"Authorization": "Bearer k"} and cfg.qps == 5


def test_vllm_without_a_model_is_refused() -> None:
    with pytest.raises(ValueError, match="model_source"):
        BackfillArgs.model_validate({"input": ["x"], "llm": {"processor": "vllm"}})

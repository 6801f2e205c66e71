"""GPU checks: skipped without a CUDA device (CI has none); run them on a GPU machine."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_fp16_gpu_embeddings_match_cpu() -> None:
    from memray.embed.sentence import SentenceTransformerEmbedder

    texts = ["I'm only free after 9 pm", "我不吃香菜", "I moved to Hangzhou"]
    cpu = SentenceTransformerEmbedder(device="cpu")
    gpu = SentenceTransformerEmbedder(device="cuda", fp16=True)
    a, b = cpu.embed(texts), gpu.embed(texts)
    assert b.dtype == np.float32 and b.shape == a.shape
    assert np.min(np.sum(a * b, axis=1)) > 0.999


def test_llm_app_args_validate_with_ray_serve_llm() -> None:
    from pathlib import Path

    llm = pytest.importorskip("ray.serve.llm", reason="ray.serve.llm needs vLLM (gpu extra)")
    from memray.serve.args import load_serve_config

    config = load_serve_config(Path(__file__).parents[2] / "serve_configs" / "gpu-cluster.yaml")
    app = next(a for a in config["applications"]
               if a["import_path"] == "ray.serve.llm:build_openai_app")
    llm.LLMServingArgs.model_validate(app["args"])

"""The GPU embedding script (memray/bench/gpu_embed.py) works end to end before a GPU
machine is lent: prepared here, run as a GPU machine would run it (a plain script, by
path), on the CPU in fp16, with counts small enough for CI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memray.bench import gpu_embed

SCRIPT = Path(gpu_embed.__file__)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("gpu-embed")
    made = gpu_embed.prepare(folder, SCRIPT.parents[2] / "tests" / "data" / "locomo" /
                             "locomo_dev.json")
    assert made["mb"] <= gpu_embed.MAX_MB
    return folder


def test_the_prepared_folder_fits_a_gpu_machine_and_holds_fp16_weights(prepared: Path) -> None:
    from safetensors import safe_open

    weights = next((prepared / "model").rglob("*.safetensors"))
    with safe_open(str(weights), framework="pt") as f:
        dtypes = {str(f.get_tensor(k).dtype) for k in f.keys()}  # noqa: SIM118 - not iterable
    assert dtypes == {"torch.float16"}
    texts = json.loads((prepared / "texts.json").read_text(encoding="utf-8"))
    assert len(texts["queries"]) > 500 and len(texts["passages"]) > 2000


def test_run_as_a_plain_script_reports_latency_throughput_and_agreement(
        prepared: Path, tmp_path: Path) -> None:
    # as on a GPU machine without memray: importing it fails, and the script's own folder
    # is not on sys.path (python -P), so memray/bench's modules hide no real package
    argv = ["run", str(prepared), "--device", "cpu", "--queries", "4", "--passages", "24",
            "--batches", "1,8", "--out", str(tmp_path)]
    no_memray = ("import runpy, sys; sys.modules['memray'] = None; "
                 f"sys.argv = {[str(SCRIPT), *argv]!r}; "
                 f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')")
    done = subprocess.run([sys.executable, "-P", "-c", no_memray], check=False,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "gpu-embed.json").read_text())
    assert result["dtype"] == "float16"
    assert result["min_cosine_to_fp32_cpu"] > 0.999  # fp16 is the same model
    assert result["single_query_ms"]["n"] == 4 and result["single_query_ms"]["p50"] > 0
    assert [r["batch"] for r in result["throughput"]] == [1, 8]
    assert all(r["passages_per_s"] > 0 and r["queries_per_s"] > 0 for r in result["throughput"])
    assert "| 8 |" in done.stdout


def test_a_spent_budget_stops_before_the_next_batch_size(prepared: Path) -> None:
    said: list[str] = []
    result = gpu_embed.run(prepared, device="cpu", dtype="float32", queries_n=2, passages_n=8,
                           batches=[1, 8], budget_s=0.0, say=said.append)
    assert result["throughput"] == []
    assert any("budget" in line and "batch 1" in line for line in said)


def test_without_cuda_it_says_how_to_try_it_on_a_cpu(prepared: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(SystemExit, match="--device cpu"):
        gpu_embed.run(prepared, device="cuda", dtype="float16", queries_n=1, passages_n=1,
                      batches=[1], budget_s=1.0)

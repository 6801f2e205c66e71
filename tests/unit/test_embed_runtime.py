"""Choosing the embedding runtime and refusing configs that cannot work (no model loaded)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from memray import ConfigError, MemoryConfig
from memray.core.factory import build_embedder, embedder_runtime
from memray.embed.batching import BatchingEmbedder
from memray.embed.cache import CachedEmbedder
from memray.embed.onnx import OnnxEmbedder, read_spec
from memray.embed.sentence import SentenceTransformerEmbedder


def _built(embedder: dict[str, object]) -> object:
    return build_embedder(MemoryConfig.model_validate({"embedder": {
        **embedder, "cache_size": 0, "share_passes": False}}))


def test_auto_picks_onnx_on_cpu_and_torch_when_forced_or_on_a_gpu() -> None:
    auto = _built({})
    assert isinstance(auto, OnnxEmbedder) and auto.model == "all-MiniLM-L6-v2"
    assert isinstance(_built({"runtime": "torch"}), SentenceTransformerEmbedder)
    assert isinstance(_built({"device": "cuda"}), SentenceTransformerEmbedder)
    assert isinstance(_built({"runtime": "onnx"}), OnnxEmbedder)
    assert embedder_runtime(MemoryConfig().embedder) == "onnx"


def test_the_cache_stays_in_front_and_threads_reach_the_embedder() -> None:
    cfg = MemoryConfig.model_validate({"embedder": {"threads": 3, "batch_size": 32}})
    built = build_embedder(cfg)
    assert isinstance(built, CachedEmbedder)
    shared = built._inner  # concurrent callers share passes behind the cache
    assert isinstance(shared, BatchingEmbedder) and shared._max == 32
    inner = shared._inner
    assert isinstance(inner, OnnxEmbedder) and inner._threads == 3


def test_the_model_identity_is_the_same_for_both_runtimes_and_int8_is_another() -> None:
    names = {_built({"runtime": r}).model for r in ("onnx", "torch")}  # type: ignore[attr-defined]
    assert names == {"all-MiniLM-L6-v2"}
    int8 = _built({"model": "all-MiniLM-L6-v2-int8"})
    assert isinstance(int8, OnnxEmbedder) and int8.int8
    assert int8.model == "all-MiniLM-L6-v2-int8"


@pytest.mark.parametrize(("embedder", "words"), [
    ({"runtime": "onnx", "device": "cuda"}, "runs on the CPU only"),
    ({"model": "all-MiniLM-L6-v2-int8", "runtime": "torch"}, "needs runtime 'onnx'"),
    ({"model": "all-MiniLM-L6-v2-int8", "device": "cuda:1"}, "CPU only"),
    ({"runtime": "tensorrt"}, "'auto', 'onnx' or 'torch'"),
    ({"threads": 0}, "greater than 0"),
])
def test_config_errors_say_what_is_wrong(embedder: dict[str, object], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        MemoryConfig.model_validate({"embedder": embedder})


def test_hashing_ignores_the_runtime_checks() -> None:
    cfg = MemoryConfig.model_validate({"embedder": {"provider": "hashing", "device": "cuda",
                                                    "runtime": "onnx", "cache_size": 0}})
    assert build_embedder(cfg).model == "all-MiniLM-L6-v2-64"  # the hashing stand-in


def test_an_unopened_embedder_has_no_dim_and_an_unknown_model_is_a_config_error() -> None:
    e = OnnxEmbedder(model="no-such-model")
    with pytest.raises(ConfigError, match="not open"):
        _ = e.dim
    with pytest.raises(ConfigError, match="no packaged model named 'no-such-model'"):
        e.open()


def _model_dir(tmp_path: Path, modules: list[str], pooling: dict[str, object]) -> Path:
    (tmp_path / "1_Pooling").mkdir(parents=True)
    types = {"T": "sentence_transformers.models.Transformer",
             "P": "sentence_transformers.models.Pooling",
             "N": "sentence_transformers.models.Normalize",
             "D": "sentence_transformers.models.Dense"}
    paths = {"T": "", "P": "1_Pooling", "N": "2_Normalize", "D": "2_Dense"}
    (tmp_path / "modules.json").write_text(json.dumps(
        [{"idx": i, "name": str(i), "path": paths[m], "type": types[m]}
         for i, m in enumerate(modules)]))
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 8, **pooling}))
    (tmp_path / "sentence_bert_config.json").write_text('{"max_seq_length": 32}')
    (tmp_path / "config.json").write_text('{"pad_token_id": 1}')
    return tmp_path


def test_spec_reads_the_sentence_transformers_config(tmp_path: Path) -> None:
    spec = read_spec(_model_dir(tmp_path, ["T", "P", "N"], {"pooling_mode_mean_tokens": True}))
    assert (spec.max_seq_length, spec.dim, spec.pad_id) == (32, 8, 1)


def test_models_this_runtime_cannot_reproduce_are_refused(tmp_path: Path) -> None:
    cls = _model_dir(tmp_path / "cls", ["T", "P"], {"pooling_mode_cls_token": True,
                                                    "pooling_mode_mean_tokens": False})
    with pytest.raises(ConfigError, match="mean pooling only"):
        read_spec(cls)
    dense = _model_dir(tmp_path / "dense", ["T", "P", "D"], {"pooling_mode_mean_tokens": True})
    with pytest.raises(ConfigError, match="runtime 'torch'"):
        read_spec(dense)
    with pytest.raises(ConfigError, match="cannot read"):
        read_spec(tmp_path / "missing")

"""The ONNX graph of a sentence-transformers model, exported once into the model cache.

The graph takes `input_ids` and `attention_mask` (int64, [batch, seq]) and returns the
mean-pooled token embeddings (float32, [batch, dim], not yet normalised): the model's
Transformer and Pooling modules. It is exported with torch's TorchScript exporter
(`dynamo=False`, which needs the `onnx` package to write the file) from the model's own
local weights; nothing is downloaded.

Layout: ``<model_cache>/onnx/<model>-<source>/`` holds ``model.onnx`` and its sidecar
``model.json`` (format, source fingerprint, byte count, sha256), and for int8 models
``model-int8.onnx`` / ``model-int8.json``. `source` fingerprints the model dir (its config
files' contents, its weights' size and mtime), so another copy of the weights gets its own
graph. A graph is used only when its sidecar matches it byte for byte; a torn, truncated or
stale file is exported again. Writers take an exclusive `flock` on the dir's ``.lock`` and
write each file to a temp file that `os.replace` moves into place, so concurrent processes
(Ray actors, API replicas) export it once and never read half a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memray.embed.packaged import model_cache
from memray.errors import ConfigError

log = logging.getLogger(__name__)

FORMAT = 1  # bump when the exported graph changes (inputs, pooling, opset)
OPSET = 17
INPUTS = ("input_ids", "attention_mask")
OUTPUT = "embedding"
# The files whose content decides the graph; the weights are fingerprinted by size and
# mtime (hashing 440 MB of mpnet on every open would cost a second).
_CONFIG_FILES = ("config.json", "modules.json", "sentence_bert_config.json",
                 "1_Pooling/config.json", "tokenizer.json")
_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


@dataclass(frozen=True)
class Graph:
    """A verified graph: its bytes, where it lives, and whether this call exported it."""

    data: bytes
    path: Path
    exported: bool


def source_fingerprint(model_dir: Path) -> str:
    """A hex digest of what the graph is made from; ConfigError when there are no weights."""
    h = hashlib.sha256(f"format {FORMAT} opset {OPSET}\n".encode())
    for name in _CONFIG_FILES:
        f = model_dir / name
        if f.is_file():
            h.update(name.encode() + b"\0" + f.read_bytes() + b"\0")
    weights = [model_dir / w for w in _WEIGHTS if (model_dir / w).is_file()]
    if not weights:
        raise ConfigError(f"no model weights ({' or '.join(_WEIGHTS)}) in {model_dir}")
    st = weights[0].stat()
    h.update(f"{weights[0].name} {st.st_size} {st.st_mtime_ns}".encode())
    return h.hexdigest()


def graph_dir(model: str, model_dir: Path) -> Path:
    """The cache dir of `model`'s graphs made from `model_dir`."""
    return _graph_dir(model, source_fingerprint(model_dir))


def _graph_dir(model: str, source: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model.removesuffix("-int8"))
    return model_cache() / "onnx" / f"{slug}-{source[:16]}"


def load_graph(model: str, model_dir: Path, *, int8: bool = False) -> Graph:
    """The graph of the model in `model_dir`, exported first if the cache has no valid one.

    int8: the graph with dynamically int8-quantised weights (made from the float graph).
    Raises ConfigError when it has to be exported and cannot be (a package is missing, the
    model does not load).
    """
    source = source_fingerprint(model_dir)
    d = _graph_dir(model, source)
    float_graph = _load_or_make(d, "model", source, lambda: export_graph(model_dir))
    if not int8:
        return float_graph
    return _load_or_make(d, "model-int8", source, lambda: _quantize(float_graph.path))


def _load_or_make(d: Path, stem: str, source: str, make: Callable[[], bytes]) -> Graph:
    data = _read_valid(d, stem, source, warn=False)
    if data is not None:
        return Graph(data, d / f"{stem}.onnx", exported=False)
    d.mkdir(parents=True, exist_ok=True)
    with _locked(d / ".lock"):
        data = _read_valid(d, stem, source)  # another process may have made it meanwhile
        if data is not None:
            return Graph(data, d / f"{stem}.onnx", exported=False)
        data = make()
        _write_atomic(d / f"{stem}.onnx", data)
        meta = {"format": FORMAT, "opset": OPSET, "source": source, "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest()}
        _write_atomic(d / f"{stem}.json", json.dumps(meta, indent=1).encode())
        log.info("exported %s (%d bytes) into %s", stem, len(data), d)
        return Graph(data, d / f"{stem}.onnx", exported=True)


def _read_valid(d: Path, stem: str, source: str, *, warn: bool = True) -> bytes | None:
    """The graph's bytes if its sidecar vouches for them, else None (missing, torn, stale)."""
    try:
        meta = json.loads((d / f"{stem}.json").read_text(encoding="utf-8"))
        data = (d / f"{stem}.onnx").read_bytes()
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict):
        return None
    wanted = {"format": FORMAT, "opset": OPSET, "source": source, "bytes": len(data)}
    if any(meta.get(k) != v for k, v in wanted.items()) \
            or meta.get("sha256") != hashlib.sha256(data).hexdigest():
        if warn:
            log.warning("the cached graph %s/%s.onnx does not match its sidecar; exporting "
                        "it again", d, stem)
        return None
    return data


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive flock: released by the kernel if the holder dies."""
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes it 0600; the cache may be shared
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def export_graph(model_dir: Path) -> bytes:
    """Export the model's Transformer + mean Pooling to ONNX bytes (torch, a few seconds).

    The torch module is thrown away afterwards: in torch 2.13 the exporter leaves the
    module it traced computing wrong values, so it is never reused.
    """
    try:
        import onnx  # noqa: F401  (torch's exporter needs it to write the file)
        import torch
        from transformers import AutoConfig, AutoModel
    except ImportError as exc:
        raise ConfigError(f"exporting the ONNX graph needs the package {exc.name!r} "
                          "(pip install onnx), or set embedder.runtime to 'torch'") from exc
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        config = AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
        model = AutoModel.from_pretrained(str(model_dir), local_files_only=True,
                                          attn_implementation="eager").eval()
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load the model in {model_dir} to export it: {exc}") from exc
    pooled = _mean_pooled(torch, model)
    pad = int(getattr(config, "pad_token_id", None) or 0)
    # A padded example, so that the traced graph keeps the attention mask.
    ids = torch.tensor([[pad + 3, pad + 4, pad + 5, pad + 6], [pad + 3, pad + 4, pad, pad]])
    mask = (ids != pad).long()
    axes = {name: {0: "batch", 1: "seq"} for name in INPUTS} | {OUTPUT: {0: "batch"}}
    with tempfile.TemporaryDirectory(prefix="memray-onnx-") as tmp, torch.no_grad(), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer and deprecation warnings, all expected
        out = Path(tmp) / "model.onnx"
        torch.onnx.export(pooled, (ids, mask), out, input_names=list(INPUTS),
                          output_names=[OUTPUT], dynamic_axes=axes, opset_version=OPSET,
                          dynamo=False, do_constant_folding=True)
        return out.read_bytes()


def _mean_pooled(torch: Any, model: Any) -> Any:
    """`model` followed by sentence-transformers' mean pooling (mask-weighted, min 1e-9)."""

    class MeanPooled(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            tokens = self.model(input_ids=input_ids,
                                attention_mask=attention_mask).last_hidden_state
            weights = attention_mask.unsqueeze(-1).to(tokens.dtype)
            return (tokens * weights).sum(1) / weights.sum(1).clamp(min=1e-9)

    return MeanPooled().eval()


def _quantize(float_path: Path) -> bytes:
    """Dynamic int8 quantisation of the float graph (weights int8, activations at run time)."""
    try:
        from onnxruntime.quantization import (  # type: ignore[import-untyped]
            QuantType,
            quantize_dynamic,
        )
    except ImportError as exc:
        raise ConfigError(f"int8 quantisation needs the package {exc.name!r}") from exc
    with tempfile.TemporaryDirectory(dir=float_path.parent, prefix=".quant-") as tmp:
        out = Path(tmp) / "model-int8.onnx"
        quantize_dynamic(float_path, out, weight_type=QuantType.QInt8)
        return out.read_bytes()

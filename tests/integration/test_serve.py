"""The memray Serve application on real Ray (num_cpus=2), over HTTP on 127.0.0.1, built by
the same builder the serve configs use; the LLM extractor against a scripted server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from local_ray import start_local_ray
from milvus_server import free_port
from openai_stub import Reply, ScriptedOpenAI

from memray.api.auth import hash_key

ray = pytest.importorskip("ray", reason="needs ray[serve] (the dev extra installs it)")
serve = pytest.importorskip("ray.serve")

KEY = "mr_serve_test_key"


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI() as server:
        yield server


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory, llm: ScriptedOpenAI) -> Iterator[str]:
    from memray.serve import build_app

    # Two apps, three replicas of one logical CPU each (Serve's default); the machine
    # itself may have 2 cores: logical CPUs only place actors.
    start_local_ray(3, runtime_env={"env_vars": {"RAY_AUTH_MODE": "disabled"}})
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    args: dict[str, Any] = {
        "memory": {"data_dir": str(tmp_path_factory.mktemp("serve")),
                   "write": {"extractor": "llm",
                             "llm": {"base_url": llm.base_url, "model": "m",
                                     "timeout_s": 5, "max_retries": 0}}},
        "keys": [{"name": "t", "sha256": hash_key(KEY), "user_prefix": "u-"}],
        "limits": {"max_body_bytes": 50_000, "max_messages": 10},
    }
    serve.run(build_app(args), name="memray", route_prefix="/")
    # The same API with the embedder in its replica (`placement: replica`, local.yaml's).
    own = {**args, "memory": {"data_dir": str(tmp_path_factory.mktemp("serve-replica"))},
           "embedder": {"placement": "replica"}}
    serve.run(build_app(own), name="memray-replica", route_prefix="/replica")
    yield f"http://127.0.0.1:{port}"
    serve.shutdown()
    ray.shutdown()


def test_end_to_end_over_serve(base_url: str, llm: ScriptedOpenAI) -> None:
    h = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=base_url, timeout=60) as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        llm.script(Reply({"facts": [{"op": "ADD", "id": -1, "content": "Lives in Hangzhou",
                                     "type": "identity", "source": "user_stated",
                                     "slot": "city", "importance": 0.8, "turns": ["t0"]}]}))
        r = http.post("/v1/memories", headers=h, json={
            "user_id": "u-1", "messages": [{"role": "user", "content": "I live in Hangzhou"},
                                           {"role": "assistant", "content": "ok"}]})
        assert r.status_code == 200, r.text
        assert [e["op"] for e in r.json()["events"]] == ["ADD"]
        assert llm.requests[-1]["body"]["response_format"]["type"] == "json_schema"
        r = http.post("/v1/memories/search", headers=h,
                      json={"user_id": "u-1", "query": "Which city do I live in?"})
        assert [x["memory"]["content"] for x in r.json()["results"]] == ["Lives in Hangzhou"]
        items = http.get("/v1/memories", params={"user_id": "u-1"}, headers=h).json()["items"]
        mid = items[0]["id"]
        assert http.get(f"/v1/memories/{mid}", params={"user_id": "u-2"},
                        headers=h).status_code == 404
        assert http.delete(f"/v1/memories/{mid}", params={"user_id": "u-1"},
                           headers=h).status_code == 200
        assert "Hangzhou" not in http.get("/v1/users/u-1/export", headers=h).text
        assert http.get("/v1/memories", params={"user_id": "u-1"}).status_code == 401
        assert http.get("/v1/memories", params={"user_id": "x-1"},
                        headers=h).status_code == 403
        assert http.post("/v1/memories/search", headers=h,
                         json={"user_id": "u-1", "query": "x", "k": 3}).status_code == 422
        assert http.post("/v1/memories", headers=h, json={
            "user_id": "u-1", "messages": "x" * 60_000}).status_code == 413
        assert "paths" in http.get("/openapi.json").json()


def test_embedding_in_the_api_replica(base_url: str) -> None:
    h = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=base_url + "/replica", timeout=60) as http:
        for text in ("I live in Hangzhou", "I like jazz", "我每天早上跑步"):
            r = http.post("/v1/memories", headers=h,
                          json={"user_id": "u-1", "messages": text, "infer": False})
            assert r.status_code == 200, r.text
        r = http.post("/v1/memories", headers=h,
                      json={"user_id": "u-2", "messages": "I live in Paris", "infer": False})
        assert r.status_code == 200, r.text
        r = http.post("/v1/memories/search", headers=h,
                      json={"user_id": "u-1", "query": "Which city do I live in?"})
        assert r.status_code == 200, r.text
        found = [x["memory"]["content"] for x in r.json()["results"]]
        assert found[0] == "I live in Hangzhou" and "I live in Paris" not in found
        r = http.post("/v1/context", headers=h,
                      json={"user_id": "u-1", "query": "what music do I like?"})
        assert "I like jazz" in r.json()["context"]
    apps = serve.status().applications
    deployments = set(apps["memray-replica"].deployments)
    assert deployments == {"memray-api"}  # no embedding deployment in this shape
    assert "memray-embedder" in apps["memray"].deployments


def test_serve_configs_build(tmp_path: Path) -> None:
    from memray.serve.args import load_serve_config, memray_app_args
    from memray.serve.builder import build_app

    root = Path(__file__).parents[2] / "serve_configs"
    for name in ("local.yaml", "gpu-cluster.yaml"):
        config = load_serve_config(root / name)
        args = memray_app_args(config)
        assert build_app(args) is not None
    gpu = load_serve_config(root / "gpu-cluster.yaml")
    shapes = {d["name"]: d for app in gpu["applications"] for d in app.get("deployments", [])}
    assert shapes["memray-embedder"]["ray_actor_options"]["num_gpus"] >= 1
    assert "autoscaling_config" in shapes["memray-embedder"]
    assert memray_app_args(gpu).memory.store.milvus_uri is None  # MEMRAY_MILVUS_URI on pods
    assert memray_app_args(gpu).memory.store.postgres_dsn is None  # from a secret, never YAML
    assert "num_replicas" not in shapes["memray-api"]
    assert shapes["memray-api"]["autoscaling_config"]["min_replicas"] >= 2
    assert memray_app_args(gpu).embedder.device.startswith("cuda")
    llm_app = next(a for a in gpu["applications"]
                   if a["import_path"] == "ray.serve.llm:build_openai_app")
    (llm_cfg,) = llm_app["args"]["llm_configs"]
    assert llm_cfg["accelerator_type"]
    assert memray_app_args(gpu).memory.write.extractor == "llm"
    local = memray_app_args(load_serve_config(root / "local.yaml"))
    assert local.memory.store.milvus_uri is None  # embedded milvus-lite
    local_shapes = {d["name"]: d for a in load_serve_config(root / "local.yaml")["applications"]
                    for d in a.get("deployments", [])}
    assert local_shapes["memray-api"]["num_replicas"] == 1  # one owner of the lite dir
    assert local.embedder.placement == "replica" and set(local_shapes) == {"memray-api"}
    assert memray_app_args(gpu).embedder.placement == "deployment"


def test_mcp_over_streamable_http_through_serve(base_url: str) -> None:
    """The MCP endpoint through Serve's proxy (streamed responses), with the key's scope."""
    import anyio
    from test_mcp import error_text, full_cycle, http_client

    async def run() -> None:
        async with http_client(base_url + "/replica", KEY) as client:
            await full_cycle(client, "u-mcp")
            text = error_text(await client.call_tool("get_memories", {"user_id": "x-1"}))
            assert "forbidden" in text

    anyio.run(run)



def test_the_api_replica_takes_its_memory_from_an_injected_factory(tmp_path: Path) -> None:
    """The ingress builds its Memory through `memory_factory` (replica_memory is its
    __init__'s whole work): a test hands one on the fakes, without patching imports."""
    from memray import Memory
    from memray.config import MemoryConfig
    from memray.embed.hashing import HashingEmbedder
    from memray.serve.args import ServeArgs
    from memray.serve.deployments import replica_memory
    from memray.store.fake import InMemoryStore
    from memray.store.fake_log import InMemoryEventLog

    made: list[tuple[MemoryConfig, object]] = []

    def factory(cfg: MemoryConfig, embedder: object) -> Memory:
        made.append((cfg, embedder))
        emb = HashingEmbedder(dim=32)
        return Memory(cfg, embedder=emb, store=InMemoryStore(model=emb.model, dim=32),
                      events=InMemoryEventLog(dim=32))

    args = ServeArgs.model_validate({"memory": {"data_dir": str(tmp_path),
                                                "embedder": {"threads": 2}}, "dim": 32})
    with replica_memory(args, None, factory) as m:
        assert m.add("I like tea", user_id="u", infer=False).events[0].op == "ADD"
    [(cfg, embedder)] = made
    assert embedder is None and cfg.data_dir == str(tmp_path)  # placement "replica"
    assert cfg.embedder.threads == 2

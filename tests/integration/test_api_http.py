"""REST API v1 end to end over real HTTP on 127.0.0.1 (uvicorn in a thread), on the
embedded default. The Ray Serve layer mounts this same app."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from memray import Memory, MemoryConfig
from memray.api.app import ApiLimits, build_api
from memray.api.auth import ApiKey, KeyRing, KeySource, hash_key
from memray.embed.cache import CachedEmbedder

ADMIN, ALICE, TEAM = "mr_admin_key", "mr_alice_key", "mr_team_key"
KEYS = KeyRing(keys=[
    ApiKey(name="admin", sha256=hash_key(ADMIN), admin=True),
    ApiKey(name="alice", sha256=hash_key(ALICE), users=["alice"]),
    ApiKey(name="team", sha256=hash_key(TEAM), user_prefix="team-"),
])


class Served:
    def __init__(self, memory: Memory, *, job_lease_s: float = 120.0,
                 keys: KeySource = KEYS, limits: ApiLimits | None = None) -> None:
        self.app = build_api(memory, keys, job_lease_s=job_lease_s,
                             limits=limits or ApiLimits(max_body_bytes=20_000, max_messages=5))
        config = uvicorn.Config(self.app, host="127.0.0.1", port=0, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> httpx.Client:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
        return self.client

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.app.state.jobs.close()


@pytest.fixture
def memory(tmp_path: Path, embedder: CachedEmbedder) -> Iterator[Memory]:
    with Memory(MemoryConfig(data_dir=str(tmp_path / "d")), embedder=embedder) as m:
        yield m


@pytest.fixture
def http(memory: Memory, tmp_path: Path) -> Iterator[httpx.Client]:
    with Served(memory) as client:
        yield client


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def add(http: httpx.Client, key: str, user: str, text: str, **extra: Any) -> httpx.Response:
    body = {"user_id": user, "messages": [{"role": "user", "content": text},
                                          {"role": "assistant", "content": "ok"}], **extra}
    return http.post("/v1/memories", json=body, headers=auth(key))


def test_add_search_list_get_update_delete_export(http: httpx.Client) -> None:
    r = add(http, ALICE, "alice", "I live in Shanghai")
    assert r.status_code == 200, r.text
    mid = r.json()["events"][0]["memory_id"]
    r = http.post("/v1/memories/search", headers=auth(ALICE),
                  json={"user_id": "alice", "query": "Which city do I live in?"})
    assert [h["memory"]["content"] for h in r.json()["results"]] == ["I live in Shanghai"]
    r = http.post("/v1/context", headers=auth(ALICE),
                  json={"user_id": "alice", "query": "Which city do I live in?"})
    assert "I live in Shanghai" in r.json()["context"]
    page = http.get("/v1/memories", params={"user_id": "alice", "limit": 10},
                    headers=auth(ALICE)).json()
    assert [i["id"] for i in page["items"]] == [mid] and page["next_cursor"] is None
    assert http.get(f"/v1/memories/{mid}", params={"user_id": "alice"},
                    headers=auth(ALICE)).json()["content"] == "I live in Shanghai"
    r = http.put(f"/v1/memories/{mid}", params={"user_id": "alice"}, headers=auth(ALICE),
                 json={"content": "I live in Hangzhou"})
    assert r.json()["op"] == "UPDATE"
    hist = http.get(f"/v1/memories/{mid}/history", params={"user_id": "alice"},
                    headers=auth(ALICE)).json()
    assert [e["op"] for e in hist] == ["ADD", "UPDATE"]
    assert http.delete(f"/v1/memories/{mid}", params={"user_id": "alice"},
                       headers=auth(ALICE)).json()["op"] == "DELETE"
    assert http.get(f"/v1/memories/{mid}", params={"user_id": "alice"},
                    headers=auth(ALICE)).status_code == 404
    add(http, ALICE, "alice", "I like jazz")
    export = http.get("/v1/users/alice/export", headers=auth(ALICE)).json()
    assert "Hangzhou" not in json.dumps(export) and "jazz" in json.dumps(export)
    gone = http.delete("/v1/users/alice/memories", headers=auth(ALICE)).json()
    assert (gone["deleted"], gone["version"]) == (1, 5)
    assert gone["receipt"]["kind"] == "delete_all" and gone["receipt"]["verified"]
    assert "jazz" not in json.dumps(gone)  # ids and counts, never content
    assert http.get("/healthz").json() == {"status": "ok"}
    metrics = http.get("/metrics").text  # counted per matched route and status
    assert ('memray_requests_total{route="/v1/memories/{memory_id:memray_id}",status="404"} '
            '1.0') in metrics
    assert 'memray_request_seconds_count{route="/v1/users/{user_id}/export"}' in metrics


def _gauge(http: httpx.Client, name: str) -> float:
    line = next(x for x in http.get("/metrics").text.splitlines() if x.startswith(name + " "))
    return float(line.split()[1])


def test_metrics_say_how_often_a_users_memories_were_read_whole(http: httpx.Client) -> None:
    add(http, ADMIN, "carol", "I like tea")
    before = _gauge(http, "memray_hot_set_loads")
    for q in ("what do I drink?", "tea?", "anything hot?"):
        assert http.post("/v1/memories/search", headers=auth(ADMIN),
                         json={"user_id": "carol", "query": q}).status_code == 200
    assert _gauge(http, "memray_hot_set_loads") - before == 1  # then held
    assert _gauge(http, "memray_hot_set_users") >= 1
    # this app's embedder is a bare cache (no shared passes): the gauges are there, at 0
    assert _gauge(http, "memray_embed_passes") == _gauge(http, "memray_embed_calls") == 0


def test_401_and_403_reveal_nothing(http: httpx.Client) -> None:
    mid = add(http, ADMIN, "bob", "I like tea").json()["events"][0]["memory_id"]
    missing = "01a23710-6d01-7eff-ae16-8d4bbbadae8f"
    assert http.post("/v1/memories/search", json={"user_id": "bob", "query": "x"}
                     ).status_code == 401
    assert http.get("/v1/memories", params={"user_id": "bob"},
                    headers=auth("wrong")).status_code == 401
    bodies = []
    for memory_id in (mid, missing):
        r = http.get(f"/v1/memories/{memory_id}", params={"user_id": "bob"},
                     headers=auth(ALICE))
        assert r.status_code == 403
        bodies.append(r.json())
    assert bodies[0] == bodies[1]  # the same answer whether or not the memory exists
    r = http.get(f"/v1/memories/{mid}", params={"user_id": "alice"}, headers=auth(ALICE))
    assert r.status_code == 404  # in scope, but bob's id: exactly like a missing id
    assert r.json()["detail"] == http.get(f"/v1/memories/{missing}",
                                          params={"user_id": "alice"},
                                          headers=auth(ALICE)).json()["detail"].replace(
        missing, mid)
    assert add(http, TEAM, "team-7", "I like tea").status_code == 200
    assert add(http, TEAM, "other-7", "I like tea").status_code == 403
    assert http.delete("/v1/users/bob/memories", headers=auth(TEAM)).status_code == 403


def test_422_and_413_with_json_errors_and_nothing_written(http: httpx.Client) -> None:
    r = http.post("/v1/memories", headers=auth(ALICE),
                  json={"user_id": "alice", "messages": "hi", "colour": "red"})
    assert r.status_code == 422 and r.json()["error"] == "validation_error"
    assert any("colour" in str(e["loc"]) for e in r.json()["detail"])
    r = http.post("/v1/memories", headers=auth(ALICE), json={"user_id": "", "messages": "x"})
    assert r.status_code == 422 and r.json()["error"] == "validation_error"  # in the schema
    r = http.post("/v1/memories/search", headers=auth(ALICE),
                  json={"user_id": "alice", "query": "x", "top_k": 0})
    assert r.status_code == 422
    r = http.post("/v1/memories", headers=auth(ALICE), json={
        "user_id": "alice", "messages": [{"role": "user", "content": "x"}] * 6})
    assert r.status_code == 413 and r.json()["error"] == "too_many_messages"
    r = http.post("/v1/memories", headers=auth(ALICE),
                  json={"user_id": "alice", "messages": "x" * 30_000})
    assert r.status_code == 413 and r.json()["error"] == "payload_too_large"
    assert http.get("/v1/memories", params={"user_id": "alice"},
                    headers=auth(ALICE)).json()["items"] == []


def wait_job(http: httpx.Client, job_id: str, user: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        job = http.get(f"/v1/jobs/{job_id}", params={"user_id": user},
                       headers=auth(ADMIN)).json()
        if job["status"] != "queued" or time.monotonic() > deadline:
            return job  # type: ignore[no-any-return]
        time.sleep(0.1)


def test_async_adds_and_idempotency(http: httpx.Client) -> None:
    r = add(http, ALICE, "alice", "I like green tea", **{"async": True,
                                                         "idempotency_key": "k1"})
    assert r.status_code == 202
    job = wait_job(http, r.json()["job_id"], "alice")
    assert job["status"] == "done"
    again = add(http, ALICE, "alice", "I like green tea", **{"async": True,
                                                             "idempotency_key": "k1"})
    assert again.json()["job_id"] == r.json()["job_id"]
    sync1 = add(http, ALICE, "alice", "I like jazz", idempotency_key="k2").json()
    sync2 = add(http, ALICE, "alice", "I like jazz", idempotency_key="k2").json()
    assert sync1 == sync2
    items = http.get("/v1/memories", params={"user_id": "alice"},
                     headers=auth(ALICE)).json()["items"]
    assert sorted(i["content"] for i in items) == ["I like green tea", "I like jazz"]


def _queued_job(text: str) -> str:
    return json.dumps({"messages": text, "user_id": "alice", "session_id": None,
                       "agent_id": None, "metadata": None, "infer": True, "consent": None})


def test_queued_adds_survive_a_restart(memory: Memory) -> None:
    # A 202 was sent and the process died before the worker ran: the job is in the log.
    job_id = "01a23710-6d01-7eff-ae16-8d4bbbadae8f"
    memory.turn_log().enqueue_add(job_id, "alice", "k", _queued_job("I like oolong tea"))
    with Served(memory) as http:
        job = wait_job(http, job_id, "alice")
        assert job["status"] == "done"
        assert job["result"]["version"] == 1
    assert [r.content for r in memory.get_all(user_id="alice").items] == ["I like oolong tea"]


def test_a_job_held_by_a_dead_worker_is_taken_over(memory: Memory) -> None:
    log = memory.turn_log()
    job_id = "01a23710-6d01-7eff-ae16-8d4bbbadae90"
    log.enqueue_add(job_id, "alice", None, _queued_job("I like pu-erh tea"))
    claimed = log.claim_add(0.5)  # a worker took it, then its process died
    assert claimed is not None and claimed.id == job_id
    assert log.claim_add(0.5) is None  # held: nobody else gets it while the lease runs
    with Served(memory, job_lease_s=0.5) as http:
        job = wait_job(http, job_id, "alice")
        assert job["status"] == "done"
    assert [r.content for r in memory.get_all(user_id="alice").items] == ["I like pu-erh tea"]


def test_writes_carry_the_version_and_reads_can_require_it(http: httpx.Client) -> None:
    first = add(http, ALICE, "alice", "I like jazz").json()
    second = add(http, ALICE, "alice", "I live in Hangzhou").json()
    assert 0 < first["version"] < second["version"]
    body = {"user_id": "alice", "query": "music", "min_version": second["version"]}
    hits = http.post("/v1/memories/search", json=body, headers=auth(ALICE))
    assert hits.status_code == 200 and hits.json()["results"]
    listed = http.get("/v1/memories", params={"user_id": "alice",
                                              "min_version": second["version"]},
                      headers=auth(ALICE))
    assert len(listed.json()["items"]) == 2
    ahead = http.post("/v1/memories/search", headers=auth(ALICE),
                      json={**body, "min_version": second["version"] + 100})
    assert ahead.status_code == 409
    assert ahead.json()["error"] == "version_not_reached"
    memory_id = listed.json()["items"][0]["id"]
    updated = http.put(f"/v1/memories/{memory_id}", params={"user_id": "alice"},
                       json={"content": "I like free jazz"}, headers=auth(ALICE)).json()
    assert updated["version"] == second["version"] + 1

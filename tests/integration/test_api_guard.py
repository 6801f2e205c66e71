"""What every request passes before any route: rate limits, URL and body limits, keys
reloaded from their file, and the audit log (no content), over real HTTP on 127.0.0.1."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from test_api_http import ADMIN, ALICE, KEYS, TEAM, Served, auth

from memray import Memory, MemoryConfig
from memray.api.app import ApiLimits
from memray.api.auth import ApiKey, ReloadingKeys, hash_key
from memray.embed.cache import CachedEmbedder


@pytest.fixture
def memory(tmp_path: Path, embedder: CachedEmbedder) -> Iterator[Memory]:
    with Memory(MemoryConfig(data_dir=str(tmp_path / "d")), embedder=embedder) as m:
        yield m


def _search(http, key: str, user: str = "alice"):  # type: ignore[no-untyped-def]
    return http.post("/v1/memories/search", json={"user_id": user, "query": "tea"},
                     headers=auth(key))


def test_rate_limit_per_key_with_retry_after(memory: Memory) -> None:
    with Served(memory, limits=ApiLimits(rate_per_s=0.02, rate_burst=3)) as http:
        assert [_search(http, ALICE).status_code for _ in range(3)] == [200] * 3
        r = _search(http, ALICE)
        assert r.status_code == 429 and r.json()["error"] == "rate_limited"
        assert 1 <= int(r.headers["Retry-After"]) <= 50  # a token every 50 s
        assert _search(http, TEAM, "team-a").status_code == 200  # another key's own bucket
        r = http.get("/v1/memories", params={"user_id": "alice"}, headers=auth(ALICE))
        assert r.status_code == 429  # every route, not only search


def test_url_and_streamed_body_limits(memory: Memory) -> None:
    with Served(memory) as http:  # 20,000-byte bodies
        r = http.get("/v1/memories", params={"user_id": "alice", "cursor": "x" * 9000},
                     headers=auth(ALICE))
        assert r.status_code == 414 and r.json()["error"] == "uri_too_long"

        def chunks() -> Iterator[bytes]:  # no Content-Length: chunked transfer
            yield b'{"user_id": "alice", "messages": "'
            for _ in range(30):
                yield b"a" * 1000
            yield b'"}'

        r = http.post("/v1/memories", content=chunks(),
                      headers={**auth(ALICE), "Content-Type": "application/json"})
        assert r.status_code == 413 and r.json()["error"] == "payload_too_large"
        assert memory.get_all(user_id="alice").items == []


def test_keys_file_rotation_and_revocation_without_restart(memory: Memory,
                                                           tmp_path: Path) -> None:
    path = tmp_path / "keys.yaml"

    def write(*entries: ApiKey) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump({"keys": [e.model_dump() for e in entries]}))
        tmp.replace(path)

    alice = ApiKey(name="alice", sha256=hash_key(ALICE), users=["alice"])
    rotated = ApiKey(name="alice-2", sha256=hash_key("mr_rotated"), users=["alice"])
    write(alice)
    with Served(memory, keys=ReloadingKeys(path, check_s=0)) as http:
        assert _search(http, ALICE).status_code == 200
        assert _search(http, "mr_rotated").status_code == 401
        write(rotated)  # rotation: the old key is revoked, the new one works
        assert _search(http, ALICE).status_code == 401
        assert _search(http, "mr_rotated").status_code == 200
        path.write_text("keys: [{name: broken")  # a half-written edit locks nobody out
        assert _search(http, "mr_rotated").status_code == 200


def test_audit_log_records_changes_and_admin_reads_without_content(
        memory: Memory, caplog: pytest.LogCaptureFixture) -> None:
    secret = "my secret diary entry about tea"
    with Served(memory) as http, caplog.at_level(logging.INFO, logger="memray.audit"):
        r = http.post("/v1/memories", json={"user_id": "alice", "messages": secret,
                                            "infer": False}, headers=auth(ALICE))
        mid = r.json()["events"][0]["memory_id"]
        assert _search(http, ALICE).status_code == 200  # a read: no audit line
        r = http.delete(f"/v1/memories/{mid}", params={"user_id": "alice"},
                        headers=auth(ALICE))
        assert r.status_code == 200
        assert http.get("/v1/users/alice/export",
                        headers=auth("mr_admin_key")).status_code == 200
    lines = [r.getMessage() for r in caplog.records if r.name == "memray.audit"]
    assert len(lines) == 3, lines
    assert all(secret not in line and "tea" not in line for line in lines)
    add, delete, export = (yaml.safe_load(line) for line in lines)
    assert (add["method"], add["key"], add["status"]) == ("POST", "alice", 200)
    assert (delete["method"], delete["user_id"], delete["status"]) == ("DELETE", "alice", 200)
    assert export["admin"] is True and export["key"] == "admin"
    assert KEYS.keys  # the shared ring is untouched by these tests


def test_deep_metadata_is_a_clear_422(memory: Memory) -> None:
    with Served(memory) as http:
        deep = '{"a":' * 3000 + "1" + "}" * 3000  # within the body limit, too deep to keep
        body = '{"user_id": "alice", "messages": "hi", "infer": false, "metadata": ' + deep + "}"
        r = http.post("/v1/memories", content=body.encode(),
                      headers={**auth(ALICE), "Content-Type": "application/json"})
        assert r.status_code in (400, 422), r.text
        assert r.json()["error"] and "detail" in r.json()
        shallow = {"user_id": "alice", "messages": "hi", "infer": False,
                   "metadata": {"a": {"b": {"c": [1, 2]}}}}
        assert http.post("/v1/memories", json=shallow, headers=auth(ALICE)).status_code == 200


def test_rest_ids_are_bounded_as_declared_and_the_longest_fits_the_url(memory: Memory) -> None:
    """The schema's `maxLength` is what the server takes, and a request at that length,
    percent-encoded in full, is under the URL limit: never a 414 for a valid request."""
    from memray.api.schemas import MAX_REST_ID_CHARS

    longest = "\U0001f600" * MAX_REST_ID_CHARS  # 4 UTF-8 bytes each: 12 characters encoded
    with Served(memory, keys=KEYS) as http:
        spec = http.get("/openapi.json").json()
        lengths = {s.get("maxLength") for op in spec["paths"].values()
                   for m in op.values() if isinstance(m, dict)
                   for p in m.get("parameters", [])
                   if p["name"] in ("user_id", "agent_id", "run_id")
                   for s in p["schema"].get("anyOf", [p["schema"]]) if s.get("type") != "null"}
        assert lengths == {MAX_REST_ID_CHARS}
        bodies = spec["components"]["schemas"]
        assert {o.get("maxItems") for name in ("AddRequest", "Mem0AddBody")
                for o in bodies[name]["properties"]["messages"]["anyOf"]
                if o.get("type") == "array"} == {5}  # this server's max_messages
        r = http.get(f"/v1/users/{longest}/profile", headers=auth(ADMIN))
        assert r.status_code == 200, r.text
        r = http.delete("/v1/memories/", params={"user_id": longest, "agent_id": longest,
                                                 "run_id": longest}, headers=auth(ADMIN))
        assert r.status_code == 200, r.text  # mem0's delete_all: three ids in one URL
        r = http.get(f"/v1/users/{longest}x/profile", headers=auth(ADMIN))
        assert r.status_code == 422 and r.json()["error"] == "validation_error"

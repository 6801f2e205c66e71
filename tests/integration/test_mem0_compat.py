"""The mem0-compatible surfaces: `memray.compat.mem0.Memory` with mem0 OSS's signatures and
shapes, and the REST paths that mem0's own hosted client (`mem0.MemoryClient`, mem0ai
2.2.1) calls, driven by that client against the REST app on 127.0.0.1."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from typing import Any

import pytest
from test_api_http import ADMIN, ALICE, TEAM, Served, memory  # noqa: F401 (fixture)

from memray import InvalidInputError, Memory
from memray.compat.mem0 import Mem0NotFoundError, split_id
from memray.compat.mem0 import Memory as Mem0Memory

CITY = [{"role": "user", "content": "I live in Shanghai"}]


def test_python_surface_shapes_and_round_trips(memory: Memory) -> None:  # noqa: F811
    m = Mem0Memory(memory)
    added = m.add(CITY, user_id="alice", run_id="chat-1")  # one user turn: extracted now
    [item] = added["results"]
    assert item["event"] == "ADD" and item["memory"] == "I live in Shanghai"
    mid = item["id"]
    assert mid.startswith("alice:")
    m.add("note one", user_id="alice", agent_id="helper", infer=False)
    hits = m.search("Which city do I live in?", filters={"user_id": "alice"})["results"]
    assert hits[0]["id"] == mid and hits[0]["run_id"] == "chat-1" and "score" in hits[0]
    assert m.search("Which city do I live in?", user_id="alice", limit=1)["results"] == \
        hits[:1]  # the 1.x form
    everything = m.get_all(filters={"user_id": "alice"})["results"]
    assert [r["memory"] for r in everything] == ["I live in Shanghai", "note one"]
    helper = m.get_all(filters={"user_id": "alice", "agent_id": "helper"})["results"]
    assert [r["memory"] for r in helper] == ["note one"]
    got = m.get(mid)
    assert got is not None and got["memory"] == "I live in Shanghai"
    assert set(got) >= {"id", "memory", "hash", "metadata", "created_at", "updated_at",
                        "user_id"}
    assert m.update(mid, "I live in Hangzhou") == {"message": "Memory updated successfully!"}
    assert m.update(mid, data="I live in Suzhou")["message"]  # mem0 1.x keyword
    history = m.history(mid)
    assert [(h["event"], h["old_memory"], h["new_memory"]) for h in history] == [
        ("ADD", None, "I live in Shanghai"), ("UPDATE", "I live in Shanghai", "I live in Hangzhou"),
        ("UPDATE", "I live in Hangzhou", "I live in Suzhou")]
    gone = m.delete(mid)
    assert gone["message"] == "Memory deleted successfully!"
    # the receipt names memray's own ids: its digest is over them, as the audit log keeps it
    assert gone["receipt"]["memory_ids"] == [split_id(mid)[1]]
    assert gone["receipt"]["verified"] is True
    assert m.get(mid) is None
    with pytest.raises(ValueError):  # mem0 raises ValueError for a missing memory
        m.delete(mid)
    gone = m.delete_all(user_id="alice")
    assert gone["message"] == "Memories deleted successfully!"
    assert [(r["kind"], r["verified"]) for r in gone["receipts"]] == [("delete_all", True)]
    assert m.get_all(filters={"user_id": "alice"}) == {"results": []}


def test_python_surface_refuses_what_it_cannot_honour(memory: Memory) -> None:  # noqa: F811
    m = Mem0Memory(memory)
    bob = m.add("I like oolong tea", user_id="bob", infer=False)["results"][0]["id"]
    with pytest.raises(InvalidInputError, match="user_id"):
        m.search("tea", filters={"agent_id": "a"})
    with pytest.raises(InvalidInputError, match="unsupported filter"):
        m.search("tea", filters={"user_id": "bob", "AND": []})
    with pytest.raises(InvalidInputError, match="not supported"):
        m.add("x", user_id="bob", memory_type="procedural_memory")
    with pytest.raises(InvalidInputError, match="another user"):
        m.get(bob, user_id="alice")  # a compat id names its user; it cannot be re-pointed
    bare = bob.split(":", 1)[1]
    with pytest.raises(InvalidInputError):
        m.get(bare)  # a bare memray id needs its user
    assert m.get(bare, user_id="alice") is None  # ...and is alice's only if it is hers
    with pytest.raises(Mem0NotFoundError):
        m.delete(bare, user_id="alice")
    assert m.get(bare, user_id="bob") is not None


@pytest.fixture(scope="module")
def mem0_client_cls(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """mem0's `MemoryClient`, imported with telemetry off and its config dir in a temp dir
    (both are read once, at import)."""
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ.setdefault("MEM0_DIR", str(tmp_path_factory.mktemp("mem0-home")))
    try:
        mem0 = importlib.import_module("mem0")
    except ImportError as exc:
        pytest.skip(f"mem0's MemoryClient is not installed ({exc}); install it with "
                    "`pip install posthog qdrant-client && pip install --no-deps "
                    "mem0ai==2.2.1`")
    telemetry = importlib.import_module("mem0.memory.telemetry")
    assert telemetry.client_telemetry.posthog is None, "mem0 telemetry must be off"
    return mem0.MemoryClient


@pytest.fixture
def base_url(memory: Memory) -> Iterator[str]:  # noqa: F811
    with Served(memory) as http:
        yield str(http.base_url).rstrip("/")


def test_mem0_memory_client_against_memray(mem0_client_cls: Any, base_url: str) -> None:
    from mem0.exceptions import MemoryNotFoundError as Mem0Missing

    client = mem0_client_cls(api_key=ALICE, host=base_url)  # pings /v1/ping/ with Token
    added = client.add(CITY, user_id="alice")
    assert added["status"] == "SUCCEEDED"
    [item] = added["results"]
    assert item["event"] == "ADD" and item["data"] == {"memory": "I live in Shanghai"}
    mid = item["id"]
    client.add("note one", filters={"user_id": "alice"}, infer=False,  # the v3 form
               metadata={"src": "test"})
    hits = client.search("Which city do I live in?", filters={"user_id": "alice"}, top_k=3)
    assert hits["results"][0]["id"] == mid and 0 < hits["results"][0]["score"] <= 1
    page = client.get_all(filters={"user_id": "alice"}, page=1, page_size=1)
    assert page["count"] == 2 and page["next"] and page["previous"] is None
    assert [r["memory"] for r in page["results"]] == ["I live in Shanghai"]
    rest = client.get_all(filters={"user_id": "alice"}, page=2, page_size=1)
    assert rest["results"][0]["metadata"] == {"src": "test"} and rest["next"] is None
    assert client.get(mid)["memory"] == "I live in Shanghai"
    assert client.update(mid, text="I live in Hangzhou")["memory"] == "I live in Hangzhou"
    assert [(h["event"], h["new_memory"]) for h in client.history(mid)] == [
        ("ADD", "I live in Shanghai"), ("UPDATE", "I live in Hangzhou")]
    gone = client.delete(mid)  # mem0's client passes the extra receipt through
    assert gone["message"] == "Memory deleted successfully!"
    assert gone["receipt"]["memory_ids"] == [split_id(mid)[1]] and gone["receipt"]["verified"]
    with pytest.raises(Mem0Missing):
        client.get(mid)
    every = client.delete_all(user_id="alice")
    assert every["message"] and [len(r["memory_ids"]) for r in every["receipts"]] == [1]
    assert client.get_all(filters={"user_id": "alice"})["count"] == 0


def test_mem0_memory_client_key_scope(mem0_client_cls: Any, base_url: str) -> None:
    from mem0.exceptions import AuthenticationError, ValidationError
    from mem0.exceptions import MemoryNotFoundError as Mem0Missing

    admin = mem0_client_cls(api_key=ADMIN, host=base_url)
    bob = admin.add("I like oolong tea", user_id="bob", infer=False)["results"][0]["id"]
    alice = mem0_client_cls(api_key=ALICE, host=base_url)
    for call in (lambda: alice.search("tea", filters={"user_id": "bob"}),
                 lambda: alice.get_all(filters={"user_id": "bob"}),
                 lambda: alice.get(bob), lambda: alice.history(bob),
                 lambda: alice.update(bob, text="I hate tea"), lambda: alice.delete(bob),
                 lambda: alice.delete_all(user_id="bob"),
                 lambda: alice.add("I like coffee", user_id="bob")):
        with pytest.raises(AuthenticationError) as refused:
            call()
        assert "tea" not in str(refused.value)
    bare = bob.split(":", 1)[1]  # alice's one-user key reads a bare id as hers: not found
    with pytest.raises(Mem0Missing):
        alice.get(bare)
    team = mem0_client_cls(api_key=TEAM, host=base_url)
    with pytest.raises(AuthenticationError):
        team.get(bare)  # a bare id names no user, and this key is for more than one
    with pytest.raises(ValidationError):
        team.search("tea", filters={"agent_id": "x"})  # no user: refused, nothing read
    with pytest.raises(ValidationError):  # the ids at the top level or in filters, not both
        team.add("I like coffee", user_id="team-a", filters={"user_id": "team-a"})
    assert admin.get(bob)["memory"] == "I like oolong tea"
    with pytest.raises(ValueError):
        mem0_client_cls(api_key="mr_wrong", host=base_url)

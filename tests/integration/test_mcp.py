"""The MCP server driven by the `mcp` package's own client: in process over memory streams,
as a `memray mcp` stdio subprocess, and over streamable HTTP against the REST app on
127.0.0.1, where the bearer key's user scope holds for every tool."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult
from test_api_http import ADMIN, ALICE, TEAM, Served, memory  # noqa: F401 (fixture)

from memray import Memory
from memray.mcp import TOOL_NAMES, build_server


def data(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    assert result.is_error
    return " ".join(getattr(c, "text", "") for c in result.content)


async def full_cycle(client: Client, user: str) -> None:
    """Every tool once, as an agent would use them."""
    added = data(await client.call_tool("add_memory", {"user_id": user,
                                                       "content": "I live in Shanghai"}))
    [event] = added["events"]
    assert event["op"] == "ADD" and event["content"] == "I live in Shanghai"
    mid = event["memory_id"]
    for text in ("note one", "note two"):
        await client.call_tool("add_memory", {"user_id": user, "content": text,
                                              "infer": False})
    found = data(await client.call_tool("search_memories", {
        "user_id": user, "query": "Which city do I live in?"}))["results"]
    assert found[0]["id"] == mid and -1 <= found[0]["similarity"] <= 1
    first = data(await client.call_tool("get_memories", {"user_id": user, "limit": 2}))
    assert len(first["items"]) == 2 and first["next_cursor"]
    rest = data(await client.call_tool("get_memories", {
        "user_id": user, "limit": 2, "cursor": first["next_cursor"]}))
    assert [i["content"] for i in first["items"] + rest["items"]] == [
        "I live in Shanghai", "note one", "note two"] and rest["next_cursor"] is None
    one = {"user_id": user, "memory_id": mid}
    assert data(await client.call_tool("get_memory", one))["content"] == "I live in Shanghai"
    updated = data(await client.call_tool("update_memory", {**one, "content":
                                                            "I live in Hangzhou"}))
    assert updated["op"] == "UPDATE" and updated["previous_content"] == "I live in Shanghai"
    history = data(await client.call_tool("memory_history", one))["events"]
    assert [e["op"] for e in history] == ["ADD", "UPDATE"]
    assert data(await client.call_tool("delete_memory", one))["op"] == "DELETE"
    assert "not_found" in error_text(await client.call_tool("get_memory", one))
    refused = await client.call_tool("delete_all_memories", {"user_id": user})
    assert "confirm" in error_text(refused)
    gone = data(await client.call_tool("delete_all_memories", {"user_id": user,
                                                               "confirm": True}))
    assert gone["deleted"] == 2


def test_tools_in_process_over_memory_streams(memory: Memory) -> None:  # noqa: F811
    async def run() -> None:
        async with Client(build_server(memory), mode="legacy") as client:
            listed = (await client.list_tools()).tools
            assert sorted(t.name for t in listed) == sorted(TOOL_NAMES)
            for tool in listed:
                assert tool.description and len(tool.description) > 40
                assert "user_id" in tool.input_schema["required"]
                props = tool.input_schema["properties"]
                assert all(p.get("description") for p in props.values()), tool.name
            search = next(t for t in listed if t.name == "search_memories")
            assert search.annotations is not None and search.annotations.read_only_hint
            await full_cycle(client, "alice")
            bad = await client.call_tool("get_memory", {"user_id": "alice",
                                                        "memory_id": "not-an-id"})
            assert "invalid_input" in error_text(bad)
            assert "invalid_input" in error_text(await client.call_tool(
                "search_memories", {"user_id": "", "query": "x"}))

    anyio.run(run)


def test_memray_mcp_stdio_subprocess(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memray.cli", "mcp", "--data-dir",
                                      str(tmp_path / "d")], cwd=str(tmp_path))

    async def run() -> None:
        async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
            assert client.server_info is not None and client.server_info.name == "memray"
            await client.call_tool("add_memory", {"user_id": "lin",
                                                  "content": "I'm allergic to peanuts"})
            hits = data(await client.call_tool("search_memories", {
                "user_id": "lin", "query": "Can you suggest a snack with peanut butter?"}))
            assert [h["content"] for h in hits["results"]] == ["I'm allergic to peanuts"]
            other = data(await client.call_tool("get_memories", {"user_id": "someone-else"}))
            assert other["items"] == []

    anyio.run(run)


def http_client(base: str, key: str | None, scheme: str = "Bearer") -> Client:
    headers = {} if key is None else {"Authorization": f"{scheme} {key}"}
    transport = streamable_http_client(f"{base}/mcp", http_client=httpx2.AsyncClient(
        headers=headers, timeout=60))
    return Client(transport)


def test_http_enforces_the_keys_user_scope(memory: Memory) -> None:  # noqa: F811
    with Served(memory) as rest:
        base = str(rest.base_url).rstrip("/")
        bob = memory.add("I like oolong tea", user_id="bob", infer=False).events[0].memory_id

        async def run() -> None:
            async with http_client(base, ALICE) as alice:
                await full_cycle(alice, "alice")
                for name, args in [
                        ("search_memories", {"user_id": "bob", "query": "tea"}),
                        ("get_memories", {"user_id": "bob"}),
                        ("get_memory", {"user_id": "bob", "memory_id": bob}),
                        ("memory_history", {"user_id": "bob", "memory_id": bob}),
                        ("update_memory", {"user_id": "bob", "memory_id": bob,
                                           "content": "I hate tea"}),
                        ("delete_memory", {"user_id": "bob", "memory_id": bob}),
                        ("delete_all_memories", {"user_id": "bob", "confirm": True}),
                        ("add_memory", {"user_id": "bob", "content": "I like coffee"})]:
                    text = error_text(await alice.call_tool(name, args))
                    assert "forbidden" in text and "tea" not in text, (name, text)
                # in scope, but bob's id: exactly like an id that does not exist
                mine = await alice.call_tool("get_memory", {"user_id": "alice",
                                                            "memory_id": bob})
                assert "not_found" in error_text(mine)
            async with http_client(base, TEAM, scheme="Token") as team:
                await team.call_tool("add_memory", {"user_id": "team-7", "content": "x y z",
                                                    "infer": False})
                assert "forbidden" in error_text(await team.call_tool(
                    "get_memories", {"user_id": "alice"}))
            async with http_client(base, ADMIN) as admin:
                items = data(await admin.call_tool("get_memories", {"user_id": "bob"}))
                assert [i["content"] for i in items["items"]] == ["I like oolong tea"]

        anyio.run(run)
        assert [r.content for r in memory.get_all(user_id="bob").items] == ["I like oolong tea"]
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            r = rest.post("/mcp", headers={**headers, "Accept": "application/json, "
                                           "text/event-stream"},
                          content=json.dumps({"jsonrpc": "2.0", "id": 1,
                                              "method": "tools/list"}))
            assert r.status_code == 401 and r.json()["error"] == "unauthorized"

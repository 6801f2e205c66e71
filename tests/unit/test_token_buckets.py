from __future__ import annotations

import pytest

from memray.api.guard import TokenBuckets


def test_burst_then_rate_per_key() -> None:
    now = [0.0]
    b = TokenBuckets(rate=2.0, burst=3, clock=lambda: now[0])
    assert [b.take("k") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert b.take("k") == pytest.approx(0.5)  # one token every 0.5 s
    assert b.take("other") == 0.0  # buckets are per key
    now[0] = 0.5
    assert b.take("k") == 0.0 and b.take("k") > 0
    now[0] = 100.0  # refills up to the burst, never beyond
    assert [b.take("k") for _ in range(4)][:3] == [0.0, 0.0, 0.0]
    assert b.take("k") > 0


def test_bounded_number_of_keys() -> None:
    b = TokenBuckets(rate=1.0, burst=1, clock=lambda: 0.0, max_keys=2)
    for who in ("a", "b", "c"):
        assert b.take(who) == 0.0
    assert len(b._buckets) == 2


def test_the_mcp_tool_named_in_a_call() -> None:
    from memray.api.guard import _mcp_tool

    call = b'{"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "delete_memory"}}'
    assert _mcp_tool(call) == "delete_memory"
    assert _mcp_tool(b'{"method": "tools/list"}') is None
    assert _mcp_tool(b'{"method": "tools/call", "params": [1]}') is None
    assert _mcp_tool(b"[1, 2]") is None and _mcp_tool(b"not json") is None

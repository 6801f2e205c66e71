"""Memory ids: UUIDv7 strings, so sorting ids sorts by creation time (used for paging)."""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
import uuid

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_lock = threading.Lock()
_last = 0


def new_id() -> str:
    """A new UUIDv7 (RFC 9562): 48-bit ms timestamp, then randomness; strictly increasing here."""
    global _last  # noqa: PLW0603 - one monotonic counter per process is the point
    with _lock:
        ms = time.time_ns() // 1_000_000
        rand = int.from_bytes(os.urandom(10), "big")
        value = (ms << 80) | (0x7 << 76) | ((rand >> 64 & 0xFFF) << 64) | (0b10 << 62) | (
            rand & ((1 << 62) - 1)
        )
        value = max(value, _last + 1)
        _last = value
    return str(uuid.UUID(int=value))


def is_memory_id(value: object) -> bool:
    """True for a lower-case canonical UUID string."""
    return isinstance(value, str) and bool(_UUID.match(value))


def stable_id(ms: int, *parts: str) -> str:
    """A UUIDv7-shaped id fixed by its inputs: the time `ms`, then 74 bits of a hash of
    `parts`. A batch job that re-imports the same turn gets the same id, so a replay
    replaces a row instead of adding a second one."""
    digest = int.from_bytes(hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()[:10],
                            "big")
    value = ((max(ms, 0) & ((1 << 48) - 1)) << 80) | (0x7 << 76) | (
        (digest >> 64 & 0xFFF) << 64) | (0b10 << 62) | (digest & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))

"""Memory ids: UUIDv7 strings, so sorting ids sorts by creation time (used for paging)."""

from __future__ import annotations

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

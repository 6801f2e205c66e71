"""Checks on caller input, applied before anything is read or written."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from memray.core.ids import is_memory_id
from memray.errors import InvalidInputError

MAX_SCOPE_BYTES = 16_384
MAX_METADATA_BYTES = 16_384


def scope_id(value: object, name: str = "user_id", *, required: bool = True) -> str | None:
    """A user, agent or session id: a non-empty str of at most 16 KiB UTF-8, without NUL."""
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InvalidInputError(f"{name} must not be empty")
    if "\x00" in value:
        raise InvalidInputError(f"{name} must not contain NUL characters")
    if len(value.encode("utf-8")) > MAX_SCOPE_BYTES:
        raise InvalidInputError(f"{name} is longer than {MAX_SCOPE_BYTES} bytes")
    return value


def user_id(value: object) -> str:
    checked = scope_id(value)
    assert checked is not None
    return checked


def memory_id(value: object) -> str:
    """A memory id as memray issues them (a UUID string)."""
    if not is_memory_id(value):
        raise InvalidInputError(f"not a memray memory id: {str(value)[:80]!r}")
    assert isinstance(value, str)
    return value


def content(value: object, max_chars: int) -> str:
    """Memory content: non-empty text of at most `max_chars` characters."""
    if not isinstance(value, str):
        raise InvalidInputError(f"content must be a string, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise InvalidInputError("content must not be empty")
    if "\x00" in text:
        raise InvalidInputError("content must not contain NUL characters")
    if len(text) > max_chars:
        raise InvalidInputError(f"content is {len(text)} characters; the limit is {max_chars}")
    return text


def metadata(value: object) -> dict[str, Any]:
    """A JSON-serialisable mapping with string keys, at most 16 KiB as JSON and
    `MAX_METADATA_DEPTH` levels of nesting."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"metadata must be a mapping, got {type(value).__name__}")
    if _depth(value) > MAX_METADATA_DEPTH:
        raise InvalidInputError(f"metadata is nested deeper than {MAX_METADATA_DEPTH} levels")
    try:
        encoded = json.dumps(dict(value), allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"metadata must be JSON-serialisable: {exc}") from exc
    if len(encoded.encode("utf-8")) > MAX_METADATA_BYTES:
        raise InvalidInputError(f"metadata is larger than {MAX_METADATA_BYTES} bytes as JSON")
    loaded: dict[str, Any] = json.loads(encoded)
    return loaded


MAX_METADATA_DEPTH = 16


def _depth(value: object) -> int:
    """Nesting depth of dicts and lists, without recursion (a hostile value may be deep)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, Mapping | list | tuple):
            deepest = max(deepest, level)
            if level > MAX_METADATA_DEPTH:
                break
            children = item.values() if isinstance(item, Mapping) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


def consent(value: object) -> int:
    """0 keep nothing, 1 this session only, 2 persistent."""
    if isinstance(value, bool) or value not in (0, 1, 2):
        raise InvalidInputError(f"consent must be 0, 1 or 2, got {value!r}")
    assert isinstance(value, int)
    return value


def positive_int(value: object, name: str, upper: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= upper:
        raise InvalidInputError(f"{name} must be an integer in 1..{upper}, got {value!r}")
    return value


def non_negative_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"{name} must be an integer >= 0, got {value!r}")
    return value


def similarity(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"{name} must be a number, got {value!r}")
    if not -1.0 <= float(value) <= 1.0:
        raise InvalidInputError(f"{name} must be in -1..1, got {value!r}")
    return float(value)


# The zones a caller may name: the zone database's, less the host's own (`localtime`) and
# placeholders that name no place. REST lists these in its schema.
ZONES = frozenset(available_timezones()) - {"localtime", "Factory", "posixrules"}


def zone(value: object, name: str = "timezone") -> ZoneInfo:
    """An IANA time zone by name ("Asia/Shanghai", "UTC"); InvalidInputError for anything
    else (a folder of the database such as "America", a path, an unknown name)."""
    if not isinstance(value, str) or value not in ZONES:
        shown = value[:80] if isinstance(value, str) else value
        raise InvalidInputError(f"{name} {shown!r} is no IANA time zone (e.g. UTC, "
                                "Asia/Shanghai, Europe/Berlin)")
    try:
        return ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:  # listed, yet unreadable
        raise InvalidInputError(f"{name} {value!r} cannot be read: {exc}") from exc


def moment(value: object, name: str) -> datetime:
    """A timezone-aware datetime, or an ISO 8601 string of one."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError as exc:
            raise InvalidInputError(f"{name} is not an ISO date: {value!r}") from exc
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidInputError(f"{name} must be a timezone-aware datetime")
    return value

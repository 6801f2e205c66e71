"""Parsing the `filters=` argument of `search()` into typed store conditions."""

from __future__ import annotations

from typing import Any

from memray.core import validate
from memray.errors import InvalidInputError
from memray.models import MemoryType
from memray.store.rows import to_ms

ALLOWED = ("type", "agent_id", "session_id", "created_after", "created_before", "min_importance")


def _types(value: object) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not items:
        raise InvalidInputError("filters['type'] must be a type name or a non-empty list")
    known = {t.value for t in MemoryType}
    for t in items:
        if t not in known:
            raise InvalidInputError(f"unknown memory type {t!r}; known: {sorted(known)}")
    return tuple(items)


def _time(value: object, key: str) -> int:
    return to_ms(validate.moment(value, f"filters[{key!r}]"))


def parse(filters: dict[str, Any] | None) -> dict[str, Any]:
    """Keyword arguments for `Where`; unknown keys and bad values raise InvalidInputError."""
    if not filters:
        return {}
    if not isinstance(filters, dict):
        raise InvalidInputError("filters must be a dict")
    unknown = set(filters) - set(ALLOWED)
    if unknown:
        raise InvalidInputError(f"unknown filter keys {sorted(unknown)}; allowed: {ALLOWED}")
    out: dict[str, Any] = {}
    for key, value in filters.items():
        if key == "type":
            out["types"] = _types(value)
        elif key in ("agent_id", "session_id"):
            out[key] = validate.scope_id(value, key)
        elif key == "created_after":
            out["created_after_ms"] = _time(value, key)
        elif key == "created_before":
            out["created_before_ms"] = _time(value, key)
        else:
            out["min_importance"] = validate.similarity(value, key)
    return out

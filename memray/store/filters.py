"""The one function that turns typed conditions into a Milvus boolean expression.

Nothing else in memray writes filter text. Every string value is validated and escaped
here; numbers are checked to be finite. Milvus' filter templating (`filter_params`) does
not work on milvus-lite 3.2 or Milvus 2.3, so escaping is ours.
"""

from __future__ import annotations

import math
import re

from memray.errors import InvalidInputError
from memray.store.base import Where

_FIELD = re.compile(r"^[a-z_][a-z0-9_]*$")
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def quote(value: str) -> str:
    """A Milvus string literal for `value`: double-quoted, with \\, \", \\n, \\r, \\t escaped."""
    if not isinstance(value, str):
        raise InvalidInputError(f"expected a string, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidInputError("strings must not contain NUL characters")
    return '"' + "".join(_ESCAPES.get(ch, ch) for ch in value) + '"'


def _number(value: float) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"expected a finite number, got {value!r}")
    return repr(int(value)) if isinstance(value, int) else repr(float(value))


def _in(field: str, values: tuple[str, ...]) -> str:
    if not _FIELD.match(field):
        raise InvalidInputError(f"bad field name {field!r}")
    return f"{field} in [{', '.join(quote(v) for v in values)}]"


def _slots(exact: tuple[str, ...], prefixes: tuple[str, ...]) -> str:
    terms = [_in("slot", exact)] if exact else []
    for prefix in prefixes:
        if not prefix or "%" in prefix or "_" in prefix:
            raise InvalidInputError(f"bad slot prefix {prefix!r}")
        terms.append(f"slot like {quote(prefix + '%')}")
    return "(" + " or ".join(terms) + ")"


def build_filter(user_id: str, where: Where) -> str:
    """`user_id == <user>` ANDed with every condition set in `where`."""
    parts = [f"user_id == {quote(user_id)}"]
    if where.ids:
        parts.append(_in("id", where.ids))
    if where.statuses:
        parts.append(_in("status", where.statuses))
    if where.types:
        parts.append(_in("type", where.types))
    if where.slots or where.slot_prefixes:
        parts.append(_slots(where.slots, where.slot_prefixes))
    if where.content_hashes:
        parts.append(_in("content_hash", where.content_hashes))
    if where.agent_id is not None:
        parts.append(f"agent_id == {quote(where.agent_id)}")
    if where.session_id is not None:
        parts.append(f"session_id == {quote(where.session_id)}")
    if where.alive_at_ms is not None:
        t = _number(where.alive_at_ms)
        parts.append(f"(expires_at == 0 or expires_at > {t})")
    if where.created_after_ms is not None:
        parts.append(f"created_at > {_number(where.created_after_ms)}")
    if where.created_before_ms is not None:
        parts.append(f"created_at < {_number(where.created_before_ms)}")
    if where.min_importance is not None:
        parts.append(f"importance >= {_number(where.min_importance)}")
    if where.after_id is not None:
        parts.append(f"id > {quote(where.after_id)}")
    return " and ".join(parts)

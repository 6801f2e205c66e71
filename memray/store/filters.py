"""The filter rules: the one function that turns typed conditions into a Milvus boolean
expression (`build_filter`), and the same conditions evaluated in Python (`matches`, for
the fake store and the hot set), kept side by side so the two cannot drift apart.

Nothing else in memray writes filter text. Every string value is validated and escaped
here; numbers are checked to be finite. Milvus' filter templating (`filter_params`) does
not work on milvus-lite 3.2 or Milvus 2.3, so escaping is ours.
"""

from __future__ import annotations

import math
import re

from memray.errors import InvalidInputError
from memray.models import MemoryRecord
from memray.store.base import Where
from memray.store.rows import to_ms

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


def _said(ranges: tuple[tuple[int, int], ...]) -> str:
    """Said inside one of `ranges`: the message time (`payload["occurred_at"]`, epoch ms)
    where a memory has one, else `created_at`. `exists`, not a comparison with a missing
    key, which milvus-lite and Milvus 2.3 negate differently (null against false)."""
    occurred, created = [], []
    for lo, hi in ranges:
        a, b = _number(lo), _number(hi)
        occurred.append(f'(payload["occurred_at"] >= {a} and payload["occurred_at"] < {b})')
        created.append(f"(created_at >= {a} and created_at < {b})")
    # parenthesised: Milvus 2.3 reads `exists x and y` as `exists (x and y)`
    return (f'(((exists payload["occurred_at"]) and ({" or ".join(occurred)})) or '
            f'((not exists payload["occurred_at"]) and ({" or ".join(created)})))')


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
    parts += _times(where)
    if where.min_importance is not None:
        parts.append(f"importance >= {_number(where.min_importance)}")
    if where.after_id is not None:
        parts.append(f"id > {quote(where.after_id)}")
    return " and ".join(parts)


def _times(where: Where) -> list[str]:
    """The conditions on when a memory expires, was stored and was said."""
    parts = []
    if where.alive_at_ms is not None:
        t = _number(where.alive_at_ms)
        parts.append(f"(expires_at == 0 or expires_at > {t})")
    if where.created_after_ms is not None:
        parts.append(f"created_at > {_number(where.created_after_ms)}")
    if where.created_before_ms is not None:
        parts.append(f"created_at < {_number(where.created_before_ms)}")
    if where.said_within_ms:
        parts.append(_said(where.said_within_ms))
    return parts


def matches(r: MemoryRecord, user_id: str, w: Where) -> bool:
    """`where` evaluated in Python, exactly as `build_filter` has Milvus evaluate it."""
    if r.user_id != user_id:
        return False
    if w.ids and r.id not in w.ids:
        return False
    if w.statuses and r.status.value not in w.statuses:
        return False
    if w.types and r.type.value not in w.types:
        return False
    if (w.slots or w.slot_prefixes) and not (
            (r.slot or "") in w.slots or any((r.slot or "").startswith(p)
                                             for p in w.slot_prefixes)):
        return False
    if w.content_hashes and r.content_hash not in w.content_hashes:
        return False
    if w.agent_id is not None and (r.agent_id or "") != w.agent_id:
        return False
    if w.session_id is not None and (r.session_id or "") != w.session_id:
        return False
    if not _times_match(r, w):
        return False
    if w.min_importance is not None and r.importance < w.min_importance:
        return False
    return not (w.after_id is not None and r.id <= w.after_id)


def _times_match(r: MemoryRecord, w: Where) -> bool:
    """`_times(w)` evaluated on `r`."""
    expires = to_ms(r.expires_at)
    if w.alive_at_ms is not None and expires and expires <= w.alive_at_ms:
        return False
    created = to_ms(r.created_at)
    if w.created_after_ms is not None and created <= w.created_after_ms:
        return False
    if w.created_before_ms is not None and created >= w.created_before_ms:
        return False
    said = to_ms(r.said_at)
    return not w.said_within_ms or any(lo <= said < hi for lo, hi in w.said_within_ms)

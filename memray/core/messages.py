"""Normalising `add()` input: a string or a list of {"role", "content"} messages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memray.errors import InvalidInputError

ROLES = ("user", "assistant", "system", "tool")


@dataclass(frozen=True)
class Message:
    role: str
    content: str
    index: int
    timestamp: datetime | None = None  # when it was said (the memory's event time)
    reply_to: str | None = None  # the turn it answers, as text
    name: str | None = None


def normalize(messages: str | Sequence[Any], *, max_messages: int,
              timestamp: Any = None) -> list[Message]:
    """Validated messages, in order. A bare string is one user message. `timestamp` is
    the time of messages that carry none of their own. A message answers the one before
    it in the call when that one is not the user's (an assistant's question, another
    speaker's turn), unless it names its own `reply_to`."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    if not isinstance(messages, Sequence):
        raise InvalidInputError("messages must be a string or a list of {role, content} dicts")
    if len(messages) > max_messages:
        raise InvalidInputError(f"{len(messages)} messages; at most {max_messages} per add()")
    default_at = parse_time(timestamp, "timestamp")
    out: list[Message] = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or set(msg) - _KEYS:
            raise InvalidInputError(f"message {i} must be a dict with 'role' and 'content' "
                                    f"(optional: {', '.join(sorted(_KEYS - {'role', 'content'}))})")
        role, content = msg.get("role"), msg.get("content")
        if role not in ROLES:
            raise InvalidInputError(f"message {i}: role must be one of {ROLES}, got {role!r}")
        if not isinstance(content, str):
            raise InvalidInputError(f"message {i}: content must be a string")
        at = parse_time(msg.get("timestamp"), f"message {i}: timestamp") or default_at
        reply = _text_or_none(msg.get("reply_to"), f"message {i}: reply_to")
        name = _text_or_none(msg.get("name"), f"message {i}: name")
        if reply is None and out and out[-1].role != "user":
            # Only another party's turn: the user's own turns are memories with their own
            # lifecycle, and a copy kept beside a neighbour would outlive their deletion.
            prev = out[-1]
            reply = f"{prev.name}: {prev.content}" if prev.name else prev.content
        out.append(Message(role, content, i, at, reply, name))
    return out


_KEYS = {"role", "content", "name", "timestamp", "reply_to"}


def _text_or_none(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be a string")
    return value


def parse_time(value: Any, what: str) -> datetime | None:
    """A datetime (naive = UTC), an ISO-8601 string or epoch seconds; None stays None."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidInputError(f"{what} must be a datetime, an ISO-8601 string or epoch seconds")
    try:
        if isinstance(value, datetime):
            at = value
        elif isinstance(value, int | float):
            at = datetime.fromtimestamp(float(value), tz=UTC)
        elif isinstance(value, str):
            at = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        else:
            raise TypeError(type(value).__name__)
    except (TypeError, ValueError, OverflowError, OSError) as exc:
        raise InvalidInputError(f"{what} must be a datetime, an ISO-8601 string or epoch "
                                f"seconds, got {str(value)[:60]!r}") from exc
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return at.replace(microsecond=at.microsecond // 1000 * 1000)

"""Normalising `add()` input: a string or a list of {"role", "content"} messages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memray.errors import InvalidInputError

ROLES = ("user", "assistant", "system", "tool")


@dataclass(frozen=True)
class Message:
    role: str
    content: str
    index: int


def normalize(messages: str | Sequence[Any], *, max_messages: int) -> list[Message]:
    """Validated messages, in order. A bare string is one user message."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    if not isinstance(messages, Sequence):
        raise InvalidInputError("messages must be a string or a list of {role, content} dicts")
    if len(messages) > max_messages:
        raise InvalidInputError(f"{len(messages)} messages; at most {max_messages} per add()")
    out = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or set(msg) - {"role", "content", "name"}:
            raise InvalidInputError(f"message {i} must be a dict with 'role' and 'content'")
        role, content = msg.get("role"), msg.get("content")
        if role not in ROLES:
            raise InvalidInputError(f"message {i}: role must be one of {ROLES}, got {role!r}")
        if not isinstance(content, str):
            raise InvalidInputError(f"message {i}: content must be a string")
        out.append(Message(role, content, i))
    return out

"""The conversation-log schema the backfill job reads, and its validation.

One row per turn (Parquet or JSON Lines):

| column     | type                       | meaning                                      |
|------------|----------------------------|----------------------------------------------|
| user_id    | string                     | whose memory this turn feeds                 |
| session_id | string                     | conversation the turn belongs to             |
| turn_id    | string or integer          | unique within the session; stable across exports |
| role       | "user" / "assistant" / "system" | only user turns become memories         |
| content    | string                     | what was said                                |
| ts         | timestamp, ISO-8601 string or epoch ms/s | when it was said (UTC if naive) |
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memray.core import validate
from memray.errors import InvalidInputError

COLUMNS = ("user_id", "session_id", "turn_id", "role", "content", "ts")
ROLES = ("user", "assistant", "system")


@dataclass(frozen=True)
class LogTurn:
    user_id: str
    session_id: str
    turn_id: str
    role: str
    content: str
    ts_ms: int


def ts_ms(value: Any) -> int:
    """Epoch milliseconds from a datetime, an ISO string, or epoch seconds/ms."""
    if isinstance(value, datetime):
        when = value if value.tzinfo else value.replace(tzinfo=UTC)
        return int(when.timestamp() * 1000)
    if hasattr(value, "to_pydatetime"):  # pandas / numpy timestamps
        return ts_ms(value.to_pydatetime())
    if isinstance(value, bool):
        raise InvalidInputError(f"bad ts {value!r}")
    if isinstance(value, int | float):
        return int(value if value > 10**11 else value * 1000)  # ms vs seconds
    if isinstance(value, str):
        try:
            return ts_ms(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError as exc:
            raise InvalidInputError(f"bad ts {value!r}: not ISO-8601") from exc
    raise InvalidInputError(f"bad ts {value!r}")


def parse_turn(row: dict[str, Any], max_chars: int) -> LogTurn:
    """One validated turn; InvalidInputError says which column is wrong."""
    missing = [c for c in COLUMNS if row.get(c) is None]
    if missing:
        raise InvalidInputError(f"missing column(s) {missing}")
    role = str(row["role"])
    if role not in ROLES:
        raise InvalidInputError(f"role must be one of {ROLES}, got {role!r}")
    content = str(row["content"])
    if len(content) > max_chars:
        raise InvalidInputError(f"content longer than {max_chars} characters")
    return LogTurn(user_id=validate.user_id(str(row["user_id"])),
                   session_id=validate.scope_id(str(row["session_id"]), "session_id") or "",
                   turn_id=str(row["turn_id"]), role=role, content=content,
                   ts_ms=ts_ms(row["ts"]))

"""MemoryRecord <-> flat store row. Times are epoch milliseconds; 0 means 'none'."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memray.models import MemoryRecord

SCALAR_FIELDS = (
    "id", "user_id", "agent_id", "session_id", "type", "slot", "status", "content", "importance",
    "confidence", "created_at", "updated_at", "last_confirmed_at", "expires_at",
    "content_hash", "embedding_model", "payload",
)


def to_ms(when: datetime | None) -> int:
    return 0 if when is None else int(when.timestamp() * 1000)


def from_ms(ms: int) -> datetime | None:
    return None if not ms else at_ms(ms)


def at_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def to_row(record: MemoryRecord) -> dict[str, Any]:
    """The scalar part of a row; the caller adds the vector."""
    return {
        "id": record.id,
        "user_id": record.user_id,
        "agent_id": record.agent_id or "",
        "session_id": record.session_id or "",
        "type": record.type.value,
        "slot": record.slot or "",
        "status": record.status.value,
        "content": record.content,
        "importance": record.importance,
        "confidence": record.confidence,
        "created_at": to_ms(record.created_at),
        "updated_at": to_ms(record.updated_at),
        "last_confirmed_at": to_ms(record.last_confirmed_at),
        "expires_at": to_ms(record.expires_at),
        "content_hash": record.content_hash,
        "embedding_model": record.embedding_model,
        "payload": {
            "source": record.source.value,
            "source_turn_ids": list(record.source_turn_ids),
            "source_excerpt": record.source_excerpt,
            "consent": record.consent,
            "metadata": record.metadata,
            **({"occurred_at": to_ms(record.occurred_at)} if record.occurred_at else {}),
            **({"reply_to": record.reply_to} if record.reply_to else {}),
            **({"valid_from": to_ms(record.valid_from)} if record.valid_from else {}),
            **({"valid_to": to_ms(record.valid_to)} if record.valid_to else {}),
        },
    }


def from_row(row: dict[str, Any]) -> MemoryRecord:
    payload = row.get("payload") or {}
    return MemoryRecord(
        id=row["id"],
        user_id=row["user_id"],
        agent_id=row["agent_id"] or None,
        session_id=row["session_id"] or None,
        type=row["type"],
        slot=row.get("slot") or None,
        status=row["status"],
        content=row["content"],
        importance=round(float(row["importance"]), 6),
        confidence=round(float(row["confidence"]), 6),
        created_at=at_ms(row["created_at"]),
        updated_at=at_ms(row["updated_at"]),
        last_confirmed_at=at_ms(row["last_confirmed_at"]),
        expires_at=from_ms(row["expires_at"]),
        content_hash=row["content_hash"],
        embedding_model=row["embedding_model"],
        source=payload.get("source", "user_stated"),
        source_turn_ids=tuple(payload.get("source_turn_ids", ())),
        source_excerpt=payload.get("source_excerpt", ""),
        consent=payload.get("consent", 2),
        metadata=payload.get("metadata", {}),
        occurred_at=from_ms(payload.get("occurred_at", 0)),
        reply_to=payload.get("reply_to", ""),
        valid_from=from_ms(payload.get("valid_from", 0)),
        valid_to=from_ms(payload.get("valid_to", 0)),
    )

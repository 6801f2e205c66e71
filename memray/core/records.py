"""The one record builder: every new memory, whoever writes it, gets its id, content
hash, excerpt and times here, so they are derived the same way everywhere."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memray.core.ids import new_id
from memray.models import MemoryRecord, MemoryType, content_hash

_EXCERPT_CHARS = 200


def new_record(*, user_id: str, content: str, embedding_model: str, at: datetime,
               type: MemoryType = MemoryType.FACT, id: str | None = None,
               **fields: Any) -> MemoryRecord:
    """A new memory of `user_id` saying `content`, embedded by `embedding_model`, stored
    at `at` (created, updated and confirmed then, unless `fields` say otherwise). `id`:
    a time-ordered new one unless the caller fixes it (an import, a merge, a keyed
    item). Other `fields` are MemoryRecord's; a bad value raises pydantic's
    ValidationError."""
    times = {"created_at": at, "updated_at": at, "last_confirmed_at": at}
    return MemoryRecord(
        id=id or new_id(), user_id=user_id, type=type, content=content,
        content_hash=content_hash(content), embedding_model=embedding_model,
        **{"source_excerpt": content[:_EXCERPT_CHARS], **times, **fields})

"""`Engine`: the parts of an open `Memory` that batch jobs and integrations drive."""

from __future__ import annotations

from dataclasses import dataclass

from memray.config import MemoryConfig
from memray.core.committer import Committer
from memray.embed.base import Embedder
from memray.store.base import VectorStore
from memray.store.events import EventLog


@dataclass(frozen=True)
class Engine:
    """Jobs read through `store` and `events` and write only by handing change sets to
    `committer` (outbox, versions, hot set, the user's lock, the write gate), the same
    one `Memory` writes through, so a job and online writes of one user never interleave."""

    config: MemoryConfig
    store: VectorStore
    events: EventLog
    committer: Committer
    embedder: Embedder

"""`Engine`: the parts of an open `Memory` that batch jobs drive directly."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from memray.config import MemoryConfig
from memray.core.applier import Applier
from memray.embed.base import Embedder
from memray.store.base import VectorStore
from memray.store.events import EventLog


@dataclass(frozen=True)
class Engine:
    """Jobs write through the same applier (outbox, versions, hot set) as `Memory`, and
    take the same per-user lock, so a job and online writes of one user never interleave."""

    config: MemoryConfig
    store: VectorStore
    events: EventLog
    applier: Applier
    embedder: Embedder
    user_lock: Callable[[str], AbstractContextManager[None]]

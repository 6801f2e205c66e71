"""memray: long-term memory for AI agents.

    from memray import Memory
    with Memory() as m:
        m.add("I only have time after 9 pm", user_id="alice", infer=False)
        m.search("when is alice free?", user_id="alice")
"""

from memray.config import EmbedderConfig, MemoryConfig, RecallConfig, StoreConfig
from memray.core.memory import Memory
from memray.errors import (
    ConfigError,
    DimensionMismatchError,
    InvalidInputError,
    MemoryNotFoundError,
    MemrayError,
    NotImplementedYetError,
    StoreError,
    StoreUnavailableError,
)
from memray.models import (
    AddResult,
    MemoryEvent,
    MemoryRecord,
    MemorySource,
    MemoryStatus,
    MemoryType,
    Page,
    SearchHit,
)

__version__ = "0.1.0"

__all__ = [
    "AddResult",
    "ConfigError",
    "DimensionMismatchError",
    "EmbedderConfig",
    "InvalidInputError",
    "Memory",
    "MemoryConfig",
    "MemoryEvent",
    "MemoryNotFoundError",
    "MemoryRecord",
    "MemorySource",
    "MemoryStatus",
    "MemoryType",
    "MemrayError",
    "NotImplementedYetError",
    "Page",
    "RecallConfig",
    "SearchHit",
    "StoreConfig",
    "StoreError",
    "StoreUnavailableError",
    "__version__",
]

"""memray: long-term memory for AI agents.

    from memray import Memory
    with Memory() as m:
        m.add("I only have time after 9 pm", user_id="alice")
        m.search("when is alice free?", user_id="alice")
"""

from memray.config import (
    EmbedderConfig,
    LLMConfig,
    MemoryConfig,
    RecallConfig,
    StoreConfig,
    WriteConfig,
)
from memray.core.aio import AsyncMemory
from memray.core.memory import Memory
from memray.errors import (
    ConfigError,
    DimensionMismatchError,
    EmbedderUnavailableError,
    ExtractionError,
    InvalidInputError,
    MemoryNotFoundError,
    MemrayError,
    MigrationError,
    ModelChangedError,
    StaleReadError,
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
    "AsyncMemory",
    "ConfigError",
    "DimensionMismatchError",
    "EmbedderConfig",
    "EmbedderUnavailableError",
    "ExtractionError",
    "InvalidInputError",
    "LLMConfig",
    "Memory",
    "MemoryConfig",
    "MemoryEvent",
    "MemoryNotFoundError",
    "MemoryRecord",
    "MemorySource",
    "MemoryStatus",
    "MemoryType",
    "MemrayError",
    "MigrationError",
    "ModelChangedError",
    "Page",
    "RecallConfig",
    "SearchHit",
    "StaleReadError",
    "StoreConfig",
    "StoreError",
    "StoreUnavailableError",
    "WriteConfig",
    "__version__",
]

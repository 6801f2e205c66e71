"""The memray exception tree. Every error memray raises on purpose is one of these.

    MemrayError
    ├── InvalidInputError (also a ValueError)   bad ids, empty user_id, unknown filter keys ...
    ├── MemoryNotFoundError (also a KeyError)   no such memory *for this user*
    ├── ConfigError                             a config that cannot work
    ├── ExtractionError                         the extractor (LLM) failed; nothing was written
    ├── StaleReadError                          a read asked for a memory version not reached
    ├── EmbedderUnavailableError                a remote embedder failed or did not answer
    └── StoreError                              the vector store or event log failed
        ├── DimensionMismatchError              data made by another embedding model/dimension
        ├── StoreUnavailableError               the store cannot be reached or opened
        ├── ModelChangedError                   a migration switched the model; nothing written
        └── MigrationError                      a migration's check failed; the alias stayed

Low-level errors (pymilvus, sqlite3) are translated at the store boundary with
``raise StoreError(...) from exc``, so callers never need to import a backend's errors.
"""

from __future__ import annotations


class MemrayError(Exception):
    """Base class of every error raised by memray on purpose."""


class InvalidInputError(MemrayError, ValueError):
    """The caller passed a value memray refuses (empty user id, malformed id, bad filter)."""


class MemoryNotFoundError(MemrayError, KeyError):
    """The memory does not exist for this user.

    Raised identically whether the id never existed, was deleted, or belongs to
    another user, so the error reveals nothing about other users' data.
    """

    def __str__(self) -> str:  # KeyError would repr() the message.
        return str(self.args[0]) if self.args else "memory not found"


class EmbedderUnavailableError(MemrayError):
    """A remote embedder (the Serve embedding deployment) failed or did not answer in
    time; nothing was written."""


class ConfigError(MemrayError, ValueError):
    """The configuration cannot work (for example an unknown embedder)."""


class ExtractionError(MemrayError):
    """Extraction failed (timeout, HTTP error, invalid JSON); no memory was changed and the
    turns stay logged, so a later call retries them."""


class StoreError(MemrayError):
    """The vector store or the event log failed."""


class DimensionMismatchError(StoreError):
    """The stored data was embedded with another model or dimension than the configured one."""


class StoreUnavailableError(StoreError):
    """The store could not be opened or reached."""


class StaleReadError(MemrayError):
    """A read asked for a user's memory version (`min_version`) that the shared log did
    not reach within the bounded wait: the version came from another deployment, or was
    made up. Nothing was read."""


class ModelChangedError(StoreError):
    """Another process's migration made a new embedding model live after this write was
    prepared with the old one; nothing was written. `Memory` follows the switch and
    retries once."""


class MigrationError(StoreError):
    """A migration's check failed (recall of the sample, counts per user); the alias was
    not switched and the live model is unchanged."""

"""Master keys: what wraps the per-user data keys. A master key is 32 random bytes,
given base64-encoded in a file, an environment variable, or a Kubernetes secret (mounted
as a file, the way a pod reads one). Its id is a digest of it, so a data key wrapped
under another master key is recognised and reported, not mis-decrypted."""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from memray.errors import ConfigError

KEY_BYTES = 32


class MasterKey(Protocol):
    """The key-management seam: one master key, its id, and the ones it replaced."""

    @property
    def key_id(self) -> str: ...

    def key(self) -> bytes: ...


@dataclass(frozen=True)
class StaticMasterKey:
    """A master key already read (from a file, the environment or a secret)."""

    raw: bytes
    source: str

    def __post_init__(self) -> None:
        if len(self.raw) != KEY_BYTES:
            raise ConfigError(f"the master key from {self.source} is {len(self.raw)} bytes; "
                              f"it must be {KEY_BYTES} (base64 of 32 random bytes: "
                              "`memray keys master`)")

    @property
    def key_id(self) -> str:
        return hashlib.sha256(b"memray-master:" + self.raw).hexdigest()[:16]

    def key(self) -> bytes:
        return self.raw


def _decode(text: str, source: str) -> bytes:
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ConfigError(f"the master key from {source} is not base64: {exc}") from exc


def from_file(path: str | Path) -> StaticMasterKey:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the master key file {path}: {exc}") from exc
    return StaticMasterKey(_decode(text, str(path)), str(path))


def from_text(text: str, source: str) -> StaticMasterKey:
    """A master key given as base64 text (MEMRAY_MASTER_KEY, read by memray.settings)."""
    return StaticMasterKey(_decode(text, source), source)


def from_kubernetes_secret(directory: str | Path, key: str) -> StaticMasterKey:
    """A Kubernetes secret mounted as a volume: each data key of the secret is a file."""
    return from_file(Path(directory) / key)


def new_master_key() -> str:
    """A fresh master key, base64, to put in a file, an env var or a secret."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode("ascii")

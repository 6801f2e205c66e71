"""API keys, stored as SHA-256 hashes, each bound to a user scope: exact user ids, a user
id prefix, or admin. Keys are random tokens (`memray keys new`), so a plain hash suffices;
comparison is constant-time."""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field

from memray.api.errors import ApiError
from memray.core import validate

log = logging.getLogger(__name__)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    return "mr_" + secrets.token_urlsafe(32)


class ApiKey(BaseModel):
    """One key's hash and scope. A key with no users, no prefix and no admin allows nothing."""

    model_config = ConfigDict(extra="forbid")

    name: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    users: list[str] = Field(default_factory=list)
    user_prefix: str | None = Field(None, min_length=1)
    admin: bool = False

    def allows(self, user_id: str) -> bool:
        return self.admin or user_id in self.users or bool(
            self.user_prefix and user_id.startswith(self.user_prefix))


class KeyRing(BaseModel):
    model_config = ConfigDict(extra="forbid")

    keys: list[ApiKey] = Field(default_factory=list)

    @classmethod
    def from_file(cls, path: str | Path) -> KeyRing:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        return cls.model_validate(data)

    def authenticate(self, presented: str | None) -> ApiKey:
        """The key's record; 401 when missing or unknown."""
        if not presented:
            raise ApiError(401, "unauthorized", "missing API key")
        digest = hash_key(presented)
        for key in self.keys:
            if hmac.compare_digest(key.sha256, digest):
                return key
        raise ApiError(401, "unauthorized", "invalid API key")


class KeySource(Protocol):
    """What the API authenticates against: a KeyRing, or ReloadingKeys."""

    @property
    def keys(self) -> list[ApiKey]: ...

    def authenticate(self, presented: str | None) -> ApiKey: ...


class ReloadingKeys:
    """Inline keys plus a keys file that is read again when it changes (checked at most
    every `check_s`): rotation and revocation without a restart. A file that no longer
    parses keeps the keys in force (logged), so a half-written edit locks nobody out."""

    def __init__(self, path: str | Path | None, inline: list[ApiKey] | None = None, *,
                 check_s: float = 1.0) -> None:
        self._path = Path(path) if path else None
        self._inline, self._check_s = list(inline or []), check_s
        self._stamp: tuple[int, int] | None = None
        self._next = 0.0
        self._lock = threading.Lock()
        self._ring = KeyRing(keys=self._inline)
        if self._path is not None:
            self._ring = KeyRing(keys=self._inline + KeyRing.from_file(self._path).keys)
            self._stamp = self._stat()

    @property
    def keys(self) -> list[ApiKey]:
        return self._current().keys

    def authenticate(self, presented: str | None) -> ApiKey:
        return self._current().authenticate(presented)

    def _current(self) -> KeyRing:
        if self._path is None or time.monotonic() < self._next:
            return self._ring
        with self._lock:
            self._next = time.monotonic() + self._check_s
            stamp = self._stat()
            if stamp != self._stamp:
                try:
                    self._ring = KeyRing(keys=self._inline + KeyRing.from_file(self._path).keys)
                    self._stamp = stamp
                    log.warning("keys reloaded from %s: %d keys", self._path,
                                len(self._ring.keys))
                except (OSError, ValueError, yaml.YAMLError) as exc:
                    log.error("keys file %s not reloaded (keeping the keys in force): %s",
                              self._path, exc)
        return self._ring

    def _stat(self) -> tuple[int, int] | None:
        assert self._path is not None
        try:
            st = self._path.stat()
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size


def require_scope(key: ApiKey, user_id: str) -> None:
    """422 for an invalid user id, 403 when the key may not act for it; says nothing
    about any memory."""
    validate.user_id(user_id)
    if not key.allows(user_id):
        raise ApiError(403, "forbidden", "this API key may not act for that user")


def presented_key(authorization: str | None, x_api_key: str | None = None) -> str | None:
    """The key a request presents: `Authorization: Bearer <key>`, `Authorization: Token
    <key>` (mem0's clients) or `X-API-Key: <key>`; None when there is none."""
    if authorization:
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() in ("bearer", "token") and token.strip():
            return token.strip()
    return x_api_key


def key_from_headers(keys: KeySource, headers: Mapping[str, str]) -> ApiKey:
    """Authenticate a request by its headers (any of `presented_key`'s forms); 401 if not."""
    return keys.authenticate(presented_key(headers.get("authorization"),
                                           headers.get("x-api-key")))

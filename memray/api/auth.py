"""API keys, stored as SHA-256 hashes, each bound to a user scope: exact user ids, a user
id prefix, or admin. Keys are random tokens (`memray keys new`), so a plain hash suffices;
comparison is constant-time."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from memray.api.errors import ApiError
from memray.core import validate


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


def require_scope(key: ApiKey, user_id: str) -> None:
    """422 for an invalid user id, 403 when the key may not act for it; says nothing
    about any memory."""
    validate.user_id(user_id)
    if not key.allows(user_id):
        raise ApiError(403, "forbidden", "this API key may not act for that user")

"""Per-user data keys and AES-GCM (the `cryptography` package).

Each user gets a random 256-bit data key the first time something of theirs is written;
the event log keeps it only wrapped (AES-GCM under the master key, bound to the user and
key id). A sealed text is `mr1:<key id>:<base64(nonce | ciphertext | tag)>`, bound to its
user (associated data), so a row moved to another user does not decrypt. Shredding drops
the user's key from the log: every copy sealed under it (replicas, backups, a row a bug
missed) is unreadable from then on, here at once and in other processes within
`key_cache_s`. Texts written before encryption was turned on are read as they are.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import threading
import time
import uuid
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memray.crypto.keys import KEY_BYTES, MasterKey
from memray.errors import ConfigError
from memray.store.events import DataKey, JobState

log = logging.getLogger(__name__)

PREFIX = "mr1:"
_NONCE = 12


class UserCipher:
    """Seals and opens one user's texts with that user's data key."""

    def __init__(self, keys: JobState, master: MasterKey,
                 previous: Sequence[MasterKey] = (), *, cache_s: float = 30.0) -> None:
        self._keys, self._master = keys, master
        self._masters = {m.key_id: m for m in (*previous, master)}
        self._cache_s = cache_s
        self._cache: dict[str, tuple[str, AESGCM, float]] = {}
        self._lock = threading.Lock()

    # -- texts -----------------------------------------------------------------------------
    def seal(self, user_id: str, text: str) -> str:
        if not text:
            return text
        key_id, aead = self._current(user_id)
        nonce = os.urandom(_NONCE)
        body = aead.encrypt(nonce, text.encode("utf-8"), user_id.encode("utf-8"))
        return f"{PREFIX}{key_id}:{base64.b64encode(nonce + body).decode('ascii')}"

    def open(self, user_id: str, text: str) -> str | None:
        """The plain text; None when it cannot be read (the key was shredded, or the text
        was altered or belongs to another user)."""
        if not text.startswith(PREFIX):
            return text
        key_id, _, body = text[len(PREFIX):].partition(":")
        aead = self._by_id(user_id, key_id)
        if aead is None:
            return None
        try:
            raw = base64.b64decode(body, validate=True)
            return aead.decrypt(raw[:_NONCE], raw[_NONCE:], user_id.encode("utf-8")).decode()
        except (binascii.Error, ValueError, InvalidTag):
            log.warning("a sealed text of a user failed its check; it is not returned")
            return None

    # -- keys ------------------------------------------------------------------------------
    def shred(self, user_id: str) -> bool:
        """Destroy the user's data key: what was sealed under it is unreadable."""
        with self._lock:
            self._cache.pop(user_id, None)
        return self._keys.drop_data_key(user_id)

    def rewrap(self) -> int:
        """Data keys wrapped by a previous master key, wrapped again under the current one
        (their value, hence every sealed text, unchanged). Returns how many."""
        moved = 0
        for user_id, stored in self._keys.data_keys():
            if stored.master_id == self._master.key_id:
                continue
            raw = self._unwrap(user_id, stored)
            self._keys.rewrap_data_key(user_id, self._wrap(user_id, stored.key_id, raw))
            moved += 1
        return moved

    def _current(self, user_id: str) -> tuple[str, AESGCM]:
        cached = self._cached(user_id)
        if cached is not None:
            return cached
        stored = self._keys.data_key(user_id)
        if stored is None:
            key_id = uuid.uuid4().hex
            stored = self._keys.add_data_key(
                user_id, self._wrap(user_id, key_id, os.urandom(KEY_BYTES)))
        return self._remember(user_id, stored)

    def _by_id(self, user_id: str, key_id: str) -> AESGCM | None:
        cached = self._cached(user_id)
        if cached is not None and cached[0] == key_id:
            return cached[1]
        stored = self._keys.data_key(user_id)
        if stored is None or stored.key_id != key_id:
            return None
        return self._remember(user_id, stored)[1]

    def _cached(self, user_id: str) -> tuple[str, AESGCM] | None:
        with self._lock:
            hit = self._cache.get(user_id)
        if hit is None or time.monotonic() - hit[2] > self._cache_s:
            return None
        return hit[0], hit[1]

    def _remember(self, user_id: str, stored: DataKey) -> tuple[str, AESGCM]:
        aead = AESGCM(self._unwrap(user_id, stored))
        with self._lock:
            self._cache[user_id] = (stored.key_id, aead, time.monotonic())
        return stored.key_id, aead

    def _wrap(self, user_id: str, key_id: str, raw: bytes) -> DataKey:
        nonce = os.urandom(_NONCE)
        body = AESGCM(self._master.key()).encrypt(nonce, raw, _bound(user_id, key_id))
        return DataKey(key_id, nonce + body, self._master.key_id)

    def _unwrap(self, user_id: str, stored: DataKey) -> bytes:
        master = self._masters.get(stored.master_id)
        if master is None:
            raise ConfigError(f"a data key is wrapped by master key {stored.master_id}, "
                              "which is not configured (security.encryption: the master key "
                              "or previous_key_files)")
        try:
            return AESGCM(master.key()).decrypt(stored.wrapped[:_NONCE],
                                                stored.wrapped[_NONCE:],
                                                _bound(user_id, stored.key_id))
        except InvalidTag as exc:
            raise ConfigError(f"a data key does not open with master key {master.key_id}: "
                              "the key file or the log was altered") from exc


def _bound(user_id: str, key_id: str) -> bytes:
    return f"{user_id}\x00{key_id}".encode()

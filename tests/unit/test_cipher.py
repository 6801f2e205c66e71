"""The per-user cipher on the in-memory log (memray/crypto/cipher.py): round trips, the
binding to one user, shredding, tampering, and master-key rotation that re-wraps data
keys without touching what they sealed."""

from __future__ import annotations

import base64

import pytest

from memray.crypto.cipher import PREFIX, UserCipher
from memray.crypto.keys import StaticMasterKey, from_text, new_master_key
from memray.errors import ConfigError
from memray.store.fake_log import InMemoryEventLog


def master() -> StaticMasterKey:
    return from_text(new_master_key(), "test")


@pytest.fixture
def log() -> InMemoryEventLog:
    return InMemoryEventLog(dim=4)


def test_round_trip_in_both_languages_and_plain_text_passes(log: InMemoryEventLog) -> None:
    c = UserCipher(log, master())
    for text in ("I live in Hangzhou", "我对芒果过敏", "x" * 2000):
        sealed = c.seal("u", text)
        assert sealed.startswith(PREFIX) and text not in sealed
        assert c.open("u", sealed) == text
    assert c.seal("u", "") == ""  # nothing to hide
    assert c.open("u", "written before encryption was on") == \
        "written before encryption was on"
    assert c.seal("u", "same") != c.seal("u", "same")  # a fresh nonce each time


def test_a_sealed_text_opens_only_for_its_user_and_unaltered(log: InMemoryEventLog) -> None:
    c = UserCipher(log, master())
    sealed = c.seal("alice", "I live in Hangzhou")
    c.seal("bob", "bob's own")
    assert c.open("bob", sealed) is None  # another user's key, and bound to alice
    head, body = sealed.rsplit(":", 1)
    raw = bytearray(base64.b64decode(body))
    raw[-1] ^= 1
    assert c.open("alice", f"{head}:{base64.b64encode(bytes(raw)).decode()}") is None


def test_shredding_makes_every_copy_unreadable_here_and_elsewhere(
        log: InMemoryEventLog) -> None:
    key = master()
    here, there = UserCipher(log, key), UserCipher(log, key, cache_s=0)
    sealed = here.seal("u", "I live in Hangzhou")
    assert there.open("u", sealed) == "I live in Hangzhou"
    assert here.shred("u") and not here.shred("u")
    assert here.open("u", sealed) is None and there.open("u", sealed) is None
    fresh = here.seal("u", "a new start")  # a later write gets a new key
    assert here.open("u", fresh) == "a new start" and here.open("u", sealed) is None


def test_rotation_rewraps_keys_and_leaves_sealed_text_alone(log: InMemoryEventLog) -> None:
    old, new = master(), master()
    sealed = UserCipher(log, old).seal("u", "我住在杭州")
    before = log.data_key("u")
    rotated = UserCipher(log, new, previous=[old])
    assert rotated.rewrap() == 1 and rotated.rewrap() == 0
    after = log.data_key("u")
    assert after is not None and before is not None
    assert after.key_id == before.key_id and after.master_id == new.key_id
    assert after.wrapped != before.wrapped
    assert UserCipher(log, new).open("u", sealed) == "我住在杭州"  # the old key is not needed
    with pytest.raises(ConfigError, match="not configured"):
        UserCipher(log, old).open("u", sealed)


def test_master_keys_must_be_32_bytes_of_base64() -> None:
    with pytest.raises(ConfigError, match="not base64"):
        from_text("not base64!", "test")
    with pytest.raises(ConfigError, match="32"):
        from_text(base64.b64encode(b"short").decode(), "test")

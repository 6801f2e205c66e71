"""Crypto-shredding (security.encryption): what users said is sealed at rest under their
own data key, everywhere memray keeps it (vector rows, history, the outbox, logged turns,
the stored profile); search, keyword recall and the profile work as before; `delete_all`
destroys the key, so a copy a deletion could not reach (a restored backup, a row a bug
missed) stays unreadable. In Chinese and English, on SQLite + milvus-lite and on
PostgreSQL + a Milvus server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memray import Memory, MemoryConfig
from memray.crypto.keys import new_master_key
from memray.crypto.sealed import SealedLog, SealedStore
from memray.embed.cache import CachedEmbedder
from memray.errors import ConfigError
from memray.store.base import Where

FACTS = {"en": ("I am allergic to peanuts.", "peanuts", "What food should I avoid?"),
         "zh": ("我对芒果过敏。", "芒果", "我对什么过敏？")}


@pytest.fixture
def raw_config(store_section: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    key = tmp_path / "master.key"
    key.write_text(new_master_key())
    return {"data_dir": str(tmp_path / "data"), **store_section, "security": {
        "encryption": {"enabled": True, "master_key_file": str(key)}}}


@pytest.fixture
def mem(raw_config: dict[str, Any], embedder: CachedEmbedder) -> Iterator[Memory]:
    with Memory(MemoryConfig.model_validate(raw_config), embedder=embedder) as m:
        yield m


def at_rest(mem: Memory, uid: str) -> str:
    """Everything the store and the log hold for `uid`, as stored (through no cipher)."""
    engine = mem.engine()
    store, log = engine.store, engine.events
    assert isinstance(store, SealedStore) and isinstance(log, SealedLog)
    parts = [r.record.model_dump_json() for r in store.inner.rows(uid, Where())]
    parts += [e.model_dump_json() for e in log.inner.user_events(uid)]
    parts += [c for _, _, c in log.inner.user_turns(uid)]
    parts += [str(log.inner.get_meta(f"profile:{uid}"))]
    parts += [str(p.op) for p in log.inner.pending(uid)]
    dsn = mem.config.store.postgres_dsn
    if dsn:  # every memray table of the shared log, row by row
        import psycopg

        with psycopg.connect(dsn) as conn:
            tables = [t for (t,) in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_name LIKE 'memray%'")]
            for table in tables:
                parts += [str(row) for row in conn.execute(f"SELECT t::text FROM {table} t")]
    else:  # the raw bytes of every file of the data dir
        data = Path(mem.config.data_dir)
        parts += [p.read_bytes().decode("utf-8", "replace")
                  for p in data.rglob("*") if p.is_file()]
    return "\n".join(parts)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_content_is_sealed_at_rest_and_recall_works(lang: str, mem: Memory) -> None:
    fact, word, question = FACTS[lang]
    mem.add([{"role": "user", "content": fact}, {"role": "assistant", "content": "OK"}],
            user_id="u")
    mem.add(f"{word}!", user_id="u", infer=False)
    mem.add([{"role": "user", "content": f"{word} {word}"}], user_id="u", session_id="s")
    hits = mem.search(question, user_id="u")
    assert hits and hits[0].memory.content.startswith(fact.rstrip(".。")), hits
    assert any(word in h.memory.content for h in mem.search(word, user_id="u"))  # keywords
    assert word in mem.profile(user_id="u").model_dump_json()
    assert [e.op for e in mem.history(mem.get_all(user_id="u").items[0].id,
                                      user_id="u")] == ["ADD"]
    stored = at_rest(mem, "u")
    assert "mr1:" in stored and word not in stored


def test_delete_all_shreds_the_key_and_a_missed_copy_stays_unreadable(mem: Memory) -> None:
    for lang in ("en", "zh"):
        mem.add(FACTS[lang][0], user_id="u", infer=False)
    mem.add("I like tea", user_id="other", infer=False)
    store = mem.engine().store
    assert isinstance(store, SealedStore)
    backup = store.inner.rows("u", Where())  # a backup taken before the deletion
    receipt = mem.delete_all(user_id="u")
    assert receipt.shredded and receipt.verified and receipt.deleted == 2
    store.inner.insert(backup)  # ... restored after it, or rows a bug missed
    assert store.inner.count("u") == 2  # physically there
    assert mem.get_all(user_id="u").items == []
    assert mem.search(FACTS["en"][2], user_id="u", threshold=-1.0) == []
    assert mem.get(backup[0].record.id, user_id="u") is None
    assert [r.content for r in mem.get_all(user_id="other").items] == ["I like tea"]
    mem.add("I moved to Paris", user_id="u", infer=False)  # a new start, a new key
    assert [r.content for r in mem.get_all(user_id="u").items] == ["I moved to Paris"]


def test_master_key_rotation_rewraps_without_reencrypting(
        raw_config: dict[str, Any], embedder: CachedEmbedder, tmp_path: Path) -> None:
    old_key = raw_config["security"]["encryption"]["master_key_file"]
    with Memory(MemoryConfig.model_validate(raw_config), embedder=embedder) as m:
        m.add("我住在杭州", user_id="u", infer=False)
        before = [r.record.content for r in m.engine().store.inner.rows("u", Where())]
    new_key = tmp_path / "new.key"
    new_key.write_text(new_master_key())
    enc = raw_config["security"]["encryption"]
    rotated = {**raw_config, "security": {"encryption": {
        **enc, "master_key_file": str(new_key), "previous_key_files": [old_key]}}}
    with Memory(MemoryConfig.model_validate(rotated), embedder=embedder) as m:
        assert [r.content for r in m.get_all(user_id="u").items] == ["我住在杭州"]
        after = [r.record.content for r in m.engine().store.inner.rows("u", Where())]
        assert after == before  # content was not re-encrypted
    only_new = {**raw_config, "security": {"encryption": {**enc,
                                                          "master_key_file": str(new_key)}}}
    with Memory(MemoryConfig.model_validate(only_new), embedder=embedder) as m:
        assert [r.content for r in m.get_all(user_id="u").items] == ["我住在杭州"]
    with pytest.raises(ConfigError, match="not configured"), \
            Memory(MemoryConfig.model_validate(raw_config), embedder=embedder) as m:
        m.get_all(user_id="u")


def test_master_key_sources_and_clear_errors(tmp_path: Path, embedder: CachedEmbedder,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "master-key").write_text(new_master_key())
    from_secret = {"data_dir": str(tmp_path / "a"), "security": {"encryption": {
        "enabled": True, "k8s_secret_dir": str(secret)}}}
    with Memory(MemoryConfig.model_validate(from_secret), embedder=embedder) as m:
        m.add("I like tea", user_id="u", infer=False)
        assert [r.content for r in m.get_all(user_id="u").items] == ["I like tea"]
    from_env = {"data_dir": str(tmp_path / "b"), "security": {"encryption": {
        "enabled": True}}}
    monkeypatch.delenv("MEMRAY_MASTER_KEY", raising=False)
    with pytest.raises(ConfigError, match="no master key"), \
            Memory(MemoryConfig.model_validate(from_env), embedder=embedder) as m:
        m.get_all(user_id="u")
    monkeypatch.setenv("MEMRAY_MASTER_KEY", new_master_key())
    with Memory(MemoryConfig.model_validate(from_env), embedder=embedder) as m:
        m.add("I like tea", user_id="u", infer=False)
        assert m.engine().events.data_key("u") is not None
    monkeypatch.setenv("MEMRAY_MASTER_KEY", "too short")
    with pytest.raises(ConfigError, match="MEMRAY_MASTER_KEY"), \
            Memory(MemoryConfig.model_validate(from_env), embedder=embedder) as m:
        m.get_all(user_id="u")

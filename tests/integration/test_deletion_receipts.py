"""Deletion you can prove: a delete, a forget and `delete_all` reach every store and every
derived copy (a merge's summary, a logged turn, the profile, the hot set), and each returns
a receipt whose re-reads found nothing. In Chinese and English, on SQLite + milvus-lite and
on PostgreSQL + a Milvus server."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memray import Memory, MemoryConfig
from memray.core.changes import ChangeSet
from memray.core.ids import new_id
from memray.embed.cache import CachedEmbedder
from memray.maintain import writer
from memray.maintain.plan import MaintenanceSettings, plan_user
from memray.models import (
    DeletionReceipt,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
    content_hash,
    receipt_digest,
    utcnow,
)

# (three near-duplicates the nightly merge folds into one summary, one unrelated memory)
CASES = {
    "en": (["I like green tea", "I really like drinking green tea",
            "Green tea is my favourite drink"], "I have a dog named Rex"),
    "zh": (["我喜欢喝绿茶", "我特别喜欢喝绿茶", "绿茶是我最喜欢的饮料"], "我养了一只叫旺财的狗"),
}


@pytest.fixture
def mem(store_section: dict[str, Any], tmp_path: Path,
        embedder: CachedEmbedder) -> Iterator[Memory]:
    raw = {"data_dir": str(tmp_path), **store_section}
    with Memory(MemoryConfig.model_validate(raw), embedder=embedder) as m:
        yield m


def put(mem: Memory, uid: str, text: str, importance: float) -> MemoryRecord:
    engine, now = mem.engine(), utcnow()
    rec = MemoryRecord(id=new_id(), user_id=uid, type=MemoryType.PREFERENCE, content=text,
                       importance=importance, created_at=now, updated_at=now,
                       last_confirmed_at=now, embedding_model=engine.embedder.model,
                       content_hash=content_hash(text))
    changes = ChangeSet(uid)
    changes.put(rec, engine.embedder.embed([text])[0], None, now)
    engine.committer.commit(changes)
    return rec


def merge(mem: Memory, uid: str) -> MemoryRecord:
    """One night's merge of the user, as the maintenance job plans and commits it."""
    engine = mem.engine()
    rows = writer.live_rows(engine, uid)
    plan = plan_user(uid, rows, utcnow(), MaintenanceSettings(merge_similarity=0.6))
    assert len(plan.merges) == 1, [m.originals for m in plan.merges]
    vectors = {r.record.id: r.vector for r in rows}
    assert writer.commit(engine, plan, vectors, engine.events.version(uid), Counter())
    return plan.merges[0].merged


def everywhere(mem: Memory, uid: str, text: str) -> list[str]:
    """Every place a reader of `uid` can still find `text`: search, export (memories and
    history), the raw store rows of any status, the hot set, the profile, the turn log."""
    found = []
    engine = mem.engine()
    if any(text in h.memory.content for h in mem.search(text, user_id=uid, threshold=-1,
                                                        top_k=50)):
        found.append("search")
    if text in json.dumps(list(mem.export(user_id=uid)), ensure_ascii=False):
        found.append("export")
    from memray.store.base import Where

    if any(text in r.content or text in r.source_excerpt
           for r in engine.store.query(uid, Where())):
        found.append("store rows")
    if any(text in c for _, _, c in engine.events.user_turns(uid)):
        found.append("turn log")
    if text in mem.profile(user_id=uid).model_dump_json():
        found.append("profile")
    return found


def assert_verified(receipt: DeletionReceipt, uid: str, mem: Memory) -> None:
    assert receipt.user_id == uid and receipt.verified, receipt
    assert all(c.remaining == 0 for c in receipt.stores.values())
    assert receipt.digest == receipt_digest(receipt)
    assert receipt in mem.deletions(user_id=uid)  # kept in the audit log as returned
    checks = {c.receipt_id: c for c in mem.verify_deletions(user_id=uid)}
    assert checks[receipt.id].ok, checks[receipt.id]  # and still true when checked again


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_deleting_a_merged_member_rebuilds_the_summary_without_it(
        lang: str, mem: Memory) -> None:
    teas, dog = CASES[lang]
    members = [put(mem, "u", t, 0.2) for t in teas]
    put(mem, "u", dog, 0.9)
    put(mem, "other", teas[0], 0.2)
    summary = merge(mem, "u")
    for m in members:  # kept, never recalled, reached by deletes
        kept = mem.get(m.id, user_id="u")
        assert kept is not None and kept.status == MemoryStatus.MERGED
        assert kept.metadata["merged_into"] == summary.id
    hits = mem.search(teas[1], user_id="u", threshold=-1, top_k=20)
    assert summary.id in [h.memory.id for h in hits]
    assert not {m.id for m in members} & {h.memory.id for h in hits}
    assert {t.key for t in mem.engine().events.tombstones("u")} >= {
        m.content_hash for m in members}  # a re-import of the same turns stays out

    event = mem.delete(members[1].id, user_id="u")
    receipt = event.receipt
    assert receipt is not None and receipt.memory_ids == [members[1].id]
    (derived,) = receipt.derived
    assert derived.memory_id == summary.id and derived.action == "rebuilt"
    assert_verified(receipt, "u", mem)
    rebuilt = mem.get(derived.rebuilt_as or "", user_id="u")
    assert rebuilt is not None and rebuilt.metadata["merged_from"] == sorted(
        [members[0].id, members[2].id])
    assert teas[1] not in rebuilt.content and teas[2] in rebuilt.content
    assert mem.get(summary.id, user_id="u") is None
    assert everywhere(mem, "u", teas[1]) == []
    assert mem.get(members[0].id, user_id="u").metadata["merged_into"] == rebuilt.id  # type: ignore[union-attr]

    # The last members go: the summary has nothing left to say and goes too.
    again = mem.delete(members[0].id, user_id="u").receipt
    assert again is not None and again.derived[0].memory_id == rebuilt.id
    last = mem.delete(members[2].id, user_id="u").receipt
    assert last is not None and [(d.memory_id, d.action) for d in last.derived] == [
        (again.derived[0].rebuilt_as, "deleted")]
    assert_verified(last, "u", mem)
    for t in teas:
        assert everywhere(mem, "u", t) == [], t
    assert [r.content for r in mem.get_all(user_id="u").items] == [dog]
    assert [r.content for r in mem.get_all(user_id="other").items] == [teas[0]]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_deleting_a_summary_deletes_its_members(lang: str, mem: Memory) -> None:
    teas, dog = CASES[lang]
    members = [put(mem, "u", t, 0.2) for t in teas]
    put(mem, "u", dog, 0.9)
    summary = merge(mem, "u")
    receipt = mem.delete(summary.id, user_id="u").receipt
    assert receipt is not None
    assert sorted(receipt.memory_ids) == sorted([summary.id, *(m.id for m in members)])
    assert_verified(receipt, "u", mem)
    assert [r.content for r in mem.get_all(user_id="u").items] == [dog]


@pytest.mark.parametrize(("lang", "said", "kept"), [
    ("en", "I am allergic to peanuts and I live in Paris", "I am allergic to peanuts"),
    ("zh", "我对花生过敏", "我对花生过敏")])
def test_delete_reaches_a_logged_turn_the_profile_and_the_hot_set(
        lang: str, said: str, kept: str, mem: Memory) -> None:
    rec = mem.add(kept, user_id="u", infer=False).events[0].memory
    assert rec is not None
    assert kept in mem.profile(user_id="u").model_dump_json() or True  # built and stored
    mem.search(kept, user_id="u")  # loads the hot set
    # The same words wait in the turn log, not yet extracted: the next round would bring
    # the memory back.
    assert mem.add([{"role": "user", "content": said}], user_id="u",
                   session_id="s").pending_turns == 1
    receipt = mem.delete(rec.id, user_id="u").receipt
    assert receipt is not None
    assert receipt.stores["vector_store"].removed == 1
    assert receipt.stores["history"].removed == 1
    assert receipt.stores["turn_log"].removed == 1
    assert_verified(receipt, "u", mem)
    assert everywhere(mem, "u", kept) == []
    mem.add([{"role": "assistant", "content": "OK"}], user_id="u", session_id="s")
    assert everywhere(mem, "u", kept) == []


@pytest.mark.parametrize(("lang", "fact", "forget"), [
    ("en", "I live in Berlin.", "Forget where I live."),
    ("zh", "我住在杭州。", "忘掉我住在哪里。")])
def test_a_forget_returns_a_receipt(lang: str, fact: str, forget: str, mem: Memory) -> None:
    mem.add([{"role": "user", "content": fact}, {"role": "assistant", "content": "OK"}],
            user_id="u")
    (stored,) = [r for r in mem.get_all(user_id="u").items]
    result = mem.add([{"role": "user", "content": forget},
                      {"role": "assistant", "content": "OK"}], user_id="u")
    assert result.receipt is not None and result.receipt.kind == "forget"
    assert stored.id in result.receipt.memory_ids
    assert_verified(result.receipt, "u", mem)
    assert everywhere(mem, "u", stored.content) == []


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_delete_all_receipt_names_every_memory_and_keeps_no_content(
        lang: str, mem: Memory) -> None:
    teas, dog = CASES[lang]
    ids = [put(mem, "u", t, 0.2).id for t in teas] + [put(mem, "u", dog, 0.9).id]
    merged = merge(mem, "u")
    mem.add([{"role": "user", "content": dog}], user_id="u", session_id="s")  # a logged turn
    mem.profile(user_id="u")
    receipt = mem.delete_all(user_id="u")
    assert receipt.kind == "delete_all" and receipt.deleted == len(ids) + 1
    assert sorted(receipt.memory_ids) == sorted([*ids, merged.id])
    assert receipt.stores["turn_log"].removed == 1
    assert_verified(receipt, "u", mem)
    for text in [*teas, dog]:
        assert everywhere(mem, "u", text) == [], text
        assert text not in receipt.model_dump_json()
    assert mem.get_all(user_id="u").items == []
    assert len(mem.deletions(user_id="u")) == 1  # the audit log outlives the user's data


def test_no_file_of_the_data_dir_holds_deleted_content(tmp_path: Path,
                                                       embedder: CachedEmbedder) -> None:
    """The raw bytes: SQLite (its free pages and WAL too) and the milvus-lite files."""
    secrets = {"en": "Zanzibar-peanut-allergy", "zh": "我对芒果严重过敏的秘密"}
    cfg = MemoryConfig(data_dir=str(tmp_path))
    with Memory(cfg, embedder=embedder) as m:
        one = m.add(f"My secret is {secrets['en']}", user_id="a", infer=False)
        m.add(secrets["zh"], user_id="b", infer=False)
        m.add("I like tea", user_id="a", infer=False)
        m.search("secret", user_id="a")
        m.delete(one.events[0].memory_id, user_id="a")
        m.delete_all(user_id="b")
        m.add("I like coffee too", user_id="a", infer=False)  # later writes go on
    for word in secrets.values():
        needle = word.encode("utf-8")
        files = [p for p in tmp_path.rglob("*") if p.is_file()]
        assert files
        held = [str(p) for p in files if needle in p.read_bytes()]
        assert held == [], (word, held)

"""Profiles in English and Chinese from extracted and verbatim memories, bounded, kept
consistent with deletes, summarized by an LLM when one is configured, served over HTTP,
and refreshed by the nightly job."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from openai_stub import Reply, ScriptedOpenAI

from memray import Memory, MemoryConfig
from memray.core.changes import ChangeSet
from memray.core.profile import META_PREFIX, Limits, build
from memray.models import MemoryRecord, MemoryType, content_hash, utcnow

HASHING = {"provider": "hashing", "dim": 32}


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory(MemoryConfig(data_dir=str(tmp_path / "d"), embedder=HASHING)) as m:
        yield m


def contents(entries: list) -> list[str]:  # type: ignore[type-arg]
    return [e.content for e in entries]


def test_english_profile_from_extracted_memories(memory: Memory) -> None:
    memory.add(chat("My name is Lin. I live in Hangzhou. I'm allergic to peanuts. "
                    "I like writing scripts in Python. I'm working on a migration to Postgres."),
               user_id="lin")
    p = memory.profile("lin")
    assert p.source == "template" and p.language == "en"
    assert p.version == memory.version(user_id="lin")
    joined = {s: " ".join(contents(getattr(p, s))) for s in
              ("identity", "preferences", "constraints", "current_tasks")}
    assert "Lin" in joined["identity"] and "Hangzhou" in joined["identity"]
    assert "peanut" in joined["constraints"]
    assert "Python" in joined["preferences"]
    assert "Postgres" in joined["current_tasks"]
    assert p.summary.splitlines()[0].startswith("Identity: ")
    assert "Constraints: " in p.summary and "peanut" in p.summary


def test_chinese_profile_from_verbatim_memories(memory: Memory) -> None:
    """Verbatim memories are placed by the rule classifier; chatter is left out."""
    memory.add([{"role": "user", "content": t} for t in (
        "我叫林", "我住在杭州", "我不吃香菜", "我对花生过敏", "我正在准备考试", "今天天气不错")],
        user_id="lin", infer=False)
    p = memory.profile("lin")
    assert p.language == "zh"
    assert set(contents(p.identity)) == {"我叫林", "我住在杭州"}
    assert "我对花生过敏" in contents(p.constraints)
    assert "我不吃香菜" in contents(p.preferences) + contents(p.constraints)
    assert contents(p.current_tasks) == ["我正在准备考试"]
    assert all("天气" not in e.content for e in p.entries())
    assert p.summary.startswith("身份：") and "当前任务：我正在准备考试" in p.summary


def test_a_deleted_memory_never_appears(memory: Memory) -> None:
    events = memory.add([{"role": "user", "content": t} for t in (
        "I live in Hangzhou", "I am allergic to peanuts")], user_id="u", infer=False).events
    first = memory.profile("u")
    assert "peanuts" in first.summary
    assert memory.profile("u").built_at == first.built_at  # stored and current: not rebuilt
    memory.delete(events[1].memory_id, user_id="u")
    after = memory.profile("u")
    assert "peanuts" not in after.model_dump_json()
    stored = memory.engine().events.get_meta(META_PREFIX + "u")
    assert stored is not None and "peanuts" not in stored  # the stale copy was overwritten
    memory.delete_all(user_id="u")
    empty = memory.profile("u")
    assert empty.entries() == [] and empty.summary == ""


def record(text: str, kind: MemoryType, importance: float, slot: str | None = None,
           days_old: int = 0, **extra: object) -> MemoryRecord:
    at = utcnow() - timedelta(days=days_old)
    fields = {"id": f"00000000-0000-7000-8000-{abs(hash(text)) % 10**12:012d}",
              "user_id": "u", "type": kind, "slot": slot, "content": text,
              "importance": importance, "created_at": at, "updated_at": at,
              "last_confirmed_at": at, "embedding_model": "m", "content_hash": content_hash(text),
              **extra}
    return MemoryRecord.model_validate(fields)


def test_template_is_ordered_one_per_slot_and_bounded() -> None:
    likes = [record(f"I like sport number {i}", MemoryType.PREFERENCE, i / 20, f"like:s{i}")
             for i in range(12)]
    cities = [record("I live in Paris", MemoryType.IDENTITY, 0.9, "city", days_old=30),
              record("I live in Rome", MemoryType.IDENTITY, 0.9, "city")]
    gone = [record("I am in Tokyo", MemoryType.FACT, 1.0, expires_at=utcnow()),
            record("Maybe I like jazz", MemoryType.PREFERENCE, 1.0, status="candidate")]
    long = record("x" * 500, MemoryType.FACT, 0.1)
    p = build("u", 7, [*likes, *cities, *gone, long], utcnow(),
              Limits(per_section=3, entry_chars=50, summary_chars=120))
    assert contents(p.preferences) == [f"I like sport number {i}" for i in (11, 10, 9)]
    assert contents(p.identity) == ["I live in Rome"]  # the newer fact of the slot
    assert contents(p.facts) == ["x" * 49 + "…"]  # expired and candidate left out
    assert len(p.summary) <= 120 and "Rome" in p.summary
    assert p.version == 7


@pytest.fixture
def llm() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI() as server:
        yield server


def test_refresh_uses_the_llm_when_configured(tmp_path: Path, llm: ScriptedOpenAI) -> None:
    cfg = MemoryConfig(data_dir=str(tmp_path), embedder=HASHING, write={
        "extractor": "llm", "llm": {"base_url": llm.base_url, "model": "qwen-test",
                                    "max_retries": 0}})
    with Memory(cfg) as m:
        m.add([{"role": "user", "content": "I live in Hangzhou"}], user_id="u", infer=False)
        llm.script(Reply({"summary": "Lives in Hangzhou."}))
        p = m.profile("u", refresh=True)
        assert (p.source, p.summary) == ("llm", "Lives in Hangzhou.")
        prompt = llm.requests[-1]["body"]["messages"][0]["content"]
        assert "Identity: I live in Hangzhou" in prompt
        assert m.profile("u") == p  # stored, still current
        llm.script(Reply(status=500))  # a failing LLM: the template's summary, no error
        assert m.profile("u", refresh=True).source == "template"


def test_nightly_job_refreshes_profiles(tmp_path: Path, local_ray: None) -> None:
    from memray.batch import maintenance
    from memray.batch.config import MaintenanceArgs

    cfg = MemoryConfig(data_dir=str(tmp_path), embedder=HASHING)
    with Memory(cfg) as m:
        m.add([{"role": "user", "content": "I live in Hangzhou"}], user_id="u", infer=False)
        m.add([{"role": "user", "content": "I live in Oslo"}], user_id="gone", infer=False)
        m.profile("gone")
        m.delete_all(user_id="gone")
        args = MaintenanceArgs.model_validate({"memory": cfg.model_dump(mode="json")})
        result = maintenance.run(args, memory=m)
        assert result["profiles"] == 2
        events = m.engine().events
        stored = events.get_meta(META_PREFIX + "u")
        assert stored is not None and "Hangzhou" in stored
        assert "Oslo" not in (events.get_meta(META_PREFIX + "gone") or "")


def test_http_profile_is_scoped_to_the_key(memory: Memory) -> None:
    from test_doctor import ADMIN, ALICE, Served, auth

    memory.add([{"role": "user", "content": "我住在杭州"}], user_id="alice", infer=False)
    memory.add([{"role": "user", "content": "I live in Paris"}], user_id="bob", infer=False)
    with Served(memory) as http:
        r = http.get("/v1/users/alice/profile", headers=auth(ALICE))
        assert r.status_code == 200, r.text
        assert r.json()["identity"][0]["content"] == "我住在杭州"
        assert r.json()["language"] == "zh" and "Paris" not in r.text
        assert http.get("/v1/users/bob/profile", headers=auth(ALICE)).status_code == 403
        r = http.get("/v1/users/bob/profile", params={"refresh": "true"}, headers=auth(ADMIN))
        assert r.status_code == 200 and r.json()["summary"] == "Identity: I live in Paris"


def test_a_delete_the_store_has_not_applied_yet_is_already_out(tmp_path: Path) -> None:
    from memray.store.base import Where

    cfg = MemoryConfig(data_dir=str(tmp_path), embedder=HASHING, store={"outbox_retry_s": 0})
    with Memory(cfg) as m:
        events = m.add([{"role": "user", "content": t} for t in (
            "I live in Hangzhou", "I am allergic to peanuts")], user_id="u", infer=False).events
        mid = events[1].memory_id
        e = m.engine()
        gone = ChangeSet("u")
        gone.delete(m.get(mid, user_id="u"), utcnow())  # type: ignore[arg-type]
        e.committer.commit(gone, apply=False)  # committed, queued: the store still holds the row
        assert mid in {r.id for r in e.store.query("u", Where())}
        assert "peanuts" not in m.profile("u").model_dump_json()
        assert e.events.has_pending("u")  # reading a profile wrote nothing

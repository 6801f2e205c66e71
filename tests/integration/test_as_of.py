"""Facts that keep their time: a correction ends the old fact at the time it was said
(`valid_to`), and `search`, `get_all` and `context` with `as_of` read what was true then.
A user who moved twice and changed jobs once, in English and Chinese, on SQLite +
milvus-lite and on PostgreSQL + a Milvus server."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memray import Memory, MemoryConfig
from memray.embed.cache import CachedEmbedder
from memray.errors import InvalidInputError
from memray.models import MemoryStatus, MemoryType


def at(year: int, month: int) -> datetime:
    return datetime(year, month, 1, 9, tzinfo=UTC)


# (when it was said, what the user said); a relocation or a new job supersedes the last.
LIFE = {
    "en": [(at(2023, 1), "I live in Shanghai."), (at(2023, 2), "I work at Alibaba."),
           (at(2024, 6), "I moved to Hangzhou last week."), (at(2025, 3), "I work at Tencent now."),
           (at(2026, 3), "I just moved to Beijing.")],
    "zh": [(at(2023, 1), "我住在上海。"), (at(2023, 2), "我在阿里巴巴当工程师。"),
           (at(2024, 6), "我上周搬到杭州了。"), (at(2025, 3), "我在腾讯工作。"),
           (at(2026, 3), "我刚搬到北京。")],
}
QUESTIONS = {"en": ("Where do I live?", "Where do I work?"),
             "zh": ("我住在哪里？", "我在哪里工作？")}
# as of: (the city, the employer) the user would have said then
EXPECTED = [
    (at(2023, 6), ("Shanghai", "Alibaba"), ("上海", "阿里巴巴")),
    (at(2024, 9), ("Hangzhou", "Alibaba"), ("杭州", "阿里巴巴")),
    (at(2025, 6), ("Hangzhou", "Tencent"), ("杭州", "腾讯")),
    (at(2026, 6), ("Beijing", "Tencent"), ("北京", "腾讯")),
]


@pytest.fixture
def mem(store_section: dict[str, Any], tmp_path: Path,
        embedder: CachedEmbedder) -> Iterator[Memory]:
    raw = {"data_dir": str(tmp_path), **store_section}
    with Memory(MemoryConfig.model_validate(raw), embedder=embedder) as m:
        yield m


def live(mem: Memory, lang: str, uid: str = "u") -> None:
    for when, text in LIFE[lang]:
        reply = "好的" if lang == "zh" else "OK"
        mem.add([{"role": "user", "content": text, "timestamp": when.isoformat()},
                 {"role": "assistant", "content": reply, "timestamp": when.isoformat()}],
                user_id=uid)


def top(mem: Memory, query: str, when: datetime | None) -> str:
    hits = mem.search(query, user_id="u", as_of=when, top_k=1)
    return hits[0].memory.content if hits else ""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_as_of_answers_each_interval(lang: str, mem: Memory) -> None:
    live(mem, lang)
    live(mem, "en" if lang == "zh" else "zh", uid="other")  # never seen by "u"
    where, work = QUESTIONS[lang]
    for when, en, zh in EXPECTED:
        city, employer = en if lang == "en" else zh
        assert city in top(mem, where, when), (when, top(mem, where, when))
        assert employer in top(mem, work, when), (when, top(mem, work, when))
        held = [r.content for r in mem.get_all(user_id="u", as_of=when).items]
        assert len(held) == 2 and any(city in c for c in held) \
            and any(employer in c for c in held), (when, held)
    before = mem.get_all(user_id="u", as_of=at(2022, 6)).items
    assert before == []  # nothing was true before the user said it
    city_now, job_now = EXPECTED[-1][1] if lang == "en" else EXPECTED[-1][2]
    assert city_now in top(mem, where, None) and job_now in top(mem, work, None)
    now = [h.memory for h in mem.search(where, user_id="u", threshold=-1.0, top_k=50)]
    assert all(r.status == MemoryStatus.ACTIVE for r in now)  # no as_of: what holds now


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_correction_ends_the_old_fact_when_it_was_said(lang: str, mem: Memory) -> None:
    live(mem, lang)
    rows = {r.content: r for r in mem.get_all(user_id="u").items}
    first_city = next(r for c, r in rows.items() if ("Shanghai" in c or "上海" in c))
    second_city = next(r for c, r in rows.items() if ("Hangzhou" in c or "杭州" in c))
    assert first_city.status == second_city.status == MemoryStatus.SUPERSEDED
    assert (first_city.valid_since, first_city.valid_to) == (at(2023, 1), at(2024, 6))
    assert (second_city.valid_since, second_city.valid_to) == (at(2024, 6), at(2026, 3))
    chain = [(e.op, e.memory.status if e.memory else None)
             for e in mem.history(first_city.id, user_id="u")]
    assert chain == [("ADD", MemoryStatus.ACTIVE), ("UPDATE", MemoryStatus.SUPERSEDED)]
    section = mem.context(QUESTIONS[lang][0], user_id="u", as_of=at(2025, 1))
    assert f"(2024-06-01) {second_city.content} (until 2026-03-01)" in section


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_as_of_never_returns_a_deleted_memory(lang: str, mem: Memory) -> None:
    live(mem, lang)
    hangzhou = next(r for r in mem.get_all(user_id="u").items
                    if "Hangzhou" in r.content or "杭州" in r.content)
    mem.delete(hangzhou.id, user_id="u")
    when = at(2024, 9)
    held = mem.get_all(user_id="u", as_of=when).items
    assert hangzhou.id not in {r.id for r in held} and len(held) == 1  # the job only
    hits = mem.search(QUESTIONS[lang][0], user_id="u", as_of=when, threshold=-1.0, top_k=50)
    assert hangzhou.id not in {h.memory.id for h in hits}


def test_as_of_must_be_an_aware_time(mem: Memory) -> None:
    for bad in ("last year", datetime(2024, 1, 1), 2024):
        with pytest.raises(InvalidInputError, match="as_of"):
            mem.search("where", user_id="u", as_of=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="as_of"):
            mem.get_all(user_id="u", as_of=bad)  # type: ignore[arg-type]
    assert mem.search("where", user_id="u", as_of="2024-01-01T00:00:00+08:00") == []


def test_as_of_over_rest_and_mcp(tmp_path: Path, embedder: CachedEmbedder) -> None:
    import anyio
    from mcp import Client
    from test_api_http import ALICE, KEYS, Served, auth

    from memray.mcp import build_server

    with Memory(MemoryConfig(data_dir=str(tmp_path)), embedder=embedder) as mem:
        live(mem, "en", uid="alice")
        when = at(2024, 9).isoformat()
        with Served(mem, keys=KEYS) as http:
            r = http.post("/v1/memories/search", headers=auth(ALICE), json={
                "user_id": "alice", "query": "Where do I live?", "top_k": 1, "as_of": when})
            assert r.status_code == 200, r.text
            assert "Hangzhou" in r.json()["results"][0]["memory"]["content"]
            r = http.get("/v1/memories", headers=auth(ALICE),
                         params={"user_id": "alice", "as_of": when})
            assert r.status_code == 200, r.text
            held = " | ".join(sorted(i["content"] for i in r.json()["items"]))
            assert held == "I moved to Hangzhou last week | I work at Alibaba"
            assert all(i["valid_to"] is None or i["valid_to"] > when for i in r.json()["items"])
            r = http.post("/v1/context", headers=auth(ALICE), json={
                "user_id": "alice", "query": "Where do I live?", "as_of": when})
            assert "(until 2026-03-01)" in r.json()["context"]
            r = http.get("/v1/memories", headers=auth(ALICE),
                         params={"user_id": "alice", "as_of": "2024-09-01"})
            assert r.status_code == 422  # no offset: which 2024-09-01?

        async def run() -> None:
            async with Client(build_server(mem), mode="legacy") as client:
                found = await client.call_tool("search_memories", {
                    "user_id": "alice", "query": "Where do I live?", "top_k": 1,
                    "as_of": when})
                (hit,) = found.structured_content["results"]  # type: ignore[index]
                assert "Hangzhou" in hit["content"]
                assert hit["valid_from"].startswith("2024-06-01")
                assert hit["valid_to"].startswith("2026-03-01")
                page = await client.call_tool("get_memories", {"user_id": "alice",
                                                               "as_of": when})
                assert len(page.structured_content["items"]) == 2  # type: ignore[index]

        anyio.run(run)


def test_a_temporary_fact_held_until_it_expired_and_a_candidate_never(mem: Memory) -> None:
    """The nightly job expires a temporary fact and retires an unconfirmed candidate; as_of
    finds the first while it held and the second never."""
    from memray.core.changes import ChangeSet
    from memray.core.records import new_record
    from memray.maintain import writer
    from memray.maintain.plan import MaintenanceSettings, plan_user

    engine, said = mem.engine(), at(2025, 5)
    trip = new_record(user_id="u", content="I am in Tokyo this week", at=said,
                      embedding_model=engine.embedder.model, type=MemoryType.TASK_STATE,
                      expires_at=at(2025, 6), occurred_at=said)
    maybe = new_record(user_id="u", content="I might like opera", at=said,
                       embedding_model=engine.embedder.model, status=MemoryStatus.CANDIDATE,
                       occurred_at=said)
    changes = ChangeSet("u")
    for rec in (trip, maybe):
        changes.put(rec, engine.embedder.embed([rec.content])[0], None, said)
    engine.committer.commit(changes)
    rows = writer.live_rows(engine, "u")
    plan = plan_user("u", rows, at(2026, 1), MaintenanceSettings())
    assert plan.counts["expired"] == 1 and plan.counts["retired"] == 1, plan.counts
    assert writer.commit(engine, plan, {r.record.id: r.vector for r in rows},
                         engine.events.version("u"), Counter())
    assert {r.status for r in mem.get_all(user_id="u").items} == {MemoryStatus.EXPIRED}
    held = mem.get_all(user_id="u", as_of=at(2025, 5) + (at(2025, 6) - at(2025, 5)) / 2)
    assert [r.content for r in held.items] == ["I am in Tokyo this week"]
    assert mem.get_all(user_id="u", as_of=at(2025, 7)).items == []
    hits = mem.search("Where am I this week?", user_id="u", as_of=at(2025, 5),
                      threshold=-1.0, top_k=10)
    assert [h.memory.content for h in hits] == ["I am in Tokyo this week"]

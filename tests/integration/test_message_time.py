"""Messages with their own time and the turn they answer, through `Memory` and REST."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta, timezone
from pathlib import Path

import httpx
import pytest
from test_api_http import ALICE, Served, auth

from memray import Memory, MemoryConfig
from memray.embed.cache import CachedEmbedder
from memray.errors import InvalidInputError
from memray.models import MemoryType

MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def test_verbatim_turns_keep_time_and_reply_across_restart(tmp_path: Path,
                                                           embedder: CachedEmbedder) -> None:
    cfg = MemoryConfig(data_dir=str(tmp_path / "d"))
    convo = [{"role": "assistant", "content": "Which city did you move to? Mail me at a@b.io"},
             {"role": "user", "content": "Lisbon, two weeks ago"},
             {"role": "user", "content": "我养了一只猫", "timestamp": "2024-02-01T08:00:00+08:00"}]
    with Memory(cfg, embedder=embedder) as m:
        result = m.add(convo, user_id="ann", session_id="s1", infer=False, timestamp=MAY_8)
        lisbon, cat = result.memories
        assert lisbon.occurred_at == MAY_8 and lisbon.created_at > MAY_8
        assert lisbon.reply_to.startswith("Which city did you move to?")
        assert "a@b.io" not in lisbon.reply_to  # what is kept of the other turn is redacted
        assert cat.occurred_at == datetime(2024, 2, 1, 0, 0, tzinfo=UTC)
        assert cat.reply_to == ""  # the user's own turns are never copied beside another
        # the answer is found by what it answers, not only by its own words
        m.add("Lisbon, two weeks ago", user_id="solo", infer=False)
        query = "which city did Ann move to"
        (top, _) = m.search(query, user_id="ann", threshold=-1)
        (alone,) = m.search(query, user_id="solo", threshold=-1)
        assert top.memory.id == lisbon.id and top.similarity > alone.similarity + 0.05
    with Memory(cfg, embedder=embedder) as again:  # both fields survive a restart
        got = again.get(lisbon.id, user_id="ann")
        assert got.occurred_at == MAY_8 and got.reply_to == lisbon.reply_to
        assert got.model_dump() == lisbon.model_dump()


def test_reply_context_can_be_turned_off(tmp_path: Path, embedder: CachedEmbedder) -> None:
    cfg = MemoryConfig.model_validate({"data_dir": str(tmp_path / "d"),
                                       "write": {"reply_context_chars": 0}})
    with Memory(cfg, embedder=embedder) as m:
        (rec,) = m.add([{"role": "assistant", "content": "Which city?"},
                        {"role": "user", "content": "Lisbon"}], user_id="ann",
                       infer=False).memories
        assert rec.reply_to == "" and rec.occurred_at is None


def test_extracted_facts_keep_the_rounds_time(tmp_path: Path,
                                              embedder: CachedEmbedder) -> None:
    with Memory(MemoryConfig(data_dir=str(tmp_path / "d")), embedder=embedder) as m:
        facts = m.add([{"role": "user", "content": "I'm allergic to peanuts",
                        "timestamp": "2023-05-08T13:56:00Z"},
                       {"role": "assistant", "content": "Noted."}], user_id="bo").memories
        assert facts and all(f.type != MemoryType.MESSAGE for f in facts)
        assert {f.occurred_at for f in facts} == {MAY_8}
        assert all(f.reply_to == "" for f in facts)


def test_rest_add_with_times(tmp_path: Path, embedder: CachedEmbedder) -> None:
    with Memory(MemoryConfig(data_dir=str(tmp_path / "d")), embedder=embedder) as m, \
            Served(m) as http:
        body = {"user_id": "alice", "infer": False, "timestamp": "2023-05-08T13:56:00Z",
                "messages": [{"role": "assistant", "content": "Favourite tea?", "name": "bot"},
                             {"role": "user", "content": "Oolong"}]}
        r = http.post("/v1/memories", json=body, headers=auth(ALICE))
        assert r.status_code == 200, r.text
        (event,) = r.json()["events"]
        assert event["memory"]["occurred_at"].startswith("2023-05-08T13:56")
        assert event["memory"]["reply_to"] == "bot: Favourite tea?"
        bad = {**body, "timestamp": "last tuesday"}
        r = http.post("/v1/memories", json=bad, headers=auth(ALICE))
        assert r.status_code == 422 and r.json()["error"]
        naive = {**body, "timestamp": "2023-05-08T13:56:00"}  # no zone: refused, not guessed
        assert http.post("/v1/memories", json=naive, headers=auth(ALICE)).status_code == 422


def test_deleting_a_turn_leaves_no_copy_and_forget_reaches_answers(
        tmp_path: Path, embedder: CachedEmbedder) -> None:
    with Memory(MemoryConfig(data_dir=str(tmp_path / "d")), embedder=embedder) as m:
        first, second = m.add([{"role": "user", "content": "I work nine to six"},
                               {"role": "user", "content": "I like jazz"}],
                              user_id="cy", infer=False).memories
        m.delete(first.id, user_id="cy")
        assert "nine" not in str(m.export(user_id="cy"))
        (answer,) = m.add([{"role": "assistant", "content": "How is the diabetes treatment?"},
                           {"role": "user", "content": "Fine, thanks"}],
                          user_id="cy", infer=False).memories
        m.add([{"role": "user", "content": "Forget everything about my diabetes"},
               {"role": "assistant", "content": "Done."}], user_id="cy")
        left = {r.id for r in m.get_all(user_id="cy").items}
        assert answer.id not in left and second.id in left


def test_a_question_that_names_a_date_finds_what_happened_then(
        tmp_path: Path, embedder: CachedEmbedder) -> None:
    # Alike turns that only their message time and what they count from it tell apart:
    # the June trip told on 12 June ("last weekend": 10-11 June), the July one on 20 July
    # ("last Saturday": 15 July).
    june, july = datetime(2023, 6, 12, tzinfo=UTC), datetime(2023, 7, 20, tzinfo=UTC)
    said = [("We went camping by the lake last weekend", june),
            ("We went camping by the lake last Saturday", july),
            ("我们上周末去湖边露营了", june), ("我们上周六去湖边露营了", july)]
    asked = [("When did we go camping by the lake in June?", 0),
             ("When did we go camping by the lake in July 2023?", 1),
             ("Did we camp by the lake on June 10, 2023?", 0),
             ("2023年6月我们去湖边露营了吗", 2), ("2023年7月我们去湖边露营了吗", 3)]
    for w_date in (0.2, 0.0):
        cfg = MemoryConfig.model_validate({"data_dir": str(tmp_path / str(w_date)),
                                           "recall": {"w_date": w_date}})
        with Memory(cfg, embedder=embedder) as m:
            for text, at in said:
                m.add(text, user_id="cam", infer=False, timestamp=at)
            tops = [m.search(q, user_id="cam", threshold=-1)[0].memory.content
                    for q, _ in asked]
        right = [tops[i] == said[want][0] for i, (_, want) in enumerate(asked)]
        if w_date:
            assert all(right), tops
        else:  # the ablation: without the dates the July trip loses to the June one
            assert not right[1], tops


ACTIVITIES = [
    "I went for a run along the river", "I cooked a big pot of chili for friends",
    "I finished reading a novel about sailors", "I fixed the leaking kitchen tap",
    "I visited my grandmother in the hospital", "I played tennis with Sam after work",
    "I painted the fence in the back yard", "I had a job interview at a bank",
    "I took the dog to the vet for a checkup", "I watched a jazz concert downtown",
    "I baked bread with my niece", "I repaired the bike's flat tyre",
    "我去爬了山", "我给妈妈做了红烧肉", "我去医院体检了", "我参加了同学聚会", "我去看了一场话剧",
    "我整理了书房", "我学了一首新曲子", "我带孩子去了动物园"]


def _said_days_ago(m: Memory, user: str, today: date) -> dict[str, int]:
    """One activity a day for the 40 days before `today`, at noon: memory id -> days ago."""
    out = {}
    for back in range(1, 41):
        at = datetime.combine(today - timedelta(days=back), time(12), tzinfo=UTC)
        text = f"{ACTIVITIES[back % len(ACTIVITIES)]} (day {back})"  # no exact repeats
        out[m.add(text, user_id=user, infer=False, timestamp=at).memories[0].id] = back
    return out


ASKED = datetime(2024, 6, 12, 18, 0, tzinfo=UTC)  # a Wednesday
LAST_WEEK = set(range(3, 10))  # Monday 3 to Sunday 9 June: 9 to 3 days before the 12th


def test_a_question_about_last_week_or_yesterday_finds_what_was_said_then(
        tmp_path: Path, embedder: CachedEmbedder) -> None:
    found = {}
    # "store": no hot set, the window is a search filtered to those days in the store
    for run, window_k, hot_set in (("hot", 10, "auto"), ("store", 10, "off"), ("off", 0, "auto")):
        cfg = MemoryConfig.model_validate({"data_dir": str(tmp_path / run), "recall": {
            "window_k": window_k, "hot_set": hot_set}})
        with Memory(cfg, embedder=embedder, clock=lambda: ASKED) as m:
            said = _said_days_ago(m, "kim", ASKED.date())
            found[run] = {q: [said[h.memory.id] for h in m.search(q, user_id="kim")]
                          for q in ("What did I do last week?", "上周我做了什么",
                                    "what did I get up to yesterday",
                                    "what have I done over the past three days?",
                                    "what did I do on Monday?")}
    for run in ("hot", "store"):
        week_en, week_zh, yesterday, three_days, monday = found[run].values()
        assert set(week_en[:7]) == LAST_WEEK, (run, week_en)  # all seven days, first
        # MiniLM cannot read it: keyword matches (做了) from other weeks rank among them
        assert len(LAST_WEEK & set(week_zh)) >= 5, (run, week_zh)
        assert yesterday[0] == 1, (run, yesterday)
        assert set(three_days[:2]) == {1, 2}, (run, three_days)  # the 10th to the 12th
        assert monday[0] == 2, (run, monday)  # asked on Wednesday the 12th
    # the ablation: without the window only what the similarity happens to reach
    assert len(LAST_WEEK & set(found["off"]["What did I do last week?"])) < 7, found["off"]


def test_a_question_counts_from_as_of_when_given(tmp_path: Path,
                                                  embedder: CachedEmbedder) -> None:
    far = datetime(2031, 1, 1, tzinfo=UTC)  # the clock: as_of wins over it
    with Memory(MemoryConfig(data_dir=str(tmp_path / "d")), embedder=embedder,
                clock=lambda: far) as m:
        said = _said_days_ago(m, "kim", datetime.now(UTC).date())
        then = datetime.now(UTC) - timedelta(days=5)  # "yesterday" is 6 days ago
        hits = m.search("what did I get up to yesterday", user_id="kim", as_of=then)
        assert hits and said[hits[0].memory.id] == 6, [said[h.memory.id] for h in hits]
        assert all(said[h.memory.id] >= 5 for h in hits)  # nothing said after `then`
        # an as_of search has no hot set: the week is found by a filtered store search
        monday = then.date() - timedelta(days=then.weekday() + 7)
        week = {(datetime.now(UTC).date() - (monday + timedelta(days=d))).days
                for d in range(7)}
        hits = m.search("What did I do last week?", user_id="kim", as_of=then)
        assert set([said[h.memory.id] for h in hits][:7]) == week, (
            week, [said[h.memory.id] for h in hits])


def test_a_clock_without_a_zone_is_refused(tmp_path: Path, embedder: CachedEmbedder) -> None:
    naive = datetime(2024, 6, 12)  # no zone: refused, not guessed
    with (Memory(MemoryConfig(data_dir=str(tmp_path / "d")), embedder=embedder,
                 clock=lambda: naive) as m,
          pytest.raises(InvalidInputError, match="clock must be a timezone-aware")):
        m.search("what did I do yesterday", user_id="kim")


def test_yesterday_is_read_in_the_configured_zone(tmp_path: Path,
                                                  embedder: CachedEmbedder) -> None:
    # Asked at 07:00 on 12 June in Beijing, which is still 11 June in UTC.
    beijing = timezone(timedelta(hours=8))
    asked_at = datetime(2024, 6, 12, 7, 0, tzinfo=beijing)
    said = [("I went to a pottery class", datetime(2024, 6, 11, 10, 0, tzinfo=beijing)),
            ("I went to a jazz bar with Mei", datetime(2024, 6, 10, 21, 0, tzinfo=beijing))]
    tops = {}
    for zone in ("Asia/Shanghai", "UTC"):
        cfg = MemoryConfig.model_validate({"data_dir": str(tmp_path / zone.replace("/", "-")),
                                           "recall": {"timezone": zone}})
        with Memory(cfg, embedder=embedder, clock=lambda: asked_at) as m:
            for text, at in said:
                m.add(text, user_id="mei", infer=False, timestamp=at)
            hits = m.search("what did I do yesterday?", user_id="mei")
            tops[zone] = [h.memory.content for h in hits]
            if zone == "UTC":  # the user's own zone, per search, over the server's
                beijing_user = m.search("what did I do yesterday?", user_id="mei",
                                        timezone="Asia/Shanghai")
                with pytest.raises(InvalidInputError, match="'Mars/Olympus' is no IANA"):
                    m.search("what did I do yesterday?", user_id="mei",
                             timezone="Mars/Olympus")
    assert tops["Asia/Shanghai"] == [said[0][0]], tops  # 11 June in Beijing
    assert tops["UTC"] == [said[1][0]], tops  # 10 June in UTC: 13:00 UTC that day
    assert [h.memory.content for h in beijing_user] == [said[0][0]]


def test_the_users_zone_over_rest_and_mcp(tmp_path: Path, embedder: CachedEmbedder) -> None:
    import anyio
    from mcp import Client
    from test_api_http import KEYS

    from memray.mcp import build_server

    beijing = timezone(timedelta(hours=8))
    asked_at = datetime(2024, 6, 12, 7, 0, tzinfo=beijing)  # 11 June in UTC
    pottery, jazz = "I went to a pottery class", "I went to a jazz bar with Mei"
    question = {"user_id": "alice", "query": "what did I do yesterday?"}
    with Memory(MemoryConfig(data_dir=str(tmp_path)), embedder=embedder,
                clock=lambda: asked_at) as mem:
        mem.add(pottery, user_id="alice", infer=False,
                timestamp=datetime(2024, 6, 11, 10, 0, tzinfo=beijing))
        mem.add(jazz, user_id="alice", infer=False,
                timestamp=datetime(2024, 6, 10, 21, 0, tzinfo=beijing))
        with Served(mem, keys=KEYS) as http:
            def search(**extra: str) -> httpx.Response:
                return http.post("/v1/memories/search", headers=auth(ALICE),
                                 json={**question, **extra})

            assert [h["memory"]["content"] for h in search().json()["results"]] == [jazz]
            r = search(timezone="Asia/Shanghai")
            assert [h["memory"]["content"] for h in r.json()["results"]] == [pottery], r.text
            r = http.post("/v1/context", headers=auth(ALICE),
                          json={**question, "timezone": "Asia/Shanghai"})
            assert pottery in r.json()["context"] and jazz not in r.json()["context"]
            r = search(timezone="Mars/Olympus")
            assert r.status_code == 422 and "Mars/Olympus" in r.text, r.text

        async def run() -> None:
            async with Client(build_server(mem), mode="legacy") as client:
                found = await client.call_tool("search_memories", {
                    **question, "timezone": "Asia/Shanghai"})
                hits = found.structured_content["results"]  # type: ignore[index]
                assert [h["content"] for h in hits] == [pottery]

        anyio.run(run)

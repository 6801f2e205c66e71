"""The write path through the public API on the embedded default with the rule extractor,
each scenario in English and in Chinese."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memray import Memory, MemoryConfig, MemoryStatus
from memray.embed.cache import CachedEmbedder

EN = {
    "intro": "I'm only free after 9 pm; I like writing scripts in Python",
    "ask_time": "When would suit a deep-work discussion?",
    "correction": "I changed jobs, now 9 to 6, evenings are busy",
    "forget": "Delete everything you remember about my working hours",
    "paraphrases": ["I don't eat cilantro", "I hate cilantro", "No cilantro please"],
    "live": "I live in Shanghai", "moved": "I moved to Hangzhou",
    "ask_city": "Which city do I live in?",
    "pii": "My email is lin.w@example.com and my phone is 138 1234 5678",
    "small_talk": ["hi, how are you?", "thanks, that was helpful!", "What's the weather?"],
}
ZH = {
    "intro": "我平时晚上九点以后才有空，喜欢用 Python 写脚本",
    "ask_time": "什么时候适合进行深度工作讨论？",
    "correction": "我现在换工作了，早九晚六，晚上反而没空了",
    "forget": "把我关于工作时间的记忆全部删掉",
    "paraphrases": ["我不吃香菜", "我讨厌香菜", "别放香菜"],
    "live": "我住在上海", "moved": "我搬到杭州了",
    "ask_city": "我住在哪个城市？",
    "pii": "我的邮箱是 lin.w@example.com，手机号 13812345678",
    "small_talk": ["你好呀", "谢谢，很有帮助！", "今天天气怎么样？"],
}
HOUR_WORDS = ["9 pm", "9 to 6", "evenings", "九点", "早九晚六", "晚上"]


@pytest.fixture(params=["en", "zh"])
def lang(request: pytest.FixtureRequest) -> dict[str, object]:
    return EN if request.param == "en" else ZH


@pytest.fixture
def cfg(tmp_path: Path) -> MemoryConfig:
    return MemoryConfig(data_dir=str(tmp_path / "d"))


@pytest.fixture
def mem(cfg: MemoryConfig, embedder: CachedEmbedder) -> Iterator[Memory]:
    with Memory(cfg, embedder=embedder) as m:
        yield m


def say(m: Memory, user: str, text: str, session: str = "s1") -> list[tuple[str, str]]:
    result = m.add([{"role": "user", "content": text},
                    {"role": "assistant", "content": "OK."}], user_id=user, session_id=session)
    return [(e.op, (e.memory or e.previous).content) for e in result.events]  # type: ignore[union-attr]


def active(m: Memory, user: str, slot: str | None = None) -> list[str]:
    return [r.content for r in m.get_all(user_id=user).items
            if r.status == MemoryStatus.ACTIVE and (slot is None or r.slot == slot)]


def test_cross_session_recall(lang: dict, cfg: MemoryConfig, embedder: CachedEmbedder) -> None:  # type: ignore[type-arg]
    with Memory(cfg, embedder=embedder) as first:
        ops = say(first, "lin", lang["intro"])
        assert [op for op, _ in ops] == ["ADD", "ADD"]
    with Memory(cfg, embedder=embedder) as second:  # a new session after a restart
        hits = second.search(lang["ask_time"], user_id="lin")
        assert hits and hits[0].memory.slot == "availability"
        assert hits[0].memory.content == lang["intro"].split(";")[0].split("，")[0]
        assert "availability" in [h.memory.slot for h in hits]
        section = second.context(lang["ask_time"], user_id="lin")
        assert hits[0].memory.content in section


def test_correction_leaves_one_active_availability(lang: dict, mem: Memory) -> None:  # type: ignore[type-arg]
    say(mem, "lin", lang["intro"])
    ops = say(mem, "lin", lang["correction"], session="s2")
    assert ("UPDATE", lang["intro"].split(";")[0].split("，")[0]) in ops
    assert len(active(mem, "lin", "availability")) == 1
    records = mem.get_all(user_id="lin").items
    old = [r for r in records if r.slot == "availability" and r.status == "superseded"]
    assert len(old) == 1
    assert [e.op for e in mem.history(old[0].id, user_id="lin")] == ["ADD", "UPDATE"]
    hits = mem.search(lang["ask_time"], user_id="lin", threshold=-1, top_k=20)
    assert old[0].id not in [h.memory.id for h in hits]  # superseded is never recalled


def test_forgetting_is_complete_and_final(lang: dict, cfg: MemoryConfig,  # type: ignore[type-arg]
                                          embedder: CachedEmbedder) -> None:
    with Memory(cfg, embedder=embedder) as m:
        say(m, "lin", lang["intro"])
        say(m, "lin", lang["correction"], session="s2")
        ops = say(m, "lin", lang["forget"], session="s3")
        assert [op for op, _ in ops] == ["DELETE", "DELETE"]
        _assert_no_hours(m)
        assert active(m, "lin", "availability") == []
        assert any("Python" in c for c in active(m, "lin"))  # the rest stays
    with Memory(cfg, embedder=embedder) as again:  # nor after a restart
        _assert_no_hours(again)


def _assert_no_hours(m: Memory) -> None:
    dump = str(list(m.export(user_id="lin")))
    for word in HOUR_WORDS:
        assert word not in dump, word
    for hit in m.search("when am I free in the evening 晚上", user_id="lin", threshold=-1,
                        top_k=50):
        assert all(w not in hit.memory.content for w in HOUR_WORDS)
        for event in m.history(hit.memory.id, user_id="lin"):
            assert all(w not in event.model_dump_json() for w in HOUR_WORDS)


def test_paraphrases_collapse_to_one_memory(lang: dict, mem: Memory) -> None:  # type: ignore[type-arg]
    for i, text in enumerate(lang["paraphrases"]):
        say(mem, "lin", text, session=f"s{i}")
    kept = active(mem, "lin")
    assert kept == [lang["paraphrases"][0]]
    record = mem.get_all(user_id="lin").items[0]
    assert len(record.source_turn_ids) == 3  # each mention confirmed it


def test_moving_updates_the_city(lang: dict, mem: Memory) -> None:  # type: ignore[type-arg]
    say(mem, "lin", lang["live"])
    say(mem, "lin", lang["moved"], session="s2")
    assert active(mem, "lin", "city") == [lang["moved"]]
    assert mem.search(lang["ask_city"], user_id="lin")[0].memory.content == lang["moved"]


def test_pii_is_never_stored(lang: dict, mem: Memory) -> None:  # type: ignore[type-arg]
    say(mem, "lin", lang["pii"])
    mem.add(lang["pii"], user_id="lin", infer=False)
    dump = str(list(mem.export(user_id="lin")))
    assert "lin.w@example.com" not in dump
    assert "1234 5678" not in dump and "13812345678" not in dump


def test_pii_never_reaches_the_logs(mem: Memory, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")
    say(mem, "lin", "I live at 221 Baker Street, email me at lin.w@example.com")
    assert "example.com" not in caplog.text and "Baker" not in caplog.text


def test_small_talk_is_not_stored(lang: dict, mem: Memory) -> None:  # type: ignore[type-arg]
    for text in lang["small_talk"]:
        assert say(mem, "lin", text) == []
    assert mem.get_all(user_id="lin").items == []


def test_another_user_saying_the_same_never_touches_the_first(
        lang: dict, mem: Memory) -> None:  # type: ignore[type-arg]
    say(mem, "alice", lang["intro"])
    before = {r.id: r for r in mem.get_all(user_id="alice").items}
    say(mem, "bob", lang["intro"])
    say(mem, "bob", lang["correction"])
    say(mem, "bob", lang["forget"])
    assert {r.id: r for r in mem.get_all(user_id="alice").items} == before
    assert mem.version(user_id="alice") == 1


def test_trigger_waits_for_the_round_unless_urgent(mem: Memory) -> None:
    first = mem.add([{"role": "user", "content": "I like green tea"}], user_id="u",
                    session_id="s")
    assert first.events == [] and first.pending_turns == 1
    done = mem.add([{"role": "assistant", "content": "Nice."}], user_id="u", session_id="s")
    assert [e.op for e in done.events] == ["ADD"] and done.pending_turns == 0
    urgent = mem.add([{"role": "user", "content": "I moved to Hangzhou"}], user_id="u",
                     session_id="s")
    assert [e.op for e in urgent.events] == ["ADD"]


def test_every_n_turns_and_flush(tmp_path: Path, embedder: CachedEmbedder) -> None:
    cfg = MemoryConfig.model_validate({"data_dir": str(tmp_path),
                                       "write": {"extract_every_n_turns": 3}})
    with Memory(cfg, embedder=embedder) as m:
        for text in ("I like tea", "I like jazz"):
            assert m.add([{"role": "user", "content": text}], user_id="u",
                         session_id="s").events == []
        third = m.add([{"role": "user", "content": "I like chess"}], user_id="u",
                      session_id="s")
        assert sorted(e.memory.content for e in third.events if e.memory) == [
            "I like chess", "I like jazz", "I like tea"]
        m.add([{"role": "user", "content": "I love hiking"}], user_id="u", session_id="s")
        assert [e.op for e in m.flush(user_id="u", session_id="s").events] == ["ADD"]


def test_pending_turns_survive_a_restart(cfg: MemoryConfig, embedder: CachedEmbedder) -> None:
    with Memory(cfg, embedder=embedder) as m:
        m.add([{"role": "user", "content": "I like green tea"}], user_id="u", session_id="s")
    with Memory(cfg, embedder=embedder) as m:
        done = m.add([{"role": "assistant", "content": "Nice."}], user_id="u", session_id="s")
        assert [e.memory.content for e in done.events if e.memory] == ["I like green tea"]


def test_consent_levels(mem: Memory) -> None:
    assert mem.add("I like tea", user_id="u", consent=0).events == []
    session_only = mem.add("I like coffee", user_id="u", session_id="s", consent=1)
    assert [e.op for e in session_only.events] == ["ADD"]
    assert mem.get_all(user_id="u").items == []
    assert [r.content for r in mem.session_memories(user_id="u", session_id="s")] == [
        "I like coffee"]
    assert "(this session) I like coffee" in mem.context("drinks", user_id="u", session_id="s")
    mem.add("I like juice", user_id="u", consent=2)
    assert active(mem, "u") == ["I like juice"]
    with pytest.raises(ValueError):
        mem.add("x", user_id="u", consent=3)


def test_task_state_expires_in_a_week(mem: Memory) -> None:
    say(mem, "u", "I'm working on a tax report due Friday")
    record = mem.get_all(user_id="u").items[0]
    assert record.expires_at is not None
    assert (record.expires_at - record.created_at).days == 7


def test_long_assistant_replies_are_context_not_errors(mem: Memory) -> None:
    result = mem.add([{"role": "user", "content": "I like tea"},
                      {"role": "assistant", "content": "Tea facts. " * 1000}], user_id="u")
    assert [e.memory.content for e in result.events if e.memory] == ["I like tea"]
    with pytest.raises(ValueError):
        mem.add([{"role": "user", "content": "x" * 2001}], user_id="u")


def test_concurrent_rounds_of_one_user_do_not_duplicate(mem: Memory) -> None:
    import threading

    def send() -> None:
        mem.add([{"role": "user", "content": "I like green tea"}], user_id="u", session_id="s")
        mem.add([{"role": "assistant", "content": "ok"}], user_id="u", session_id="s")

    threads = [threading.Thread(target=send) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert active(mem, "u") == ["I like green tea"]


def test_consent_one_verbatim_stays_in_the_session(mem: Memory) -> None:
    result = mem.add("I like tea", user_id="u", session_id="s", consent=1, infer=False)
    assert [e.op for e in result.events] == ["ADD"]
    assert mem.get_all(user_id="u").items == []
    assert [r.content for r in mem.session_memories(user_id="u", session_id="s")] == [
        "I like tea"]


SCOPED_FORGETS = {
    "en": ("I'm only free after 9 pm; I like writing scripts in Python",
           ["Delete all of your memories about my working hours",
            "Please erase everything you know about my schedule"],
           ["forget everything you know about me", "Please wipe all of your memories"]),
    "zh": ("我平时晚上九点以后才有空，喜欢用 Python 写脚本",
           ["删掉我关于工作时间的所有记忆", "把我作息相关的记忆全部清空"],
           ["把关于我的记忆全部删掉", "忘掉你关于我的一切"]),
}


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("which", [0, 1])
def test_a_forget_that_names_a_topic_deletes_only_that_topic(
        language: str, which: int, mem: Memory) -> None:
    intro, scoped, _ = SCOPED_FORGETS[language]
    say(mem, "lin", intro)
    mem.add("I have a cat named Miso", user_id="lin", infer=False)
    ops = say(mem, "lin", scoped[which], session="s2")
    assert [op for op, _ in ops] == ["DELETE"]
    assert active(mem, "lin", "availability") == []
    kept = active(mem, "lin")
    assert any("Python" in c for c in kept) and "I have a cat named Miso" in kept


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("which", [0, 1])
def test_forget_everything_needs_a_request_without_a_topic(
        language: str, which: int, mem: Memory) -> None:
    intro, _, everything = SCOPED_FORGETS[language]
    say(mem, "lin", intro)
    mem.add("I have a cat named Miso", user_id="lin", infer=False)
    say(mem, "bob", intro)
    say(mem, "lin", everything[which], session="s2")
    assert active(mem, "lin") == []
    assert len(active(mem, "bob")) == 2  # another user's memories are untouched


def test_a_forget_reaches_verbatim_memories_by_topic_and_by_words(mem: Memory) -> None:
    for text in ("I work from 9 to 6 on weekdays", "My cat Miso is three", "I like tea"):
        mem.add(text, user_id="u", infer=False)
    say(mem, "u", "forget my working hours")
    assert sorted(active(mem, "u")) == ["I like tea", "My cat Miso is three"]
    say(mem, "u", "please delete all your memories about my cat")
    assert active(mem, "u") == ["I like tea"]


@pytest.mark.parametrize(("private", "word"), [
    ("I secretly love collecting vintage stamps", "vintage stamps"),
    ("我偷偷喜欢收集老邮票", "收集老邮票"),
])
def test_consent_one_never_touches_disk_nor_persistent_memory(
        private: str, word: str, cfg: MemoryConfig, embedder: CachedEmbedder) -> None:
    with Memory(cfg, embedder=embedder) as m:
        # A consent-1 user turn without an assistant turn: it waits, in process only.
        waiting = m.add([{"role": "user", "content": private}], user_id="u",
                        session_id="s", consent=1)
        assert waiting.pending_turns == 1
        # The next consent-2 round of the same session must not extract it.
        m.add([{"role": "user", "content": "I like green tea"},
               {"role": "assistant", "content": "Noted."}], user_id="u", session_id="s",
              consent=2)
        assert active(m, "u") == ["I like green tea"]
        _assert_not_on_disk(Path(cfg.data_dir), word)
        # Its own round completes at consent 1: session memory, still nothing on disk.
        done = m.add([{"role": "assistant", "content": "OK."}], user_id="u", session_id="s",
                     consent=1)
        assert [e.op for e in done.events] == ["ADD"]
        assert [r.content for r in m.session_memories(user_id="u", session_id="s")] == [
            private]
        m.flush(user_id="u", session_id="s")
        assert active(m, "u") == ["I like green tea"]
        _assert_not_on_disk(Path(cfg.data_dir), word)
    _assert_not_on_disk(Path(cfg.data_dir), word)


def _assert_not_on_disk(root: Path, word: str) -> None:
    needle = word.encode("utf-8")
    files = [p for p in root.rglob("*") if p.is_file()]
    assert files  # the store and the event log are there
    for path in files:
        assert needle not in path.read_bytes(), path


@pytest.mark.parametrize(("first", "second"), [
    ("我不吃香菜", "我讨厌香菜味的东西"),
    ("I hate cilantro", "I can't stand the taste of cilantro")])
def test_paraphrases_with_different_words_keep_one_memory(
        first: str, second: str, mem: Memory) -> None:
    say(mem, "u", first)
    say(mem, "u", second, session="s2")
    assert active(mem, "u") == [first]


@pytest.mark.parametrize(("before", "after"), [
    ("Every morning I go for a run", "I now swim every morning instead"),
    ("我每天早上跑步", "我现在每天早上游泳"),
    ("We live in Shanghai", "We've relocated to Lisbon")])
def test_a_routine_or_a_plural_move_replaces_the_old_one(
        before: str, after: str, mem: Memory) -> None:
    say(mem, "u", before)
    ops = say(mem, "u", after, session="s2")
    assert ("UPDATE", before) in ops
    assert active(mem, "u") == [after]


@pytest.mark.parametrize("text", ["I think maybe I like jazz, not sure", "我好像有点喜欢爵士"])
def test_hedged_statements_enter_on_probation(text: str, mem: Memory) -> None:
    say(mem, "u", text)
    (record,) = mem.get_all(user_id="u").items
    assert record.status == MemoryStatus.CANDIDATE
    assert mem.search("music", user_id="u", threshold=-1) == []  # not recalled yet


@pytest.mark.parametrize(("text", "core"), [
    ("我是一名护士在市中心那家专门给孩子看病的儿童医院照顾住院的小朋友们已经整整十年了而且"
     "每个周末都会去社区做健康讲座", "我是一名护士"),
    ("I work as a nurse at the children's hospital downtown " + "where I look after the "
     "little patients and their worried parents " * 4, "I work as a nurse")])
def test_an_overlong_fact_is_kept_cut_to_its_core(text: str, core: str, mem: Memory) -> None:
    say(mem, "u", text)
    (content,) = active(mem, "u")
    assert content.startswith(core) and len(content) < len(text)


def test_an_embedder_dim_that_differs_from_the_model_is_an_error(tmp_path: Path) -> None:
    from memray.errors import ConfigError

    cfg = MemoryConfig.model_validate({"data_dir": str(tmp_path), "embedder": {"dim": 768}})
    with pytest.raises(ConfigError, match=r"768.*all-MiniLM-L6-v2.*384"):
        Memory(cfg).open()

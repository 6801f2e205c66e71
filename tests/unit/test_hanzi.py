"""Traditional Chinese is read as Simplified (memray/hanzi.py) and kept as written."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memray import Memory, MemoryConfig
from memray.bench.traditional import traditional
from memray.core import entities, intent, lexical, policies, when
from memray.core.resolve import forgotten
from memray.embed.hashing import HashingEmbedder
from memray.extract.base import Turn
from memray.extract.rules import RuleExtractor
from memray.hanzi import _table, simplified

DATA = Path(__file__).parents[1] / "data"


def _zh_texts() -> list[str]:
    texts = []
    for path in [*DATA.glob("relevance/*.jsonl"), *DATA.glob("extraction/*.jsonl"),
                 *DATA.glob("names/*.json*")]:
        if not path.stem.endswith("_tw"):  # the sets written in Traditional
            texts.append(path.read_text(encoding="utf-8"))
    return texts


def test_simplified_text_is_left_as_it_is() -> None:
    """No character of the repository's Simplified data is taken for a Traditional one."""
    texts = _zh_texts()
    assert sum(len(t) for t in texts) > 100_000
    for text in texts:
        assert simplified(text) == text


def test_each_traditional_character_becomes_one_simplified_one() -> None:
    said = "我對花生過敏，上週搬到臺北，為了工作；爲此喫了不少苦。"
    read = simplified(said)
    assert read == "我对花生过敏，上周搬到台北，为了工作；为此吃了不少苦。"
    assert len(read) == len(said)
    assert simplified("什么 么") == "什么 么"  # a regional variant map never reaches it
    assert simplified("I like jazz") == "I like jazz"


def _user_turns(lang: str) -> list[str]:
    rows = [json.loads(line) for line in
            (DATA / "extraction/conversations.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    return [r["turn"] for r in rows if r["lang"] == lang]


def test_the_rules_read_traditional_as_they_read_simplified_and_keep_what_was_said() -> None:
    rules, kept = RuleExtractor(), 0
    for text in _user_turns("zh"):
        written = traditional(text)
        simp = rules.extract([Turn("s:0", "user", text)], []).facts
        trad = rules.extract([Turn("s:0", "user", written)], []).facts
        assert [(f.slot, f.type) for f in trad] == [(f.slot, f.type) for f in simp], written
        for a, b in zip(trad, simp, strict=True):
            assert simplified(a.content) == simplified(b.content), written
            if b.content in text:  # a clause of what was said: kept as it was written
                assert a.content in written, (a.content, written)
        kept += len(trad)
    assert kept >= 50  # the set's Chinese turns do state facts


def test_forgets_corrections_and_pii_in_traditional() -> None:
    rules = RuleExtractor()
    forget = rules.extract([Turn("s:0", "user", "忘掉我對花生過敏的事")], [])
    assert forget.forgets and not forget.facts
    assert rules.is_urgent("我現在搬到高雄了")
    assert policies.redact("我的銀行卡號是 6222 0000 1111 2222，別記") == \
        "我的銀行卡號是 [redacted:bank_card]，別記"
    assert policies.pii_kinds("我住在中山路88號") == ["street_address"]


def test_topics_keywords_dates_and_names_in_traditional() -> None:
    assert intent.query_topics("我對什麼過敏？") == intent.query_topics("我对什么过敏？")
    assert lexical.tokens("我喜歡爵士樂") == lexical.tokens("我喜欢爵士乐")
    at = datetime(2026, 3, 10, tzinfo=UTC)
    assert when.asked("上週我做了什麼？", at) == when.asked("上周我做了什么？", at) != []
    assert when.happened("我上個月去了東京", at) == when.happened("我上个月去了东京", at)
    assert when.asks_when("你什麼時候有空？")
    names = entities.Names(["我同事小張說週五聚餐", "我喜歡爵士樂"])
    assert names.share(names.named("小張說了什麼？"), 2).tolist() == [1.0, 0.0]
    assert names.share(names.named("小张说了什么？"), 2).tolist() == [1.0, 0.0]


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    return Memory(MemoryConfig(data_dir=str(tmp_path)), embedder=HashingEmbedder(dim=64))


def test_a_traditional_user_is_remembered_and_found_in_either_script(memory: Memory) -> None:
    with memory as m:
        events = m.add([{"role": "user", "content": "我對花生過敏。我喜歡爵士樂。"},
                        {"role": "assistant", "content": "好的"}], user_id="tw").events
        assert sorted(e.memory.content for e in events if e.memory) == ["我喜歡爵士樂",
                                                                        "我對花生過敏"]
        for query in ("我對什麼過敏？", "我对什么过敏？"):
            assert [h.memory.content for h in m.search(query, user_id="tw")][:1] == \
                ["我對花生過敏"], query
        m.add([{"role": "user", "content": "忘掉我對花生過敏的事"},
               {"role": "assistant", "content": "好"}], user_id="tw")
        assert [r.content for r in m.get_all(user_id="tw").items
                if r.status.value == "active"] == ["我喜歡爵士樂"]


def test_a_forget_by_words_reaches_a_memory_written_in_traditional(memory: Memory) -> None:
    with memory as m:
        m.add("我在自學日文", user_id="tw", infer=False)  # verbatim: no slot
        m.add("我喜歡爵士樂", user_id="tw", infer=False)
        m.add([{"role": "user", "content": "學日文那件事麻煩從你的記憶裡拿掉"},
               {"role": "assistant", "content": "好"}], user_id="tw")
        assert [r.content for r in m.get_all(user_id="tw").items
                if r.status.value == "active"] == ["我喜歡爵士樂"]


def test_the_simplified_standard_stays_and_every_fold_is_final_and_in_the_bmp() -> None:
    kept_anyway = set("後於夥麽徵菸")  # Simplified keeps them for surnames and old words
    for b1 in range(0xB0, 0xF8):  # GB2312's Han rows
        for b2 in range(0xA1, 0xFF):
            try:
                char = bytes([b1, b2]).decode("gb2312")
            except UnicodeDecodeError:
                continue
            assert simplified(char) == char or char in kept_anyway, char
    assert simplified("乾隆 哪吒") == "乾隆 哪吒"
    assert simplified("以後 關於 三天後") == "以后 关于 三天后"
    table = _table()
    assert all(ord(target) <= 0xFFFF for target in table.values())  # 暐 is not 𬀩
    assert all(simplified(simplified(chr(c))) == simplified(chr(c)) for c in table)


def test_a_slot_stored_unfolded_is_still_reached_by_a_forget() -> None:
    forget = RuleExtractor().extract([Turn("s:0", "user", "忘掉我喜歡爵士樂")], []).forgets[0]
    assert forgotten("like:爵士樂", "我喜歡爵士樂", forget)

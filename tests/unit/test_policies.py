from __future__ import annotations

from datetime import timedelta

import pytest

from memray.core import policies
from memray.extract.base import Fact
from memray.models import MemorySource, MemoryStatus, MemoryType, utcnow


@pytest.mark.parametrize(("text", "kind"), [
    ("my email is a.b+x@example.co.uk", "email"),
    ("身份证号 11010519491231002X", "cn_id"),
    ("手机13812345678", "phone"),
    ("call me at +86 138 1234 5678", "phone"),
    ("(415) 555-2671", "phone"),
    ("card 4111 1111 1111 1111", "bank_card"),
    ("I live at 221 Baker Street", "street_address"),
    ("我住在文三路398号", "street_address"),
])
def test_pii_is_found_and_redacted(text: str, kind: str) -> None:
    assert kind in policies.pii_kinds(text)
    redacted = policies.redact(text)
    assert f"[redacted:{kind}]" in redacted
    assert policies.pii_kinds(redacted) == ["redacted"]


@pytest.mark.parametrize("text", ["I like tea", "早九晚六", "I'm only free after 9 pm",
                                  "order 1234567890123 arrived", "I moved to Hangzhou in 2023"])
def test_ordinary_text_is_not_pii(text: str) -> None:
    assert policies.pii_kinds(text) == []
    assert policies.redact(text) == text


def fact(content: str, **kw: object) -> Fact:
    base: dict[str, object] = {"type": MemoryType.FACT, "importance": 0.5, "confidence": 0.9}
    return Fact(content=content, **(base | kw))  # type: ignore[arg-type]


def test_admit_drops_pii_and_overlong_facts_without_echoing_them() -> None:
    assert policies.admit(fact("I like tea")) is None
    reason = policies.admit(fact("my email is a@b.cn"))
    assert reason == "pii:email" and "a@b.cn" not in reason
    assert policies.admit(fact("字" * 51)) == "too_long"
    assert policies.admit(fact("字" * 50)) is None
    assert policies.admit(fact("x" * 201)) == "too_long"


def test_probation_and_lifetimes() -> None:
    now = utcnow()
    assert policies.initial_status(fact("a")) == MemoryStatus.ACTIVE
    assert policies.initial_status(fact("a", confidence=0.4)) == MemoryStatus.CANDIDATE
    assert policies.initial_status(fact("a", source=MemorySource.INFERRED)) == \
        MemoryStatus.CANDIDATE
    assert policies.expires_at(MemoryType.TASK_STATE, MemoryStatus.ACTIVE, now) == \
        now + timedelta(days=7)
    assert policies.expires_at(MemoryType.FACT, MemoryStatus.CANDIDATE, now) == \
        now + timedelta(days=30)
    assert policies.expires_at(MemoryType.IDENTITY, MemoryStatus.ACTIVE, now) is None
    assert policies.expires_at(MemoryType.CONSTRAINT, MemoryStatus.ACTIVE, now) is None


def test_an_overlong_fact_is_cut_to_its_core_not_dropped() -> None:
    from memray.core.policies import MAX_FACT_WEIGHT, fit, weighted_length
    from memray.extract.base import Fact
    from memray.models import MemoryType

    long_en = ("I work as a nurse at the children's hospital, " +
               "and on weekends I volunteer at the animal shelter near the river " * 4)
    long_zh = "我在一家儿童医院做护士，" + "周末还会去河边的动物收容所做志愿者帮忙照顾小猫小狗" * 3
    for text, core in ((long_en, "I work as a nurse at the children's hospital"),
                       (long_zh, "我在一家儿童医院做护士")):
        fitted = fit(Fact(content=text, type=MemoryType.IDENTITY, importance=0.8,
                          confidence=0.9))
        assert weighted_length(fitted.content) <= MAX_FACT_WEIGHT
        assert fitted.content.startswith(core)
    short = Fact(content="I like tea", type=MemoryType.PREFERENCE, importance=0.5,
                 confidence=0.9)
    assert fit(short) is short

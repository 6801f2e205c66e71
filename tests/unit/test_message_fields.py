"""Messages carry their own time and the turn they answer (normalize, index text, spread)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from memray.core.messages import normalize, parse_time
from memray.core.ranking import spread
from memray.errors import InvalidInputError
from memray.models import MemoryRecord, MemoryType, SearchHit, message_index_text


def test_timestamp_forms_and_defaults() -> None:
    msgs = normalize([{"role": "user", "content": "a", "timestamp": "2023-05-08T13:56:00Z"},
                      {"role": "assistant", "content": "b"},
                      {"role": "user", "content": "c", "timestamp": 1683554160}],
                     max_messages=10, timestamp=datetime(2020, 1, 1))
    assert msgs[0].timestamp == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert msgs[1].timestamp == datetime(2020, 1, 1, tzinfo=UTC)  # the call's, naive = UTC
    assert msgs[2].timestamp == datetime.fromtimestamp(1683554160, UTC)
    east = datetime(2023, 5, 8, 21, 0, tzinfo=timezone(timedelta(hours=8)))
    assert parse_time(east, "t") == datetime(2023, 5, 8, 13, 0, tzinfo=UTC)
    assert normalize("hi", max_messages=1)[0].timestamp is None


@pytest.mark.parametrize("bad", ["yesterday", "2023-13-01", True, [2023], float("inf")])
def test_bad_timestamps_are_clear_errors(bad: object) -> None:
    with pytest.raises(InvalidInputError, match="timestamp"):
        normalize([{"role": "user", "content": "a", "timestamp": bad}], max_messages=1)


def test_reply_to_defaults_to_the_other_partys_previous_turn() -> None:
    msgs = normalize([{"role": "assistant", "content": "Which city?", "name": "bot"},
                      {"role": "user", "content": "Paris"},
                      {"role": "user", "content": "I work nine to six"},
                      {"role": "user", "content": "since May", "reply_to": "When?"}],
                     max_messages=5)
    assert msgs[0].reply_to is None
    assert msgs[1].reply_to == "bot: Which city?"
    assert msgs[2].reply_to is None  # the user's own turn is a memory: never copied
    assert msgs[3].reply_to == "When?"
    with pytest.raises(InvalidInputError, match="reply_to"):
        normalize([{"role": "user", "content": "a", "reply_to": 3}], max_messages=1)
    with pytest.raises(InvalidInputError, match="optional"):
        normalize([{"role": "user", "content": "a", "when": 3}], max_messages=1)


def _record(content: str, *, kind: MemoryType = MemoryType.MESSAGE, session: str | None = None,
            at: datetime | None = None, reply: str = "") -> MemoryRecord:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return MemoryRecord(id=content, user_id="u", type=kind, content=content, created_at=now,
                        updated_at=now, last_confirmed_at=now, embedding_model="m",
                        content_hash=content, session_id=session, occurred_at=at,
                        reply_to=reply)


def test_index_text_of_messages_and_facts() -> None:
    at = datetime(2023, 5, 8, tzinfo=UTC)
    assert message_index_text("Paris", at, "Which city?") == \
        "[8 May 2023] Paris (replying to: Which city?)"
    assert message_index_text("在巴黎", at, "") == "[2023年5月8日] 在巴黎"
    assert _record("Paris", at=at, reply="Which city?").index_text.startswith("[8 May 2023]")
    # an extracted fact stands on its own: its vector is its content's
    assert _record("Lives in Paris", kind=MemoryType.FACT, at=at).index_text == "Lives in Paris"
    assert _record("plain").index_text == "plain"


def test_spread_over_sessions() -> None:
    hits = [SearchHit(memory=_record(c, session=s), score=sc, similarity=sc)
            for c, s, sc in [("a1", "A", 0.50), ("a2", "A", 0.49), ("a3", "A", 0.48),
                             ("b1", "B", 0.47), ("n1", None, 0.44)]]
    assert [h.memory.content for h in spread(hits, 0.0, 3)] == ["a1", "a2", "a3"]
    # a2 pays 0.03 for a1 (0.46 < b1), a3 0.06 (0.42 < n1, which never pays)
    assert [h.memory.content for h in spread(hits, 0.03, 4)] == ["a1", "b1", "a2", "n1"]
    assert [h.score for h in spread(hits, 0.03, 2)] == [0.50, 0.47]  # scores unchanged

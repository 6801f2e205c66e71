from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memray.bench.locomo import Scores, evidence_ids, session_time, sessions


def test_recall_all_and_mrr_by_hand() -> None:
    s = Scores()
    hits = [("D1:1",), ("D1:2", "D1:3"), ("D2:1",)]
    s.add(hits, {"D1:3", "D2:1"}, (1, 2, 3))
    s.add(hits, {"D9:9"}, (1, 2, 3))
    out = s.summary((1, 2, 3))
    assert out["n"] == 2
    assert out["recall@1"] == 0.0
    assert out["recall@2"] == pytest.approx(0.25)  # half of q1, none of q2
    assert out["recall@3"] == pytest.approx(0.5)
    assert out["all@3"] == pytest.approx(0.5)
    assert out["mrr"] == pytest.approx((1 / 2 + 0) / 2)
    assert out["returned"] == 3.0  # hits per question


def test_dataset_shapes() -> None:
    assert evidence_ids({"evidence": ["D1:3; D1:4", "D2:1"]}) == {"D1:3", "D1:4", "D2:1"}
    conv = {"conversation": {"session_2": [{"speaker": "A", "dia_id": "D2:1", "text": "b"}],
                             "session_1": [{"speaker": "B", "dia_id": "D1:1", "text": "a",
                                            "blip_caption": "a cat"}],
                             "session_1_date_time": "1:56 pm on 8 May, 2023"},
            "observation": {"session_1_observation": {"B": [["B has a cat", ["D1:1"]]]}}}
    assert sessions(conv, "turns") == [
        ("session_1", datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
         [(("D1:1",), "B: a [shares a photo: a cat]")]),
        ("session_2", None, [(("D2:1",), "A: b")])]
    assert sessions(conv, "observations") == [("observations", None,
                                                [(("D1:1",), "B has a cat")])]


def test_session_times() -> None:
    assert session_time("1 May 2023") == datetime(2023, 5, 1, tzinfo=UTC)
    assert session_time("10:04 am on 19 January, 2024") == datetime(2024, 1, 19, 10, 4,
                                                                    tzinfo=UTC)
    assert session_time("someday") is None


def test_session_level_recall() -> None:
    s = Scores()
    s.add([("D1:1",), ("D2:7",)], {"D2:1", "D3:1"}, (1, 2))  # D2 is an evidence session
    out = s.summary((1, 2))
    assert out["session@1"] == 0.0 and out["session@2"] == 1.0
    assert out["recall@2"] == 0.0


def test_cv_grid_points_are_set_on_top_of_the_base_config() -> None:
    from memray.bench.locomo_cv import _config

    base = {"embedder": {"model": "use-multilingual-v3"}, "recall": {"w_when": 0.1}}
    got = _config({"recall.w_episode": 0.3, "write.reply_context_chars": 150}, base)
    assert got == {"embedder": {"model": "use-multilingual-v3"},
                   "recall": {"w_when": 0.1, "w_episode": 0.3},
                   "write": {"reply_context_chars": 150}}
    assert base["recall"] == {"w_when": 0.1}  # the base is not changed
    assert _config({}, None) == {}

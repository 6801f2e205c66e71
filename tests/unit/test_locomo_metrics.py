from __future__ import annotations

import pytest

from memray.bench.locomo import Scores, evidence_ids, memories


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


def test_dataset_shapes() -> None:
    assert evidence_ids({"evidence": ["D1:3; D1:4", "D2:1"]}) == {"D1:3", "D1:4", "D2:1"}
    conv = {"conversation": {"session_2": [{"speaker": "A", "dia_id": "D2:1", "text": "b"}],
                             "session_1": [{"speaker": "B", "dia_id": "D1:1", "text": "a",
                                            "blip_caption": "a cat"}],
                             "session_1_date_time": "x"},
            "observation": {"session_1_observation": {"B": [["B has a cat", ["D1:1"]]]}}}
    assert memories(conv, "turns") == [(("D1:1",), "B: a [shares a photo: a cat]"),
                                       (("D2:1",), "A: b")]
    assert memories(conv, "observations") == [(("D1:1",), "B has a cat")]

"""`memray bench locomo` end to end on a tiny LoCoMo-shaped file with the real model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memray.bench.locomo import LocomoArgs, run, table
from memray.embed.cache import CachedEmbedder


def test_tiny_conversation(tmp_path: Path, embedder: CachedEmbedder) -> None:
    turns = [("D1:1", "Ann", "I adopted a golden retriever named Max last week."),
             ("D1:2", "Bo", "That's lovely! I just started learning the violin."),
             ("D1:3", "Ann", "My sister moved to Lisbon for a new job.")]
    data = [{"sample_id": "conv-x",
             "conversation": {"speaker_a": "Ann", "speaker_b": "Bo",
                              "session_1_date_time": "1 May 2023",
                              "session_1": [{"speaker": s, "dia_id": d, "text": t}
                                            for d, s, t in turns]},
             "observation": {"session_1_observation": {"Ann": [["Ann has a dog, Max", "D1:1"]]}},
             "qa": [{"question": "What instrument is Bo learning?", "answer": "violin",
                     "evidence": ["D1:2"], "category": 4},
                    {"question": "Where did Ann's sister move?", "answer": "Lisbon",
                     "evidence": ["D1:3"], "category": 4},
                    {"question": "unanswerable", "evidence": [], "category": 5}]}]
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(data))
    result = run(LocomoArgs(data=str(path), ks=(1, 3)), embedder=embedder,
                 progress=lambda _: None)
    overall = result["results"]["overall"]
    assert overall["n"] == 2  # category 5 is excluded
    assert overall["recall@1"] == 1.0 and overall["mrr"] == 1.0
    assert "| single-hop | 2 |" in table(result)


def test_questions_are_asked_at_asked_at(tmp_path: Path, embedder: CachedEmbedder) -> None:
    # Two alike films, a week apart: only the time the question is asked picks one.
    sessions = {"session_1_date_time": "7:00 pm on 5 June, 2024",
                "session_1": [{"speaker": "Ann", "dia_id": "D1:1",
                               "text": "Tonight I watched a film about a lighthouse keeper."}],
                "session_2_date_time": "7:00 pm on 12 June, 2024",
                "session_2": [{"speaker": "Ann", "dia_id": "D2:1",
                               "text": "Tonight I watched a film about a submarine crew."}]}
    qa = [{"question": "What film did I watch last week?", "evidence": ["D1:1"],
           "category": 4}]
    conv = {"sample_id": "asked", "conversation": {"speaker_a": "Ann", "speaker_b": "Bo",
                                                   **sessions}, "qa": qa}

    def first(conversation: dict[str, object]) -> float:
        path = tmp_path / "asked.json"
        path.write_text(json.dumps([conversation]))
        result = run(LocomoArgs(data=str(path), ks=(1,)), embedder=embedder,
                     progress=lambda _: None)
        return float(result["results"]["overall"]["recall@1"])

    # asked on Thursday 13 June, "last week" is 3-9 June; a week later, 10-16 June
    assert first({**conv, "asked_at": "9:00 am on 13 June, 2024"}) == 1.0
    assert first({**conv, "asked_at": "9:00 am on 20 June, 2024",
                  "qa": [{**qa[0], "evidence": ["D2:1"]}]}) == 1.0
    bad = {**conv, "asked_at": "soon"}
    with pytest.raises(ValueError, match="asked_at 'soon' is no date"):
        first(bad)


def test_chinese_names_bring_in_the_turns_about_the_person_asked_about(
        embedder: CachedEmbedder) -> None:
    # tests/data/names/names_fresh_zh3.json: people and a cat named in passing over six
    # sessions by several forms of their names, questions that name them (the set no rule
    # was shaped on). The names are read where the user introduces them
    # (core/names_zh.py); without the index, Chinese rests on keywords alone.
    data = str(Path(__file__).parents[1] / "data" / "names" / "names_fresh_zh3.json")

    def multi_hop(w_entity: float) -> float:
        result = run(LocomoArgs(data=data, ks=(10,), config={"recall": {"w_entity": w_entity}}),
                     embedder=embedder, progress=lambda _: None)
        return float(result["results"]["multi-hop"]["recall@10"])

    off, on = multi_hop(0.0), multi_hop(0.2)
    assert on >= off + 0.1, (off, on)  # 0.698 -> 0.854 when written

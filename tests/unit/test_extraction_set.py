"""The labelled extraction set (tests/data/extraction/): its schema, size and coverage, and
the bench's scoring on a tiny set with the hashing embedder (no model). The bench on the
whole set, with its regression floors, is tests/integration/test_extraction_bench.py."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from memray.bench.extraction import DEFAULT_SET, FAMILIES, OPS, load, run, table
from memray.embed.hashing import HashingEmbedder

TYPES = {"name": "identity", "age": "identity", "birthday": "identity", "city": "identity",
         "hometown": "identity", "job": "identity", "family": "identity",
         "availability": "constraint", "diet": "constraint", "like": "preference",
         "dislike": "preference", "hobby": "preference", "routine": "behavior",
         "learning": "fact", "pet": "fact", "own": "fact", "task": "task_state"}
WITH_OBJECT = {"like", "dislike", "hobby", "routine", "learning", "pet", "own", "family"}
OPPOSITE = {"like": "dislike", "dislike": "like"}


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    with DEFAULT_SET.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_size_and_languages(rows: list[dict[str, Any]]) -> None:
    assert len(rows) >= 200
    langs = Counter(r["lang"] for r in rows)
    assert set(langs) == {"en", "zh"} and min(langs.values()) >= 80
    assert sum(not r["expect"] for r in rows) >= 40  # small talk, questions, requests


def test_schema(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        assert set(r) <= {"conv", "lang", "turn", "expect", "hedged", "pii"}, r
        assert isinstance(r["turn"], str) and r["turn"].strip(), r
        assert isinstance(r.get("hedged", False), bool), r
        assert all(isinstance(p, str) and p in r["turn"] for p in r.get("pii", ())), r
        for e in r["expect"]:
            assert set(e) <= {"slot", "type", "op", "object", "hedged"}, e
            fam = e["slot"].rstrip(":")
            assert fam in TYPES and e["type"] == TYPES[fam], e
            assert e["op"] in OPS, e
            # object slots are labelled by prefix + object, so that the metric does not
            # depend on how an extractor normalises the object
            assert (fam in WITH_OBJECT) == e["slot"].endswith(":"), e
            assert fam not in WITH_OBJECT or str(e.get("object", "")).strip(), e


def test_every_slot_family_and_op_is_covered(rows: list[dict[str, Any]]) -> None:
    fams = Counter(e["slot"].rstrip(":") for r in rows for e in r["expect"])
    assert set(fams) == set(FAMILIES) == set(TYPES)
    ops = Counter(e["op"] for r in rows for e in r["expect"])
    assert all(ops[op] >= 5 for op in OPS), ops
    assert sum(bool(r.get("hedged")) for r in rows) >= 5
    assert sum(bool(r.get("pii")) for r in rows) >= 8


def test_conversations_are_contiguous_and_ops_refer_back(rows: list[dict[str, Any]]) -> None:
    """One language per conversation, its lines together; UPDATE / NOOP / DELETE only for a
    family (or its opposite) that an earlier line of the conversation added."""
    seen: list[str] = []
    for r in rows:
        if not seen or seen[-1] != r["conv"]:
            assert r["conv"] not in seen, f"{r['conv']} is split"
            seen.append(r["conv"])
    for conv, lines in load(DEFAULT_SET).items():
        assert len({r["lang"] for r in lines}) == 1, conv
        known: set[str] = set()
        for r in lines:
            for e in r["expect"]:
                fam = e["slot"].rstrip(":")
                if e["op"] != "ADD":
                    assert {fam, OPPOSITE.get(fam)} & known, (conv, r["turn"], e)
            known |= {e["slot"].rstrip(":") for e in r["expect"] if e["op"] != "DELETE"}


TINY = [
    ("I live in Shanghai", [("city", "ADD", None)]),
    ("I moved to Hangzhou", [("city", "UPDATE", "Hangzhou")]),
    ("I hate cilantro", [("dislike:", "ADD", "cilantro")]),
    ("No cilantro please", [("dislike:", "NOOP", "cilantro")]),
    ("hi, how are you?", []),
    ("I have a cat", [("dog", "ADD", None)]),  # mislabelled on purpose: one miss, one extra
    ("Forget where I live", [("city", "DELETE", None)]),
]


def test_scoring_on_a_tiny_set(tmp_path: Path) -> None:
    fam = {"city": "identity", "dislike:": "preference", "dog": "fact"}
    path = tmp_path / "tiny.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for text, expect in TINY:
            row = {"conv": "c1", "lang": "en", "turn": text,
                   "expect": [{"slot": s, "type": fam[s], "op": op} | ({"object": o} if o else {})
                              for s, op, o in expect]}
            f.write(json.dumps(row) + "\n")
    result = run(path, embedder=HashingEmbedder(dim=32))
    overall = result["overall"]
    assert (overall["expected"], overall["kept"], overall["tp"]) == (5, 5, 4)
    assert result["families"]["city"]["op_accuracy"] == 1.0
    assert result["families"]["pet"]["precision"] == 0.0
    assert result["families"]["dog"]["recall"] == 0.0
    assert result["ops"]["NOOP"]["accuracy"] == 1.0 and result["ops"]["UPDATE"]["correct"] == 1
    # the forget purges the superseded Shanghai too; only the live memory counts
    assert result["deletes"]["tp"] == 1 and result["deletes"]["kept"] == 1
    assert result["nothing_to_keep"] == {"turns": 1, "kept_nothing": 1, "accuracy": 1.0}
    assert "| **all facts** | 5 | 5 | 4 |" in table(result)

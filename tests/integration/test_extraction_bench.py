"""The extraction bench on the labelled set with the real model: a regression gate.

Floors are about 0.05 below what the rule extractor measured when they were set (see
BENCHMARKS.md, "Extraction"); raise them when the rules get better. The set's schema and
the scoring itself are checked in tests/unit/test_extraction_set.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memray.bench.extraction import DEFAULT_SET, FAMILIES, load, run, table
from memray.embed.cache import CachedEmbedder

# measured: facts P 0.920 R 0.577 op 0.953; deletes P 0.941 R 0.667; nothing-kept 0.986
FLOORS = {"precision": 0.87, "recall": 0.52, "op_accuracy": 0.90}
DELETE_FLOORS = {"precision": 0.89, "recall": 0.61}
QUIET_FLOOR = 0.93  # turns with nothing to keep that kept nothing


def below_floors(result: dict[str, Any]) -> list[str]:
    """Every metric under its floor, as "name value < floor"."""
    out = [f"{k} {result['overall'][k]} < {v}" for k, v in FLOORS.items()
           if result["overall"][k] < v]
    out += [f"delete {k} {result['deletes'][k]} < {v}" for k, v in DELETE_FLOORS.items()
            if result["deletes"][k] < v]
    quiet = result["nothing_to_keep"]["accuracy"]
    out += [f"nothing-kept {quiet} < {QUIET_FLOOR}"] if quiet < QUIET_FLOOR else []
    out += [f"PII stored: {leak}" for leak in result["pii"]["leaks"]]
    return out


@pytest.fixture(scope="module")
def result(embedder: CachedEmbedder) -> dict[str, Any]:
    return run(DEFAULT_SET, embedder=embedder)


def test_rules_stay_above_the_floors(result: dict[str, Any]) -> None:
    assert below_floors(result) == [], "\n" + table(result)
    for lang in ("en", "zh"):  # neither language may collapse
        facts = result["languages"][lang]["facts"]
        assert facts["precision"] >= FLOORS["precision"] - 0.05, lang
        assert facts["recall"] >= FLOORS["recall"] - 0.05, lang
    assert result["hedging"]["hedged_to_candidate"] >= 0.8
    assert result["hedging"]["plain_to_active"] >= 0.95


def test_the_gate_fails_on_wrong_labels(tmp_path: Path, embedder: CachedEmbedder) -> None:
    """The same turns with every expected slot family shifted to another one."""
    path = tmp_path / "wrong.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for rows in list(load(DEFAULT_SET).values())[:6]:
            for row in rows:
                for e in row["expect"]:
                    fam = e["slot"].rstrip(":")
                    other = FAMILIES[(FAMILIES.index(fam) + 1) % len(FAMILIES)]
                    e["slot"] = other + (":" if e["slot"].endswith(":") else "")
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    failed = below_floors(run(path, embedder=embedder))
    assert any(m.startswith("precision") for m in failed)
    assert any(m.startswith("recall") for m in failed)

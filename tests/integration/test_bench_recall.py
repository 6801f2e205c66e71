"""`memray bench recall`'s wiring for real questions and writes between the searches: both
kinds of search and the adds are timed apart (the figures themselves are BENCHMARKS.md's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memray.bench.recall import RecallBenchArgs, run

LOCOMO = Path(__file__).parents[1] / "data" / "locomo" / "locomo_dev.json"


def test_searches_after_writes_are_timed_apart_and_the_hot_set_is_not_reloaded(
        tmp_path: Path) -> None:
    result = run(RecallBenchArgs(per_user=300, queries=12, data_dir=str(tmp_path),
                                 questions=str(LOCOMO), write_every=3), progress=lambda _: None)
    assert result["hot_set"] is True
    assert result["search_after_write_ms"]["p50"] > 0 and result["search_ms"]["p50"] > 0
    assert result["add_ms"]["p50"] > 0
    assert result["hot_set_loads"] == 0  # 4 writes, each patched into the held set
    assert result["questions"] == str(LOCOMO) and result["write_every"] == 3


@pytest.mark.parametrize("every", [1, -2])
def test_a_write_before_every_search_leaves_nothing_to_compare_and_is_refused(
        every: int, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 2"):
        run(RecallBenchArgs(per_user=10, queries=2, data_dir=str(tmp_path), write_every=every))

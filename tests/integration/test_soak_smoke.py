"""`memray bench soak`, bounded to seconds: the same checks the long run records."""

from __future__ import annotations

from memray.bench.soak import SoakArgs, run


def test_short_soak_loses_and_resurrects_nothing() -> None:
    lines: list[str] = []
    result = run(SoakArgs(minutes=0.4, clients=3, users=4, sample_s=3), progress=lines.append)
    assert result["requests"] > 30, result
    assert result["ops"].get("delete", 0) > 0 and result["acknowledged_deletes"] > 0, result
    assert result["error_count"] == 0, result["errors"]
    assert (result["lost"], result["resurrected"], result["duplicated"]) == (0, 0, 0), result
    assert result["doctor_problems"] == 0
    assert result["rss_mb"] and all(mb > 50 for mb in result["rss_mb"])
    assert any("rss" in line for line in lines)

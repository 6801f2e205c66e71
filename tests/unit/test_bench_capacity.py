"""`memray bench capacity`: the replayed trace against real hot sets, on a small run."""

from __future__ import annotations

from memray.bench.capacity import (
    CapacityBenchArgs,
    held_bytes_per_memory,
    predict,
    simulate,
    zipf_shares,
)

SMALL = CapacityBenchArgs(users=2_000, requests=6_000, replicas=3, rows_per_user=4, dim=16)


def test_affine_routing_hits_more_than_round_robin() -> None:
    aff = simulate(SMALL, "affine", 32)
    rr = simulate(SMALL, "round_robin", 32)
    assert aff["hit_rate"] > rr["hit_rate"] + 0.05
    # A writer patches its own copy, so under affine routing no copy goes stale.
    assert aff["stale_misses"] == 0 and rr["stale_misses"] > 0


def test_hit_rate_is_hits_over_searches() -> None:
    run = simulate(SMALL, "affine", 32)
    assert 0 < run["hit_rate"] < 1
    assert run["hits"] + run["misses"] == run["searches"]
    assert run["hit_rate"] == round(run["hits"] / run["searches"], 4)
    assert all(held <= 32 for held in run["held_users_per_replica"])
    assert run["searches"] + run["writes"] == SMALL.requests - int(SMALL.warmup * SMALL.requests)


def test_the_model_agrees_with_the_simulation_under_affine_routing() -> None:
    """Che's approximation per replica, without writes: affine writes patch in place, so
    the simulated LRU should land near it (cold starts keep it a little below)."""
    args = CapacityBenchArgs(users=2_000, requests=20_000, rows_per_user=2, dim=8,
                             write_share=0.0)
    model = predict(args.users, args.zipf, 3, 64, args.seed)["affine"]
    assert abs(simulate(args, "affine", 64)["hit_rate"] - model) < 0.03


def test_che_is_exact_at_the_edges() -> None:
    from memray.bench.capacity import che_hit_rate

    shares = zipf_shares(100, 1.1)
    assert che_hit_rate(shares, 100) == 1.0
    assert che_hit_rate(shares, 10) < che_hit_rate(shares, 50) < 1.0


def test_a_held_memory_costs_more_than_its_vector() -> None:
    size = held_bytes_per_memory(rows=20, dim=64)
    assert size["dense_bytes_per_memory"] > size["vector_bytes"] == 256
    assert size["with_bm25_bytes_per_memory"] >= size["dense_bytes_per_memory"]

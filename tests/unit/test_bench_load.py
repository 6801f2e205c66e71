"""The bench's load shapes: Zipf-distributed users and the affine spread (a user's
requests always to the same replica), as a user-affine router would send them."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from memray.bench.cluster import ClusterBenchArgs, _check
from memray.bench.serve import Load

BASES = ("http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3")
USERS = tuple(f"u{i}" for i in range(30))


def test_affine_sends_each_user_to_one_replica_and_uses_them_all() -> None:
    load = Load(bases=BASES, key="k", users=USERS, spread="affine")
    rng, turn = random.Random(1), itertools.count()
    where = {u: {load.base(u, rng, turn) for _ in range(5)} for u in USERS}
    assert all(len(b) == 1 for b in where.values())
    assert {b for bs in where.values() for b in bs} == set(BASES)


def test_round_robin_spreads_one_user_over_every_replica() -> None:
    load = Load(bases=BASES, key="k", users=USERS)
    rng, turn = random.Random(1), itertools.count()
    assert {load.base("u0", rng, turn) for _ in range(3)} == set(BASES)


def test_zipf_weights_make_the_first_users_the_busiest() -> None:
    assert Load(bases=BASES, key="k", users=USERS).weights() is None
    weights = Load(bases=BASES, key="k", users=USERS, zipf=1.1).weights()
    assert weights is not None and weights[0] > weights[1] > weights[-1]
    drawn = Counter(random.Random(2).choices(USERS, weights, k=3000))
    assert drawn["u0"] > 5 * drawn["u29"]


@pytest.mark.parametrize("bad", [{"spread": "sticky"}, {"zipf": -1.0}, {"replicas": (0,)}])
def test_bad_load_shapes_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        _check(ClusterBenchArgs(milvus_uri="x", postgres_dsn="y", **bad))  # type: ignore[arg-type]

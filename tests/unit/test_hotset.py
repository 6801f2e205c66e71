"""The hot set's best-first row order (the hot set itself is tested through Memory)."""

from itertools import islice

import numpy as np
import pytest

from memray.core.hotset import best_first


@pytest.mark.parametrize("seed", range(20))
def test_best_first_reads_in_a_stable_argsorts_order(seed: int) -> None:
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 6, size=int(rng.integers(1, 400))).astype(np.float32)  # ties
    want = int(rng.integers(1, 30))
    full = [int(i) for i in np.argsort(-scores, kind="stable")]
    assert list(best_first(scores, want)) == full  # read to the end: every row, in order
    assert list(islice(best_first(scores, want), want)) == full[:want]
    above = [i for i in full if scores[i] > 2]
    assert list(best_first(scores, want, above=2.0)) == above

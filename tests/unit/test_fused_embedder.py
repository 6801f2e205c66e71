"""Several models as one vector (embed/fused.py) and the multilingual USE (embed/use.py)."""

from __future__ import annotations

import numpy as np
import pytest

from memray import ConfigError, MemoryConfig
from memray.core.factory import build_embedder
from memray.embed.fused import FusedEmbedder, parse_fused
from memray.embed.hashing import HashingEmbedder
from memray.embed.use import USE_MODEL, UseEmbedder


def test_names_give_parts_and_weights_summing_to_one() -> None:
    assert parse_fused("a+b") == [("a", 0.5), ("b", 0.5)]
    assert parse_fused("a*3+b*1") == [("a", 0.75), ("b", 0.25)]
    for bad in ("a+", "a*0+b*1", "a*x+b", "a*1+b", "a*-1+b*2", "a*inf+b*1"):
        with pytest.raises(ConfigError):
            parse_fused(bad)


def test_the_fused_cosine_is_the_weighted_sum_of_the_models_cosines() -> None:
    one, two = HashingEmbedder(dim=32, model="one"), HashingEmbedder(dim=48, model="two")
    fused = FusedEmbedder("one*0.3+two*0.7", [(one, 0.3), (two, 0.7)])
    texts = ["red apples and pears", "green apples", "a train to Paris"]
    vecs = fused.embed(texts)
    assert vecs.shape == (3, 80) and fused.dim == 80
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, rtol=1e-5)
    a, b = one.embed(texts), two.embed(texts)
    for i, j in ((0, 1), (0, 2), (1, 2)):
        want = 0.3 * float(a[i] @ a[j]) + 0.7 * float(b[i] @ b[j])
        assert float(vecs[i] @ vecs[j]) == pytest.approx(want, abs=1e-5)
    assert fused.embed([]).shape == (0, 80)


def test_a_fused_name_builds_minilm_and_use_behind_one_model_name() -> None:
    cfg = MemoryConfig.model_validate({"embedder": {
        "model": f"all-MiniLM-L6-v2+{USE_MODEL}", "cache_size": 0, "share_passes": False}})
    built = build_embedder(cfg)
    assert isinstance(built, FusedEmbedder) and built.model == cfg.embedder.model
    built.open()
    try:
        assert built.dim == 384 + 512
        vecs = built.embed(["I live in Hangzhou", "我住在杭州", "The soup needs more salt."])
    finally:
        built.close()
    assert vecs.shape == (3, 896)
    assert float(vecs[0] @ vecs[1]) > float(vecs[0] @ vecs[2]) + 0.1


def test_use_reads_chinese_and_matches_it_across_languages() -> None:
    use = UseEmbedder()
    use.open()
    vecs = use.embed(["I live in Hangzhou", "我住在杭州", "我对花生过敏", "我不能吃花生酱",
                      "今天天气很好"])
    assert vecs.shape == (5, 512)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, rtol=1e-5)
    cross, related, unrelated = (float(vecs[0] @ vecs[1]), float(vecs[2] @ vecs[3]),
                                 float(vecs[2] @ vecs[4]))
    assert cross > 0.6 and related > unrelated + 0.2

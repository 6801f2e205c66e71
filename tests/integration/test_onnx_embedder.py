"""The ONNX Runtime embedder against sentence-transformers, and its graph cache.

The graph is exported once per test session into a temp model cache (about 10 s on 2 CPUs);
the comparison uses the conftest's session-wide sentence-transformers embedder.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from memray.embed.cache import CachedEmbedder
from memray.embed.onnx import OnnxEmbedder
from memray.embed.onnx_export import Graph, load_graph
from memray.embed.packaged import bundled_minilm_path

DATA = Path(__file__).parents[1] / "data"
EDGES = ["", "   ", "  spaces around  ", "word " * 400, "我" * 600, "Ünïcödé café 🙂🎉",
         "MiXeD CaSe, punctuation!!! ... ???", "tab\tand\nnewline"]


@pytest.fixture(scope="session")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture(scope="session")
def onnx_embedder(onnx_cache: Path) -> Iterator[OnnxEmbedder]:
    """all-MiniLM-L6-v2 on ONNX Runtime; its graph exported into the session's temp cache
    (the cache is read only while opening)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEMRAY_MODEL_CACHE", str(onnx_cache))
        e = OnnxEmbedder(threads=2)
        e.open()
    yield e
    e.close()


def _relevance_texts() -> list[str]:
    texts: dict[str, None] = {}
    for line in (DATA / "relevance" / "cases.jsonl").read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        texts[case["query"]] = None
        texts.update({m["text"]: None for m in case["memories"]})
    return list(texts)


def test_vectors_agree_with_sentence_transformers_on_zh_and_en(
        onnx_embedder: OnnxEmbedder, embedder: CachedEmbedder) -> None:
    texts = _relevance_texts()
    chinese = [t for t in texts if any("\u4e00" <= c <= "\u9fff" for c in t)]
    assert len(texts) > 400 and len(chinese) > 150
    # The edge cases in a batch of their own: two of them are cut at max_seq_length (256
    # tokens), which would make sentence-transformers pad a whole batch of 64 to it.
    a = np.concatenate([onnx_embedder.embed(texts), onnx_embedder.embed(EDGES)])
    b = np.concatenate([embedder.embed(texts), embedder.embed(EDGES)])
    texts += EDGES
    assert a.shape == b.shape == (len(texts), 384) and a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    cosine = np.sum(a * b, axis=1)
    assert cosine.min() >= 0.9999, texts[int(cosine.argmin())]
    # Order and batching do not change a vector: one text alone, or in another batch.
    np.testing.assert_allclose(onnx_embedder.embed(texts[::-1])[::-1], a, atol=1e-5)
    np.testing.assert_allclose(onnx_embedder.embed([texts[3]])[0], a[3], atol=1e-5)
    assert onnx_embedder.embed([]).shape == (0, 384)


def _rank_differences(a: np.ndarray, b: np.ndarray, k: int) -> list[tuple[int, int, float]]:
    """(row, position, score gap) where the top k of `a` and `b` differ by more than a tie:
    texts that MiniLM reads the same (Chinese it mostly reads as [UNK]) score within 1e-6 of
    each other, and float noise may order such a pair either way."""
    tie = 1e-5  # the runtimes' scores differ by < 1e-6 (measured max 6.3e-7)
    out = []
    ra, rb = (np.argsort(-x, axis=1, kind="stable")[:, :k] for x in (a, b))
    for row, pos in zip(*np.nonzero(ra != rb), strict=True):
        i, j = ra[row, pos], rb[row, pos]
        gap = max(abs(a[row, i] - a[row, j]), abs(b[row, i] - b[row, j]))
        if gap > tie:
            out.append((int(row), int(pos), float(gap)))
    return out


def test_search_ranking_is_the_same_on_both_runtimes(
        onnx_embedder: OnnxEmbedder, embedder: CachedEmbedder) -> None:
    """Every query of the relevance set searched over all its memories (zh and en): the same
    top 10 up to exact ties, and the same order of each case's own memories."""
    cases = [json.loads(line) for line in
             (DATA / "relevance" / "cases.jsonl").read_text(encoding="utf-8").splitlines()]
    memories = list(dict.fromkeys(m["text"] for c in cases for m in c["memories"]))
    queries = list(dict.fromkeys(c["query"] for c in cases))
    assert len(memories) > 200 and len(queries) > 200
    a, b = (e.embed(queries) @ e.embed(memories).T for e in (onnx_embedder, embedder))
    assert _rank_differences(a, b, k=10) == []
    row = {m: i for i, m in enumerate(memories)}
    for c in cases:
        q, own = queries.index(c["query"]), [row[m["text"]] for m in c["memories"]]
        assert _rank_differences(a[[q]][:, own], b[[q]][:, own], k=len(own)) == [], c["id"]


def _load_twice_at_once(model_dir: Path) -> list[Graph]:
    found: list[Graph] = []
    threads = [threading.Thread(target=lambda: found.append(load_graph("all-MiniLM-L6-v2",
                                                                       model_dir)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return found


def test_a_torn_graph_is_exported_again_once_by_concurrent_loaders(
        onnx_embedder: OnnxEmbedder, onnx_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMRAY_MODEL_CACHE", str(onnx_cache))
    model_dir = Path(bundled_minilm_path())
    first = load_graph("all-MiniLM-L6-v2", model_dir)
    assert not first.exported  # the session fixture exported it: loading again does not
    meta = json.loads(first.path.with_suffix(".json").read_text())
    assert meta["sha256"] == hashlib.sha256(first.data).hexdigest()
    with open(first.path, "r+b") as f:  # a write cut short
        f.truncate(len(first.data) // 2)
    found = _load_twice_at_once(model_dir)
    assert sorted(g.exported for g in found) == [False, True]  # one exports, one waits
    assert {hashlib.sha256(g.data).hexdigest() for g in found} == {
        hashlib.sha256(first.path.read_bytes()).hexdigest()}
    assert not [p for p in first.path.parent.iterdir() if p.name.endswith(".tmp")]
    fresh = OnnxEmbedder()  # and the re-exported graph embeds as before
    fresh.open()
    texts = ["I moved to Hangzhou", "我不吃香菜"]
    np.testing.assert_allclose(fresh.embed(texts), onnx_embedder.embed(texts), atol=1e-5)


def test_a_stale_sidecar_means_a_new_export(
        onnx_embedder: OnnxEmbedder, onnx_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMRAY_MODEL_CACHE", str(onnx_cache))
    model_dir = Path(bundled_minilm_path())
    graph = load_graph("all-MiniLM-L6-v2", model_dir)
    sidecar = graph.path.with_suffix(".json")
    sidecar.write_text(json.dumps({**json.loads(sidecar.read_text()), "format": 0}))
    again = load_graph("all-MiniLM-L6-v2", model_dir)
    assert again.exported and json.loads(sidecar.read_text())["format"] == 1


def test_the_embed_bench_runs_and_prints_its_table(
        onnx_embedder: OnnxEmbedder, onnx_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memray.bench.embedders import EmbedBenchArgs, run, table

    monkeypatch.setenv("MEMRAY_MODEL_CACHE", str(onnx_cache))
    result = run(EmbedBenchArgs(runtimes=("onnx",), threads=1, queries=6, texts=16,
                                batch_sizes=(1, 8), rounds=2, recall=False),
                 progress=lambda _: None)
    onnx = result["runtimes"]["onnx"]
    assert onnx["model"] == "all-MiniLM-L6-v2" and onnx["single_query_ms"]["p50"] > 0
    assert set(onnx["texts_per_s"]) == {"1", "8"} and "min_cosine_to_torch" not in onnx
    lines = table(result).splitlines()
    assert len(lines) == 3 and lines[2].startswith("| onnx | all-MiniLM-L6-v2 |")

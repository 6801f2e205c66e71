"""BM25 keyword scoring used by hybrid recall."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from memray.config import RecallConfig
from memray.core.lexical import BM25, tokens
from memray.core.ranking import rank
from memray.models import MemoryRecord, content_hash

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_tokens_stem_drop_stop_words_and_split_cjk() -> None:
    assert tokens("What did Caroline paint in the studios?") == ["caroline", "paint", "studio"]
    assert tokens("我喜欢咖啡") == ["我喜", "喜欢", "欢咖", "咖啡"]
    assert tokens("The 2023 races") == ["2023", "race"]


def test_bm25_prefers_rare_shared_words() -> None:
    docs = ["Caroline: I went to the LGBTQ support group yesterday",
            "Caroline: I love painting sunsets",
            "Melanie: I went running with the kids"]
    scores = BM25(docs).scores("When did Caroline go to the support group?")
    assert int(np.argmax(scores)) == 0
    assert scores[2] == 0.0 and BM25([]).scores("anything").shape == (0,)


def rec(text: str) -> MemoryRecord:
    return MemoryRecord(id=content_hash(text)[:8], user_id="u", content=text, created_at=NOW,
                        updated_at=NOW, last_confirmed_at=NOW, embedding_model="m",
                        content_hash=content_hash(text))


def test_keyword_weight_reorders_but_never_bypasses_the_threshold() -> None:
    a, b, c = rec("a"), rec("b"), rec("c")
    cfg = RecallConfig(w_lexical=0.5)
    hits = rank([(a, 0.50), (b, 0.45), (c, 0.10)], cfg, now=NOW, threshold=0.3, cap=5,
                keyword={a.id: 0.0, b.id: 1.0, c.id: 1.0})
    assert [h.memory.id for h in hits] == [b.id, a.id]  # c stays under the threshold
    dense = rank([(a, 0.50), (b, 0.45)], cfg, now=NOW, threshold=0.3, cap=5)
    assert [h.memory.id for h in dense] == [a.id, b.id]  # no keyword scores: dense only

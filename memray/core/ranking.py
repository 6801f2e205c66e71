"""Which recalled memories are relevant, and their order: similarity, importance and
recency by type, topic and keyword matches.

The relevance decision (`decide`) replaces one global cosine floor. A candidate is
relevant on any of three kinds of evidence:

- similarity: its cosine similarity reaches `recall.threshold`, and the embedding model
  reads the query at all. MiniLM reads little Chinese (most characters are [UNK]), so
  "给我讲个笑话" and "我老婆怀孕了" score 0.98. A query the model cannot read is as close
  to unrelated sentences as to anything (`background`): then similarity is no evidence.
- topic: the memory is about a topic the query asks about (core/intent.py: "what should
  I cook?" and "I am vegetarian"), and its similarity is at least
  `recall.intent_min_similarity` (when the model reads the query). So is a memory about
  a day the question asks about ("what did I do last week?": what was said then, or
  counts to then; core/when.py), when `recall.window_k` is on.
- keywords: its BM25 score (0..1, the user's best match 1) reaches `recall.keyword_min`
  and it shares a content word with the query (not a one-letter token or a filler verb).

Then a floor relative to the best: of the memories relevant by similarity or topic, those
more than `recall.relative_margin` below the best one's similarity are dropped (for
queries the model reads). The best candidate is never dropped by it, so whenever some
memory has evidence, the answer is not empty.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from memray.config import RecallConfig
from memray.core.lexical import tokens
from memray.embed.base import Embedder, Matrix
from memray.models import MemoryRecord, SearchHit
from memray.store.base import Vector

# Unrelated everyday sentences in both scripts. A query's mean cosine to the closest
# quarter of them is its background: ~0.14 for English queries under MiniLM, ~0.6 for
# Chinese ones, which the model mostly reads as unknown tokens.
BACKGROUND = (
    "The meeting was moved to the afternoon.", "She bought a new pair of shoes.",
    "The train was late again today.", "He is reading a book about history.",
    "We watched a movie last night.", "The weather is cold this week.",
    "My phone battery died.", "They painted the fence blue.",
    "The report is due next month.", "I went for a walk in the park.",
    "The soup needs more salt.", "Our team won the match.",
    "会议改到了下午。", "她买了一双新鞋。", "今天火车又晚点了。", "他在看一本历史书。",
    "我们昨晚看了一部电影。", "这周天气很冷。", "我的手机没电了。", "他们把栅栏刷成了蓝色。",
    "报告下个月交。", "我去公园散了个步。", "汤里要再加点盐。", "我们队赢了比赛。",
)
_background: dict[str, Matrix] = {}
_background_lock = threading.Lock()
# Words that share no subject: "What's the weather like" is not about "I like spicy food",
# nor "what should I cook tonight?" about "Tonight I finish the report".
_FILLERS = frozenset((
    "like", "love", "want", "need", "make", "get", "go", "good", "best", "take", "know",
    "think", "one", "way", "thing", "time", "day", "year", "lot", "much", "many", "well",
    "really", "today", "tonight", "tomorrow", "yesterday", "soon", "later", "week", "month",
    "今天", "今晚", "明天", "昨天", "现在", "最近", "什么", "怎么", "一下", "有没"))


def background(embedder: Embedder, vector: Vector) -> float:
    """Mean cosine of `vector` to the closest quarter of the BACKGROUND sentences (which
    are embedded once per model)."""
    q = np.asarray(vector, dtype=np.float32)
    return float(_backgrounds(embedder, (q / max(float(np.linalg.norm(q)), 1e-12))[None])[0])


def unreadable(embedder: Embedder, rows: np.ndarray, most: float) -> np.ndarray:
    """Which unit vectors `rows` the model did not read: their background is `most` or
    more, as for a query (a Chinese memory under MiniLM)."""
    return _backgrounds(embedder, rows) >= most if len(rows) else np.zeros(0, dtype=bool)


def _backgrounds(embedder: Embedder, rows: np.ndarray) -> np.ndarray:
    """`background` of each unit row."""
    with _background_lock:
        matrix = _background.get(embedder.model)
    if matrix is None:
        raw = np.asarray(embedder.embed(list(BACKGROUND)), dtype=np.float32)
        matrix = raw / np.maximum(np.linalg.norm(raw, axis=1, keepdims=True), 1e-12)
        with _background_lock:
            _background[embedder.model] = matrix
    sims = -np.sort(-(np.asarray(rows, dtype=np.float32) @ matrix.T), axis=1)
    out: np.ndarray = sims[:, : max(1, matrix.shape[0] // 4)].mean(axis=1)
    return out


def content_terms(text: str) -> frozenset[str]:
    """The BM25 terms of `text` that can name a subject (no one-letter tokens, no fillers)."""
    return frozenset(t for t in tokens(text) if len(t) > 1 and t not in _FILLERS)


@dataclass(frozen=True)
class Evidence:
    """What the read path knows about a query besides each candidate's similarity."""

    readable: bool = True  # similarity means something for this query
    topic_ids: frozenset[str] = frozenset()  # memories of a topic the query asks about
    keyword: Mapping[str, float] = field(default_factory=dict)  # BM25 0..1 by memory id
    query_terms: frozenset[str] = frozenset()  # content_terms of the query
    dated_ids: frozenset[str] = frozenset()  # memories about a day the query asks about
    unread: frozenset[str] = frozenset()  # memories the model did not read (`unreadable`)


def decide(candidates: list[tuple[MemoryRecord, float]], cfg: RecallConfig,
           evidence: Evidence) -> list[tuple[MemoryRecord, float]]:
    """The relevant candidates (see the module docstring), in their given order."""
    kept: list[tuple[MemoryRecord, float, bool]] = []  # (record, similarity, by keyword)
    for record, sim in candidates:
        # similarity is evidence only where the model read both texts
        read = evidence.readable and record.id not in evidence.unread
        dense = read and sim >= cfg.threshold
        # a memory of a topic, or about a day, the query asks about
        topic = (record.id in evidence.topic_ids or record.id in evidence.dated_ids) and (
            not read or sim >= cfg.intent_min_similarity)
        words = (evidence.keyword.get(record.id, 0.0) >= cfg.keyword_min
                 and bool(evidence.query_terms & content_terms(record.content)))
        if dense or topic or words:
            kept.append((record, sim, words or not read))
    read_sims = [sim for record, sim, _ in kept if record.id not in evidence.unread]
    if evidence.readable and read_sims:  # a floor below the best the model read
        best = max(read_sims)
        kept = [k for k in kept if k[2] or k[1] >= best - cfg.relative_margin]
    return [(record, sim) for record, sim, _ in kept]


def recency(record: MemoryRecord, now: datetime, half_lives: dict[str, float | None]) -> float:
    """1.0 for fresh (or never-decaying) memories, halving every half-life since last confirmed."""
    half_life = half_lives.get(record.type.value)
    if half_life is None or half_life <= 0:
        return 1.0
    age_days = max((now - record.last_confirmed_at).total_seconds(), 0.0) / 86_400
    return math.pow(0.5, age_days / half_life)


def rank(
    candidates: list[tuple[MemoryRecord, float]], cfg: RecallConfig, *, now: datetime,
    threshold: float, cap: int, intent_ids: frozenset[str] = frozenset(),
    keyword: Mapping[str, float] | None = None, when_ids: frozenset[str] | None = None,
    date_ids: frozenset[str] | None = None, links: Mapping[str, tuple[str, ...]] | None = None,
    named: Mapping[str, float] | None = None,
) -> list[SearchHit]:
    """Drop candidates below `threshold` similarity, score the rest, best `cap` first.

    score = (w_sim * similarity + w_imp * importance + w_rec * recency + w_intent * match)
    / (sum of weights), so it lies in -1..1 like the similarity. Memories in `intent_ids`
    (of a topic the query asks about) pass the threshold and have match = 1.
    `keyword`: BM25 scores (0..1) by memory id, weighted by w_lexical (the threshold still
    applies to the similarity). `when_ids`: for a question that asks when, the memories
    that place something in time (None: it does not ask), weighted by w_when. `date_ids`:
    for a question that names a date, the memories about a day in it (core/when.py; None:
    it names none), weighted by w_date. `links`:
    each candidate's neighbouring turns among the candidates (core/turns.py); with
    w_neighbour a turn shares its best neighbour's similarity. `named`: the share of the
    query's names (core/entities.py) each memory names, weighted by w_entity (0 when the
    query names none of the user's names). Ties keep the store's
    order. After `decide`, pass threshold=-1: the decision is made.
    """
    keyword = keyword or {}
    w_lex = cfg.w_lexical if keyword else 0.0
    w_when = cfg.w_when if when_ids is not None else 0.0
    timed = when_ids or frozenset()
    w_date = cfg.w_date if date_ids is not None else 0.0
    dated = date_ids or frozenset()
    episode = episodes(candidates) if cfg.w_episode else {}
    near = nearby(candidates, links or {}) if cfg.w_neighbour else {}
    named = named or {}
    w_entity = cfg.w_entity if named else 0.0
    total = (cfg.w_similarity + cfg.w_importance + cfg.w_recency + cfg.w_intent + w_lex
             + w_when + w_date + cfg.w_episode + cfg.w_neighbour + w_entity)
    hits = []
    for record, sim in candidates:
        match = record.id in intent_ids
        lex = keyword.get(record.id, 0.0)
        if sim < threshold and not match:
            continue
        rec = recency(record, now, cfg.half_life_days)
        score = (cfg.w_similarity * sim + cfg.w_importance * record.importance
                 + cfg.w_recency * rec + cfg.w_intent * match + w_lex * lex
                 + w_when * (record.id in timed) + w_date * (record.id in dated)
                 + cfg.w_episode * episode.get(record.session_id or "", sim)
                 + cfg.w_neighbour * near.get(record.id, sim)
                 + w_entity * named.get(record.id, 0.0)) / total
        hits.append(SearchHit(memory=record, score=round(score, 6), similarity=round(sim, 6)))
    hits.sort(key=lambda h: h.score, reverse=True)
    return spread(hits, cfg.session_spread, cap)


def episodes(candidates: list[tuple[MemoryRecord, float]]) -> dict[str, float]:
    """The best similarity among the candidates of each session: how well the episode as a
    whole matches, shared by all its turns (the first stage of two-stage recall)."""
    best: dict[str, float] = {}
    for record, sim in candidates:
        if record.session_id:
            best[record.session_id] = max(sim, best.get(record.session_id, -1.0))
    return best


def nearby(candidates: list[tuple[MemoryRecord, float]],
           links: Mapping[str, tuple[str, ...]]) -> dict[str, float]:
    """The best similarity of each candidate and its neighbouring turns among the
    candidates: a turn next to one that matches is evidence with it."""
    sims = {record.id: sim for record, sim in candidates}
    return {rid: max([sims[rid], *(sims[j] for j in linked if j in sims)])
            for rid, linked in links.items() if rid in sims}


def spread(hits: list[SearchHit], penalty: float, cap: int) -> list[SearchHit]:
    """The best `cap`, picked greedily with `penalty` off a memory's score per result
    already picked from its session, so one session cannot fill the answer to a question
    that spans several. Memories without a session are never penalised."""
    if penalty <= 0 or len(hits) <= 1:
        return hits[:cap]
    picked: list[SearchHit] = []
    per_session: Counter[str] = Counter()
    pool = list(hits)
    while pool and len(picked) < cap:
        best = max(range(len(pool)), key=lambda i: pool[i].score - penalty * per_session[
            pool[i].memory.session_id or ""] * bool(pool[i].memory.session_id))
        hit = pool.pop(best)
        picked.append(hit)
        if hit.memory.session_id:
            per_session[hit.memory.session_id] += 1
    return picked

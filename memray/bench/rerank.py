"""A listwise LLM reranker, measured on LoCoMo (issue 22, item 5); not on the read path.

The packaged instruct model (llama.cpp in process, a JSON-schema grammar) is shown the
question and the `k` best turns recall found, numbered, and answers with the numbers of
the most useful ones, best first; those go first in its order, the rest keep recall's.
It runs through `memray bench locomo --rerank-llm MODEL`, on every Nth question
(`--every`), since a CPU takes seconds a question.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from memray.models import SearchHit

Reranker = Callable[[str, list[SearchHit]], list[SearchHit]]
TURN_CHARS = 240  # a long turn's head: the prompt of 20 turns stays ~1.5k tokens
SYSTEM = ("You rank conversation turns by how useful they are for answering a question "
          "about the people in the conversation. Reply with JSON: {\"order\": [...]}, the "
          "numbers of the turns that help answer it, most useful first, at most 10.")


def schema(k: int) -> dict[str, Any]:
    return {"type": "object", "required": ["order"], "additionalProperties": False,
            "properties": {"order": {"type": "array", "maxItems": 10, "items": {
                "type": "integer", "minimum": 1, "maximum": k}}}}


def prompt(question: str, hits: list[SearchHit]) -> list[dict[str, str]]:
    turns = "\n".join(f"[{i}] {h.memory.content[:TURN_CHARS]}" for i, h in enumerate(hits, 1))
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Question: {question}\n\nTurns:\n{turns}"}]


def reorder(answer: str, hits: list[SearchHit]) -> list[SearchHit]:
    """`hits` with those the answer numbers first, in its order; the rest keep theirs. An
    answer that is no such JSON leaves the order as it was."""
    try:
        raw = json.loads(answer).get("order", [])
    except (ValueError, AttributeError):
        return hits
    order = [i for i in dict.fromkeys(raw) if isinstance(i, int) and 1 <= i <= len(hits)]
    chosen = set(order)
    return [hits[i - 1] for i in order] + [h for i, h in enumerate(hits, 1) if i not in chosen]


def llm_reranker(model: str, k: int = 20) -> tuple[Reranker, dict[str, float]]:
    """A reranker over the packaged `model`, and its running totals (questions, seconds,
    prompt tokens, unparsed answers)."""
    from memray.localllm.models import model_path
    from memray.localllm.runtime import LocalRuntime

    runtime = LocalRuntime(str(model_path(model)), n_ctx=4096)
    totals = {"questions": 0.0, "seconds": 0.0, "prompt_tokens": 0.0, "unparsed": 0.0}

    def rerank(question: str, hits: list[SearchHit]) -> list[SearchHit]:
        top = hits[:k]
        done = runtime.chat(prompt(question, top), schema=schema(len(top)), max_tokens=80)
        ranked = reorder(done.text, top)
        totals["questions"] += 1
        totals["seconds"] += done.seconds
        totals["prompt_tokens"] += done.prompt_tokens
        totals["unparsed"] += ranked is top
        return ranked + hits[k:]

    return rerank, totals

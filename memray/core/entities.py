"""Names across sessions: the light entity index of multi-hop recall.

A question about a person, a pet or a place ("What books has Melanie read?", "Where has
Caroline travelled?") is answered by turns spread over many sessions, each of which names
them, by a speaker's label or in its text. Similarity finds a few of them and fills the
rest of the answer with the other speaker's turns on the same subject. The index lets the
read path take the nearest turns among those that name the question's entities, and rank
up memories that name them.

What counts as a name needs no lexicon: a capitalised word (a possessive 's dropped) whose
lower-case form the user never writes, nor a stop word. "Melanie", "Sweden" and "Oliver"
are names; "Wow" and "Pride" are not once "wow" and "pride" appear in lower case. The
index is built per user from the memories held, so it follows what that user says. Names
are matched in Latin script only: Chinese writes no capitals, and its names stay with the
keyword match (CJK bigrams).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from memray.core.lexical import STOP

_CAPITALISED = re.compile(r"\b([A-Z][a-z]+)(?:['’]s)?\b")
_LOWER = re.compile(r"\b[a-z]+\b")
# Capitalised at the start of a question or a sentence, never a name.
_NEVER = STOP | frozenset((
    "what", "when", "where", "which", "who", "whom", "whose", "why", "how", "does", "did",
    "do", "is", "are", "was", "were", "has", "have", "had", "can", "could", "would",
    "should", "will", "shall", "may", "might", "please", "tell"))

Rows = npt.NDArray[np.int64]


def asked(query: str) -> frozenset[str]:
    """The words of `query` that could be names (lower-cased), before any index is read."""
    return frozenset(w for w in (m.lower() for m in _CAPITALISED.findall(query))
                     if w not in _NEVER)


class Names:
    """The rows of one user's memories that name each name."""

    def __init__(self, texts: Sequence[str]) -> None:
        lower: set[str] = set()
        found: dict[str, set[int]] = {}
        for i, text in enumerate(texts):
            lower.update(_LOWER.findall(text))
            for word in _CAPITALISED.findall(text):
                found.setdefault(word.lower(), set()).add(i)
        self._rows: dict[str, Rows] = {
            name: np.fromiter(sorted(rows), dtype=np.int64, count=len(rows))
            for name, rows in found.items() if name not in lower and name not in _NEVER}

    def __len__(self) -> int:
        return len(self._rows)

    def named(self, query: str) -> frozenset[str]:
        """The names of this index that `query` names."""
        return frozenset(w for w in asked(query) if w in self._rows)

    def share(self, names: frozenset[str], n: int) -> npt.NDArray[np.float32]:
        """For each of `n` rows, the share of `names` it names (0..1)."""
        out = np.zeros(n, dtype=np.float32)
        for name in names:
            out[self._rows[name]] += 1.0
        if names:
            out /= len(names)
        return out

"""Names across sessions: the light entity index of multi-hop recall.

A question about a person, a pet or a place ("What books has Melanie read?", "Where has
Caroline travelled?") is answered by turns spread over many sessions, each of which names
them, by a speaker's label or in its text. Similarity finds a few of them and fills the
rest of the answer with the other speaker's turns on the same subject. The index lets the
read path take the nearest turns among those that name the question's entities, and rank
up memories that name them.

What counts as a name needs no lexicon: a capitalised word (a possessive 's dropped) whose
lower-case form the user never writes, nor a stop word. "Melanie", "Sweden" and "Oliver"
are names; "Wow" and "Pride" are not once "wow" and "pride" appear in lower case. A name
that addresses someone ("Yeah, Maria.", "Hey Caroline!") is not indexed: in a conversation
most turns of one speaker address the other, and they are not about them. The
index is built per user from the memories held, so it follows what that user says. Names
are Latin-script words, accented ones too, also inside Chinese text ("我姐姐Anna"); Chinese
names carry no capitals: the index learns them where the user's texts introduce them
(core/names_zh.py).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from memray.core.lexical import STOP, renumbering
from memray.core.names_zh import fulls_in, groups, has_cjk, introduced
from memray.hanzi import simplified

# A run of Latin letters (accented ones too), with inner apostrophes: "O'Brien", "José",
# and "Anna" inside "我姐姐Anna喜欢爵士" (Chinese puts no space around it).
_LATIN = "A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f"
_WORD = re.compile(f"[{_LATIN}]+(?:['’][{_LATIN}]+)*")
_POSSESSIVE = re.compile(r"'s$")
_LISTED = re.compile(f",\\s*([{_LATIN}'’]+),$")
_GREETING = re.compile(r"\b(?:hey|hi|hello|thanks|thank you|bye|congrats|congratulations|"
                       r"dear|oh|wow|yeah|yes|yep|sorry|morning|evening|night),?$", re.I)
# Capitalised at the start of a question or a sentence, never a name.
_NEVER = STOP | frozenset((
    "what", "when", "where", "which", "who", "whom", "whose", "why", "how", "does", "did",
    "do", "is", "are", "was", "were", "has", "have", "had", "can", "could", "would",
    "should", "will", "shall", "may", "might", "please", "tell"))

Rows = npt.NDArray[np.int64]


def _capitalised(text: str, *, addressed: bool = True) -> list[str]:
    """Words that start with a capital and are not all capitals ("José", "McDonald"; not
    "NASA" or "I"), lower-cased, a possessive 's dropped; without `addressed`, not those
    that address someone ("Hey Caroline!", "Yeah, Maria.")."""
    out = []
    for found in _WORD.finditer(text):
        word = _POSSESSIVE.sub("", found.group().replace("’", "'"))
        if (word[:1].isupper() and any(c.islower() for c in word)
                and word.split("'")[0].lower() not in _NEVER  # I'm, I've, What's
                and (addressed or not _addressing(text, found.start(), found.end()))):
            out.append(word.lower())
    return out


def _addressing(text: str, start: int, end: int) -> bool:
    """Whether the name at text[start:end] is the person spoken to, not spoken of: set
    off by punctuation after it, and before it a greeting, a comma or the start of what
    is said. A turn is about what it names, not about whom it answers."""
    after = text[end:end + 1]
    if not after or after not in ",.!?;":
        return False
    before = text[:start].rstrip()
    if _GREETING.search(before):  # "Hey Caroline!", "Yeah, Maria, ..."
        return True
    if not before or before[-1] in ":.!?":  # first in what is said: "Maria, did you ...?"
        return after in ",!?"  # not "Dr. Smith."
    # "That's great, Maria!", not "My sister, Maria, is ..." nor a list's last item
    # ("Lisbon, Porto, Faro.": the item before it is a name too)
    listed = _LISTED.search(before)
    return before[-1] == "," and after in ".!?" and not (listed and listed[1][0].isupper())


def _read(text: str, turn: bool) -> tuple[frozenset[str], frozenset[str]]:
    """The names a text names (a turn's names that address someone left out) and the
    words it writes in lower case (which are then no names anywhere)."""
    return frozenset(_capitalised(text, addressed=not turn)), _lower_words(text)


def _lower_words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text) if w.islower())


def asked(query: str) -> frozenset[str]:
    """The words of `query` that could be names (lower-cased), before any index is read."""
    return frozenset(_capitalised(query))


def may_name(query: str) -> bool:
    """Whether `query` could name a name of an index: a capitalised word, or Chinese
    (whose names only the index knows). Without, no index need be built."""
    return bool(asked(query)) or has_cjk(query)


class Names:
    """The rows of one user's memories that name each name. `patched` (a user's write to a
    held set) moves the rows over and reads only the new ones."""

    def __init__(self, texts: Sequence[str], said: Sequence[bool] | None = None) -> None:
        """`said`: per text, whether it is a conversation turn, said to someone (its
        names that address someone are left out); None: all are. A stored fact ("Anna,
        my sister, is allergic to nuts") addresses no one."""
        self._n, self._lower = 0, Counter[str]()
        self._all: dict[str, Rows] = {}
        self._texts: list[str] = []
        self._zh = Counter[str]()  # Chinese names, by how many texts introduce them
        self._zh_rows: dict[str, Rows] = {}  # rows that contain each, on first ask
        # What the texts say, filled by searches on first ask: whether they contain a
        # string, a surname's full names. Searches share the index without a lock: each
        # fill is one dict assignment of a value any search would compute alike.
        self._says: dict[str, bool] = {}
        self._fulls: dict[str, frozenset[str]] = {}
        self._add([_read(text, said is None or said[i]) for i, text in enumerate(texts)],
                  texts)

    def _add(self, rows: list[tuple[frozenset[str], frozenset[str]]],
             texts: Sequence[str]) -> None:
        texts = [simplified(text) for text in texts]  # Chinese names are read in Simplified
        self._texts.extend(texts)
        for text in texts:
            if has_cjk(text):
                self._zh.update(introduced(text))
        found: dict[str, list[int]] = {}
        for i, (names, lowers) in enumerate(rows, self._n):
            self._lower.update(lowers)
            for word in names:
                found.setdefault(word, []).append(i)
        for name, at in found.items():
            new = np.array(at, dtype=np.int64)
            old = self._all.get(name)
            self._all[name] = new if old is None else np.concatenate([old, new])
        self._n += len(rows)
        # a capitalised word the user also writes in lower case is no name ("Wow", "Pride")
        self._rows = {name: at for name, at in self._all.items() if not self._lower[name]}

    def patched(self, keep: Sequence[int], texts: Sequence[str], gone: Sequence[str],
                said: Sequence[bool]) -> Names:
        """The index of rows `keep` (by position, in that order) then `texts`; `gone`:
        the texts of the rows not kept."""
        out = Names.__new__(Names)
        out._n, out._lower = len(keep), self._lower.copy()
        out._lower.subtract(w for text in gone for w in _lower_words(text))
        out._lower = +out._lower  # drops the words no row has left (it would only grow)
        out._texts = [self._texts[i] for i in keep]
        out._zh = self._zh.copy()
        out._zh.subtract(n for text in gone for n in introduced(simplified(text)))
        out._zh = +out._zh
        out._zh_rows, out._says, out._fulls = {}, {}, {}
        out._all = dict(self._all) if len(keep) == self._n else {}
        if len(keep) < self._n:  # positions are row numbers: those after a gone row move up
            moved = renumbering(keep, self._n)
            for name, at in self._all.items():
                alive = moved[at]
                if (alive >= 0).any():
                    out._all[name] = alive[alive >= 0]
        out._add([_read(text, turn) for text, turn in zip(texts, said, strict=True)],
                 texts)
        return out

    def named(self, query: str) -> frozenset[str]:
        """The names of this index that `query` names: its capitalised ones, and the
        people among those the user's Chinese texts introduced (core/names_zh.py), each
        as the forms of their name joined by "|" ("王若琳|琳琳|若琳")."""
        latin = frozenset(w for w in asked(query) if w in self._rows)
        if not has_cjk(query):
            return latin
        people = groups(frozenset(self._zh), simplified(query), self._said, self._fulls_of)
        return latin | {"|".join(sorted(forms)) for forms in people}

    def _fulls_of(self, surname: str) -> frozenset[str]:
        """The full names of `surname` the user's texts say (core/names_zh.py)."""
        if surname not in self._fulls:
            self._fulls[surname] = frozenset().union(*(fulls_in(text, surname)
                                                       for text in self._texts if surname in text))
        return self._fulls[surname]

    def _said(self, text: str) -> bool:
        """Whether any of the user's texts contains `text`."""
        if text not in self._says:
            if len(self._says) >= 4096:  # one per full name asked: bounded, as queries are not
                self._says.clear()
            self._says[text] = any(text in held for held in self._texts)
        return self._says[text]

    def _rows_of(self, name: str) -> Rows | None:
        """The rows that name `name`: a Latin name's, or the rows that contain any form
        of a Chinese one."""
        rows = self._rows.get(name)
        if rows is None and has_cjk(name):
            rows = self._zh_rows.get(name)
            if rows is None:
                forms = name.split("|")
                rows = np.array([i for i, text in enumerate(self._texts)
                                 if any(form in text for form in forms)], dtype=np.int64)
                self._zh_rows[name] = rows
        return rows

    def share(self, names: frozenset[str], n: int) -> npt.NDArray[np.float32]:
        """For each of `n` rows, the share it names of `names` (0..1): a Latin name counts
        only if this index knows it, a Chinese person (`named`'s "|"-joined forms) always,
        each row containing a form naming them. All 0 when none counts."""
        out = np.zeros(n, dtype=np.float32)
        known = [rows for rows in map(self._rows_of, names) if rows is not None]
        for rows in known:
            out[rows] += 1.0
        if known:
            out /= len(known)
        return out

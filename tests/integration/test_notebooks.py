"""The notebooks run top to bottom (nbclient), so they cannot rot."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).parents[2]
# The LoCoMo development split ships with the tests (CC BY-NC 4.0: tests/data/locomo/).
LOCOMO = ROOT / "tests" / "data" / "locomo" / "locomo_dev.json"


@pytest.mark.parametrize("name", ["quickstart", "threshold_tuning"])
def test_notebook_executes(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if name == "threshold_tuning" and not LOCOMO.exists():
        if os.environ.get("CI"):
            pytest.fail(f"the LoCoMo development split is missing at {LOCOMO}")
        pytest.skip(f"needs {LOCOMO}")
    # The kernel must be this interpreter (memray installed), whatever PATH says.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("LOCOMO_DEV", str(LOCOMO))
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.get("outputs", []))
    assert "Error" not in outputs
    if name == "quickstart":
        assert "Hangzhou" in outputs
    else:
        assert "suggested recall.threshold" in outputs and "suggested merge_similarity" in outputs

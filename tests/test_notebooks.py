"""The calibration notebooks execute cleanly, assert their conclusions, and are stored bare.

Each notebook ends in a cell asserting its own key conclusion, so executing it is the test.
Notebooks run with nbclient on the ``python3`` kernel with ``notebooks/`` as the working
directory. The committed files must carry no outputs (they are regenerated from
``notebooks/_build.py``, which must agree with them).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]-*.ipynb"))
CELL_TIMEOUT_S = 120
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # colour codes in kernel tracebacks


def test_the_four_calibration_notebooks_exist() -> None:
    assert [p.name for p in NOTEBOOKS] == [
        "01-clip-bounds.ipynb",
        "02-cohort-floor.ipynb",
        "03-histograms-are-one-release.ipynb",
        "04-flam-exact-metrics.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_notebook_has_no_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    dirty = [
        i
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None)
    ]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; run python notebooks/_build.py"


def test_committed_notebooks_match_the_builder() -> None:
    result = subprocess.run(
        [sys.executable, str(NOTEBOOKS_DIR / "_build.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_and_its_conclusion_holds(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
    )
    failure = None
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as e:
        failure = _ANSI.sub("", str(e))
    if failure is not None:
        pytest.fail(f"{path.name} failed:\n{failure}", pytrace=False)
    last = nb.cells[-1]
    assert last.cell_type == "code", f"{path.name} must end in its conclusion's assertions"
    assert "assert " in last.source, f"{path.name} must end in its conclusion's assertions"

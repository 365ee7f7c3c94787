"""The notebooks: sources that execute, assert their conclusions and show outputs.

Each notebook is a jupytext percent-format ``.py`` (what review and the linters read)
paired with an ``.ipynb`` that keeps its outputs, so its charts show wherever the
repository is browsed. The ``.py`` is executed here (nbclient, ``python3`` kernel,
``notebooks/`` as the working directory) and ends in a cell asserting its conclusion.
Running a notebook in Jupyter and saving it changes outputs only, which these tests
ignore; editing one side alone is caught by the sync test, which says how to fix it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
jupytext = pytest.importorskip("jupytext")

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
SOURCES = sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]-*.py"))
CELL_TIMEOUT_S = 120
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # colour codes in kernel tracebacks


def _cells(nb: object) -> list[tuple[str, str]]:
    """What a pair must agree on: each cell's type and source (not outputs or metadata)."""
    return [(c.cell_type, c.source.strip()) for c in nb.cells]  # type: ignore[attr-defined]


def test_the_five_notebooks_exist_as_pairs() -> None:
    assert [p.stem for p in SOURCES] == [
        "01-clip-bounds",
        "02-cohort-floor",
        "03-histograms-are-one-release",
        "04-flam-exact-metrics",
        "05-cross-silo",
    ]
    assert all(p.with_suffix(".ipynb").exists() for p in SOURCES)
    assert sorted(NOTEBOOKS_DIR.glob("*.ipynb")) == [p.with_suffix(".ipynb") for p in SOURCES]


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_the_pair_is_in_sync(source: Path) -> None:
    text = jupytext.read(source)
    stored = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    assert text.metadata["jupytext"]["formats"] == "ipynb,py:percent"
    assert _cells(text) == _cells(stored), (
        f"{source.name} and its .ipynb differ: run `.venv/bin/jupytext --sync "
        f"notebooks/{source.name}` (the newer file wins), then `make notebooks`"
    )


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_the_committed_notebook_shows_its_outputs(source: Path) -> None:
    stored = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    code = [c for c in stored.cells if c.cell_type == "code"]
    shown = [c for c in code if c.outputs]
    assert shown, f"{source.stem}.ipynb has no outputs: run `make notebooks`"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{source.stem}.ipynb was saved with an error output"
    if "plt.show()" in source.read_text(encoding="utf-8"):
        images = [o for c in shown for o in c.outputs if "image/png" in o.get("data", {})]
        assert images, f"{source.stem}.ipynb draws charts but stores none: run `make notebooks`"


@pytest.mark.slow
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_notebook_executes_and_its_conclusion_holds(source: Path) -> None:
    nb = jupytext.read(source)
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
        pytest.fail(f"{source.name} failed:\n{failure}", pytrace=False)
    last = nb.cells[-1]
    assert last.cell_type == "code", f"{source.name} must end in its conclusion's assertions"
    assert "assert " in last.source, f"{source.name} must end in its conclusion's assertions"

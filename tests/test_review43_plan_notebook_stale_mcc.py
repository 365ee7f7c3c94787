"""Review 43 (plan): notebook 04's committed outputs came from older interval code.

Its coverage simulation is seeded (``np.random.default_rng(11)``), so its printed lines
are a function of the source and dpledger. The stored ``.ipynb`` printed, for the fleet
model, ``MCC among usable  100: nan 200: nan 500: nan 1000: nan 2000: 0.985 ...``: fewer
than 50 of 2,000 releases with a usable MCC interval below 2,000 clients. The current
code (per-class and MCC Fieller sets) makes MCC usable in most of those releases, at
coverage 1.000 / 0.999 / 0.999: a reader of the committed notebook learnt that MCC cannot
be published below 2,000 clients, which dpledger no longer says. This test replays the
notebook's first two cohorts of the fleet model (the seeded stream's first draws) and
reads the stored line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

nbformat = pytest.importorskip("nbformat")
jupytext = pytest.importorskip("jupytext")
pytest.importorskip("matplotlib")

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "04-flam-exact-metrics"


def _setup(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The notebook's imports and its 20,000-client fleet with both models' aggregates."""
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(NOTEBOOK.parent)
    cells = [c.source for c in jupytext.read(NOTEBOOK.with_suffix(".py")).cells]
    imports = next(s for s in cells if "import dpledger as dl" in s)
    fleet = next(s for s in cells if s.startswith("CAP = 100"))
    space: dict[str, Any] = {}
    for source in (imports, fleet):
        code = "\n".join(line for line in source.splitlines() if not line.startswith("%"))
        exec(compile(code, str(NOTEBOOK), "exec"), space)  # the repository's own notebook
    return space


def _stored_mcc_line() -> str:
    nb = nbformat.read(NOTEBOOK.with_suffix(".ipynb"), as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    return text.split("MCC among usable", 1)[1].splitlines()[0]


def test_the_stored_mcc_coverage_is_the_current_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    g = _setup(monkeypatch)
    agg, scale, C, cap, n_clients = (
        g["aggregates"]["fleet model"],
        g["scale"],
        g["C"],
        g["CAP"],
        g["big"].n_clients,
    )
    sim = np.random.default_rng(11)  # the notebook's stream: fleet model, cohorts 100, 200, ...
    shown = {}
    for n in (100, 200):
        true_m = agg * n / n_clients
        exact = g["classification_metrics"](true_m, labels="all")["mcc"]
        noisy = true_m + sim.laplace(0.0, scale, (2_000, C * C))
        batch = g["classification_batch"](noisy, scale, labels="all", max_total=cap * n)
        usable = batch.usable("mcc")
        hit = (batch.low["mcc"] <= exact) & (exact <= batch.high["mcc"])
        shown[n] = f"{hit[usable].mean():.3f}" if usable.sum() >= 50 else "nan"
    stored = dict(re.findall(r"(\d+): (\S+)", _stored_mcc_line()))
    assert (stored["100"], stored["200"]) == (shown[100], shown[200])

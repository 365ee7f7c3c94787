"""Review 43 (plan): notebook 03's committed outputs printed a tolerance its source no
longer computes.

Commit 72998e5 moved the notebook's Chernoff tails from 2.5e-5 to 2.5e-9 each (prose and
code: "the assertions below fail by chance with probability < 10⁻⁸"), but the ``.ipynb``
kept the outputs of the old run: its table showed the 2.5e-5 bands (-13.9% / +15.3% for
1,000 noise values, ratio tolerance 0.806–1.247), narrower than what the stated
false-failure rate allows (-18.6% / +21.2%, 0.745–1.355). The pair test compares cell
sources only, so nothing noticed. The bands are a deterministic function of the value
counts and ``ALPHA``: this test recomputes them from the source and reads them in the
stored outputs.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

nbformat = pytest.importorskip("nbformat")

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "03-histograms-are-one-release"


def _chernoff(n: int, alpha: float) -> tuple[float, float]:
    """The notebook's own band: (t_up, t_down) at which each Gamma tail's bound is alpha."""
    t = np.linspace(1e-6, 1 - 1e-6, 1_000_001)
    up, down = n * (t - np.log1p(t)), n * (-t - np.log1p(-t))
    limit = -np.log(alpha)
    return float(t[np.argmax(up >= limit)]), float(t[np.argmax(down >= limit)])


def _alpha() -> float:
    source = NOTEBOOK.with_suffix(".py").read_text(encoding="utf-8")
    m = re.search(r"^ALPHA = 1e-(\d+) / 4\b", source, re.MULTILINE)
    assert m is not None, "notebook 03 no longer sets ALPHA as 1e-k / 4: update this test"
    return 10.0 ** -int(m.group(1)) / 4


def _stored_text() -> str:
    nb = nbformat.read(NOTEBOOK.with_suffix(".ipynb"), as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def test_the_stored_bands_are_the_sources() -> None:
    text, alpha = _stored_text(), _alpha()
    rows = re.findall(r"^\s+(\d+)\s+(\d+)\s.*?-(\d+\.\d)% / \+(\d+\.\d)%", text, re.MULTILINE)
    assert [b for b, *_ in rows] == ["5", "20"], text
    band = {}
    for buckets, values, down, up in rows:
        t_up, t_down = _chernoff(int(values), alpha)
        band[buckets] = (t_up, t_down)
        assert (down, up) == (f"{t_down:.1%}"[:-1], f"{t_up:.1%}"[:-1]), (buckets, values)
    lo = (1 - band["20"][1]) / (1 + band["5"][0])
    hi = (1 + band["20"][0]) / (1 - band["5"][1])
    assert f"(tolerance {lo:.3f}–{hi:.3f};" in text

"""Review h39 (statistics): the demo charts must name the interval they draw.

The histogram and calibration charts' notes said their error bars came from the "delta
method on the unclamped release", but every bar is :func:`dpledger.sim.demo.share_interval`,
Fieller's interval (conditional on the denominator's guard): the delta method is the rule
that covered 0.886–0.938 for a dominant share and was replaced (docs/intervals.md).
Deterministic (seeded demo fleet).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dpledger.sim import plots
from dpledger.sim.demo import run_demo

pytest.importorskip("matplotlib")


def test_chart_notes_name_fiellers_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes: dict[str, str] = {}

    def keep(plt: Any, fig: Any, path: Path, note: str) -> Path:
        notes[path.name] = note
        plt.close(fig)
        return path

    monkeypatch.setattr(plots, "_save", keep)
    result = run_demo(n_clients=6_000, seed=3, ledger_path=tmp_path / "demo.db", progress=None)
    plots.write_plots(result, tmp_path / "charts")
    for name in ("error_histogram.png", "calibration_gap.png"):
        assert "delta method" not in notes[name], notes[name]
        assert "Fieller" in notes[name]

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

from dpledger.metrics import Interval
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


def test_a_gap_interval_flagged_unusable_is_drawn_hollow_grey_at_any_width(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stop 41: a calibration bucket drawn from an unusable interval narrower than the
    chart's width rule was drawn as a solid, coloured estimate; it is hollow grey, and the
    note says why."""
    drawn: dict[str, tuple[str, list[str]]] = {}

    def keep(plt: Any, fig: Any, path: Path, note: str) -> Path:
        faces = [str(x.get_markerfacecolor()) for x in fig.axes[0].lines if x.get_marker() == "o"]
        drawn[path.name] = (note, faces)
        plt.close(fig)
        return path

    real = plots.share_interval

    def flagged(*args: Any, **kwargs: Any) -> Interval:
        iv = real(*args, **kwargs)
        if args[-1] != "bucket count" or not iv.usable:
            return iv
        mid = (iv.low + iv.high) / 2  # narrow, as a FLAT interval would be before its flag
        return Interval(mid - 0.01, mid + 0.01, iv.level, iv.method, "flagged by this test")

    monkeypatch.setattr(plots, "_save", keep)
    monkeypatch.setattr(plots, "share_interval", flagged)
    result = run_demo(n_clients=6_000, seed=3, ledger_path=tmp_path / "demo.db", progress=None)
    plots.write_plots(result, tmp_path / "charts")
    note, faces = drawn["calibration_gap.png"]
    assert "flagged unusable" in note
    assert faces
    assert set(faces) == {"white"}  # every bucket hollow: none drawn as a usable estimate

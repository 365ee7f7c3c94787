"""Review 39 (CLI): ``dpledger calibrate`` on a metric of small values (rates near
1e-3) printed every noise, bias and RMSE as ``0.0`` (×1000, one decimal): the table
that compares noise against bias showed none, and "noise 0.0" reads as no noise. A
nonzero value is now shown with 3 significant digits instead of rounding to 0.0.
"""

from __future__ import annotations

import numpy as np

from dpledger.cli.main import main


def test_small_metric_values_are_not_shown_as_zero(tmp_path, capsys):
    held = tmp_path / "rates.npy"
    np.save(held, np.random.default_rng(0).exponential(1e-3, 3000))
    argv = ["calibrate", "--held-out", str(held), "--epsilon", "1", "--cohort", "2000"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in lines if line[:2] in ("p5", "p9", "p1")]
    assert len(rows) == 5
    for row in rows:
        noise, rmse = float(row[3]), float(row[5])
        assert noise > 0, row
        assert rmse > 0, row
        assert row[3] != "0.0"

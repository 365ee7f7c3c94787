"""Review 44 diff: ffe6b25 made ``ClipCalibration.table()``'s bound column show each
bound's written decimal where 4 digits would merge bounds or show ``low`` (values
1e11 + Exp(1), ``low = 1e11``: every bound read ``1e+11``). The recommendation printed
right under that column (``note``, the table's last line, the CLI's output) still wrote
the bound to 4 digits: "p100 (bound 1e+11) has the lowest RMSE", the value of ``low``,
a clip with no range, under a row that says 100000000009.36345. Deterministic."""

from __future__ import annotations

import numpy as np

import dpledger as dl


def _bound_column(table: str) -> list[str]:
    return [line.split()[1] for line in table.splitlines()[2:] if line.startswith("p")]


def test_the_recommendation_names_the_bound_its_row_shows() -> None:
    x = 1e11 + np.random.default_rng(0).exponential(1.0, 20_000)
    cal = dl.calibrate_clip(x, epsilon=1, cohort=2000, low=1e11)
    shown = dict(zip((r.percentile for r in cal.rows), _bound_column(cal.table()), strict=True))
    best = shown[cal.recommended.percentile]
    assert f"(bound {best})" in cal.note
    assert "(bound 1e+11)" not in cal.table()


def test_four_digits_where_the_table_shows_four() -> None:
    x = np.random.default_rng(0).exponential(1.0, 2000)
    cal = dl.calibrate_clip(x, epsilon=1, cohort=2000)
    assert f"(bound {cal.recommended.bound:.4g})" in cal.note


def test_a_bound_four_digits_would_show_below_low() -> None:
    """A single candidate (nothing to merge) whose 4 digits fall below ``low``: the column
    read ``1e+11`` under ``low=1e+11`` for a low of 1e11 + 0.5 and a bound of 1e11 + 5.5."""
    x = 1e11 + 1 + np.random.default_rng(0).exponential(1.0, 20_000)
    low = 1e11 + 0.5
    cal = dl.calibrate_clip(x, epsilon=1, cohort=2000, low=low, percentiles=(99,))
    table = cal.table()
    (shown,) = _bound_column(table)
    assert float(shown) > low
    assert shown == cal.rows[0].written
    assert f"low={low!r}" in table.splitlines()[0]  # the header's low, every digit
    assert f"(bound {shown})" in cal.note

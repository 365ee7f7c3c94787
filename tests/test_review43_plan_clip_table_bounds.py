"""Review 43 (plan): ``ClipCalibration.table()`` showed every candidate bound to 4
significant digits, however close the bounds.

For per-client values 1e11 + Exp(1) (``low = 1e11``) every row's bound read ``1e+11``,
the value of ``low`` itself: the table the CLI prints could not tell p50 from the
maximum, nor any candidate from no range at all. Where 4 digits would merge distinct
bounds or show one as ``low``, the column now shows each bound's ``written`` decimal
(what ``clip.source`` and ``to_clip`` give); elsewhere it is unchanged.
"""

from __future__ import annotations

import numpy as np

import dpledger as dl


def _bound_column(table: str) -> list[str]:
    return [line.split()[1] for line in table.splitlines()[2:] if line.startswith("p")]


def test_bounds_on_an_offset_are_told_apart() -> None:
    x = 1e11 + np.random.default_rng(0).exponential(1.0, 20_000)
    cal = dl.calibrate_clip(x, epsilon=1, cohort=2000, low=1e11)
    shown = _bound_column(cal.table())
    assert len(set(shown)) == len(cal.rows)
    assert all(float(s) > cal.low for s in shown)
    assert shown == [r.written for r in cal.rows]


def test_four_digits_where_they_tell_bounds_apart() -> None:
    x = np.random.default_rng(0).exponential(1.0, 2000)
    cal = dl.calibrate_clip(x, epsilon=1, cohort=2000)
    assert _bound_column(cal.table()) == [f"{r.bound:.4g}" for r in cal.rows]

"""Review 43 (plan): ``ClipCalibration.to_clip`` wrote a candidate's bound with 6
significant digits, however narrow the clip it bounds.

Six digits of the bound are six digits of the clip's *width* only when ``low`` is 0 and
the values sit near 0. For a metric on an offset (per-client values 1e11 + Exp(1)):
- with ``low = 0`` p99 = 100000000004.6 was written ``high = 1e+11``, a clip below every
  held-out value: the policy it goes into clips 100% of the fleet while its
  ``clip.source`` says "p99 = 1e+11";
- with ``low = 1e11`` (the natural lower bound), ``to_clip()`` raised ``InvalidInput:
  clip low must be below high`` for a candidate the table had just recommended.
- with ties (a fleet of counts scaled to 1.0000004), the maximum was written ``1``, below
  the tied values, so the "p100, 0% clipped" clip clipped a third of the fleet.
The bound is now written with as many digits as keep it within 5e-6 of the clip's
width and clipping the same held-out values (six, as before, whenever that
suffices: the shipped notebook's line is unchanged).
"""

from __future__ import annotations

import numpy as np
import pytest

import dpledger as dl


def _held_out() -> np.ndarray:
    return 1e11 + np.random.default_rng(0).exponential(1.0, 20_000)


@pytest.mark.parametrize("low", [0.0, 1e11])
@pytest.mark.parametrize("pct", [90.0, 99.0])
def test_the_written_clip_clips_what_its_row_says(low: float, pct: float) -> None:
    x = _held_out()
    cal = dl.calibrate_clip(x, epsilon=1, cohort=2000, low=low, percentiles=(90, 99, 100))
    row = cal.row(pct)
    clip = cal.to_clip(pct)
    high = float(clip.high)
    assert float(clip.low) == low < high
    assert abs(high - row.bound) <= 5e-6 * (row.bound - low)
    assert np.mean(x > high) == pytest.approx(row.clipped_fraction)
    assert clip.source.endswith(f"p{pct:g} = {clip.high.numerator / clip.high.denominator!r}")


def test_six_digits_where_they_suffice() -> None:
    x = np.random.default_rng(0).exponential(1.0, 2000)
    cal = dl.calibrate_clip(x, epsilon=1, cohort=2000)
    assert cal.to_clip(99).high == dl.policy.to_fraction(f"{cal.row(99).bound:.6g}")
    assert cal.source_string(99).endswith(f"p99 = {cal.row(99).bound:.6g}")


def test_a_tied_maximum_is_not_rounded_below_its_ties() -> None:
    x = np.repeat([0.25, 0.5, 1.0000004], 100)
    cal = dl.calibrate_clip(x, epsilon=1, cohort=2000, percentiles=(50, 100))
    assert cal.row(100).clipped_fraction == 0
    assert np.mean(x > float(cal.to_clip(100).high)) == 0

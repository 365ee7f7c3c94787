"""Review 44 diff 2: d864503 took each candidate's "lowered" (what clipping removes above
the bound) as tail sums of x − max accumulated from the top minus (bound − max)·count.
Under a far maximum every term of a tail is ~max: with one client at −9.9e11, one at
+9.9e11 and 19,998 in [0, 1) (``low = 0``), the tails ran to ~-2e16 and their difference
lost whole units, so p50's bias read -0.203 for the true -0.124 and p99's -4.1e-05 for the
true +4.7e-06 (wrong sign). Its parent was right on this input; the mirror of the case
d864503 fixed (tests/test_review44_diff_clip_bias_far_mass.py, which must keep passing).
Deterministic: the calibration draws no noise."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpledger as dl


def _exact_bias(x: np.ndarray, low: float, bound: float) -> float:
    return math.fsum(np.clip(x, low, bound) - x) / x.size


@pytest.mark.parametrize("below", [True, False])  # an outlier raised to low, or none
def test_bias_under_a_far_maximum(below: bool) -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate([[-9.9e11] if below else [], rng.uniform(0, 1, 19_998), [9.9e11]])
    cal = dl.calibrate_clip(x, epsilon=1, cohort=1000, low=0.0, percentiles=(50, 90, 99, 100))
    for row in cal.rows:
        want = _exact_bias(x, 0.0, row.bound)
        assert row.bias == pytest.approx(want, rel=1e-6, abs=1e-8), row.percentile


def test_bias_with_ties_at_the_maximum_and_equal_bounds() -> None:
    x = np.array([-3.0, 1.0, 2.0, 2.0, 5.0, 5.0, 5.0])
    cal = dl.calibrate_clip(x, epsilon=1, cohort=10, low=-1.0, percentiles=(60, 70, 90, 100))
    for row in cal.rows:
        assert row.bias == pytest.approx(_exact_bias(x, -1.0, row.bound), abs=1e-15)

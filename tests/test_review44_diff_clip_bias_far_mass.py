"""Review 44 diff: cb352c6 took each candidate's clipping bias from prefix sums of the
held-out values centred at their median. The prefix sum it differenced for the top tail
ran from the *bottom*: with a mass of values far from the median (45% of the clients at
0, the rest at 9.9e11 + Exp(1), ``low = 0``), ``prefix[-1] − prefix[n_le]`` was two sums
of ~-8.9e16 whose difference is a few thousand, and every bias below the maximum came out
wrong, most with the wrong sign (p99: +0.036 for the true −0.0099), though only the top
is clipped and the bias is then ≤ 0 (ClipCandidate's docstring). The median-centred
offset case of review 43 passes; this neighbouring one did not.
Deterministic: the calibration draws no noise."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpledger as dl


def _exact_bias(x: np.ndarray, low: float, bound: float) -> float:
    return math.fsum(np.clip(x, low, bound) - x) / x.size


@pytest.mark.parametrize("zeros", [0.45, 0.55])  # the median among the far mass, or not
def test_bias_with_a_far_mass_below_the_median(zeros: float) -> None:
    n = 200_000
    k = int(zeros * n)
    rng = np.random.default_rng(0)
    x = np.concatenate([np.zeros(k), 9.9e11 + rng.exponential(1.0, n - k)])
    cal = dl.calibrate_clip(x, epsilon=1, cohort=2000, low=0.0, percentiles=(90, 95, 99, 100))
    for row in cal.rows:
        want = _exact_bias(x, 0.0, row.bound)
        assert row.bias <= 0.0, row.percentile  # only the top is clipped
        assert row.bias == pytest.approx(want, rel=1e-6, abs=1e-9), row.percentile


def test_bias_raising_a_far_mass_to_low() -> None:
    """Values below ``low`` close to it while the median is far: what raising adds."""
    n = 200_000
    rng = np.random.default_rng(1)
    x = np.concatenate([-5e11 - rng.exponential(1.0, n // 4), np.zeros(n - n // 4)])
    low = -5e11
    cal = dl.calibrate_clip(x, epsilon=1, cohort=2000, low=low, percentiles=(99, 100))
    for row in cal.rows:
        want = _exact_bias(x, low, row.bound)
        assert row.bias == pytest.approx(want, rel=1e-6), row.percentile

"""Review 43 (plan): a clip calibration's bias, computed from prefix sums of the raw values.

``calibrate_clip`` accepts held-out values and a ``low`` up to 1e12 in magnitude. It took
each candidate's clipping bias as ``clipped_sum / n − total / n`` from prefix sums of the
raw values, two sums of ~n·1e11 whose difference is a few units: for a metric on a large
offset (values 1e11 + Exp(1), ``low = 1e11``, 200,000 held-out clients) the printed bias
was off by 20% at p50 and by half at p99 (-4.7e-3 for the true -10.3e-3), so p99's RMSE
read 5.7e-3 for the true 10.8e-3 and p99 was *recommended* over the maximum (true RMSE
8.3e-3). Deterministic: the calibration draws no noise.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpledger as dl


def _held_out() -> np.ndarray:
    return 1e11 + np.random.default_rng(0).exponential(1.0, 200_000)


def _exact_bias(x: np.ndarray, low: float, bound: float) -> float:
    """mean(clip(x, low, bound)) − mean(x), summed exactly (math.fsum)."""
    return math.fsum(np.clip(x, low, bound) - x) / x.size


@pytest.mark.parametrize("low", [1e11, 1e11 - 5.0])
def test_bias_on_a_large_offset_is_the_clipped_mean_minus_the_mean(low: float) -> None:
    x = _held_out()
    cal = dl.calibrate_clip(x, epsilon=1, cohort=2000, low=low)
    for row in cal.rows:
        want = _exact_bias(x, low, row.bound)
        assert row.bias == pytest.approx(want, rel=1e-6, abs=1e-9), row.percentile
        assert row.rmse == pytest.approx(math.hypot(want, math.sqrt(2) * row.noise_scale), rel=1e-6)


def test_the_recommendation_is_the_lowest_true_rmse() -> None:
    x = _held_out()
    cal = dl.calibrate_clip(x, epsilon=1, cohort=2000, low=1e11)
    true_rmse = {
        r.percentile: math.hypot(_exact_bias(x, 1e11, r.bound), math.sqrt(2) * r.noise_scale)
        for r in cal.rows
    }
    assert cal.recommended.percentile == min(true_rmse, key=true_rmse.__getitem__) == 100.0


def test_bias_raising_values_below_low_on_an_offset() -> None:
    x = 1e11 + np.random.default_rng(1).normal(0.0, 1.0, 100_000)  # ~16% below low
    cal = dl.calibrate_clip(x, epsilon=1, cohort=2000, low=1e11 - 1.0, percentiles=(60, 99, 100))
    for row in cal.rows:
        assert row.bias == pytest.approx(_exact_bias(x, 1e11 - 1.0, row.bound), rel=1e-6)
    assert cal.row(100).bias > 0  # only raised: the clipped mean is above the mean

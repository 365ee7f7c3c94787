"""R² from the FLAM regression sums invents 0.0 when the shift is far from the data (review 44 G).

``regression_measures`` defaults the public shift c to 0 without ``y_bounds`` and to the
bounds' midpoint with them, and its docstring says the metrics "do not depend on it".
With y = 1e6 + N(0, 1) and c = 0, Σ(y−c)² ≈ n·1e12 and Σ(y−ȳ)² ≈ n: the total sum of
squares falls under the 1e-12·Σ(y−c)² cancellation floor and ``regression_metrics``
reports R² = 0.0 ("y is constant") where scikit-learn on the concatenated data gives
0.80; wide symmetric ``y_bounds`` (−1e7, 1e7) do the same. Nothing flags it. At 1e3 the
value is off by ~2e-11 (beyond the 1e-12 FLAM exactness) without reaching the floor.
The five sums cannot tell a constant y from this cancellation, so the fix needs a
decision (refuse or flag R² when Σ(y−ȳ)² is within rounding of Σ(y−c)² and not exactly
0; or require a public shift near the mean), hence xfail.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.metrics import regression_measures, regression_metrics


def _sklearn_r2(y: np.ndarray, yh: np.ndarray) -> float:
    ss_res = float(np.sum((y - yh) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    return 1.0 - ss_res / ss_tot


@pytest.mark.xfail(
    strict=True,
    reason="design decision: the five FLAM sums cannot tell constant y from cancellation "
    "under a far shift; refuse/flag R² there, or require a shift near the mean",
)
@pytest.mark.parametrize("kwargs", [{}, {"y_bounds": (-1e7, 1e7)}])
def test_r2_is_not_invented_under_a_far_shift(kwargs: dict[str, object]) -> None:
    rng = np.random.default_rng(2)
    y = 1e6 + rng.normal(0.0, 1.0, 34)
    yh = y + rng.normal(0.0, 0.5, 34)
    truth = _sklearn_r2(y, yh)
    assert 0.5 < truth < 0.95  # y is far from constant
    rows = regression_measures(y, yh, offsets=[0, 10, 20], **kwargs)  # type: ignore[arg-type]
    got = regression_metrics(rows.sum(axis=0))["r2"]
    assert abs(got - truth) <= 1e-12, (got, truth)  # got 0.0 ("constant y")

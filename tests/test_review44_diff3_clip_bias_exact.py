"""Review 44 diff 3: f2ca603 sums what clipping removes above each bound in terms ≥ 0, but
the bias is still ``(raised − lowered) / n`` of two rounded doubles. With a far minimum
raised to ``low`` and a far maximum lowered to the bound, both are ~9.9e11 and their
difference (a few units) keeps only what their roundings left: each term ``x − b`` near
1e12 is itself rounded by up to 6e-5. On 2,000 clients in [0, 1) plus −9.9e11 and
+9.9e11 (the fleet f2ca603's message cites), p99's bias came out 4.3975e-4 for the exact
4.3978e-4 (relative error 7e-5), and with 50 clients at each extreme p90's relative error
was 2.3e-4. The reference here is exact (fractions.Fraction over the values); the bias
must match it to a relative 1e-12. Deterministic: the calibration draws no noise."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import dpledger as dl


def _exact_bias(x: np.ndarray, low: float, bound: float) -> Fraction:
    lo, b = Fraction(low), Fraction(bound)
    raised = sum((lo - Fraction(v) for v in x.tolist() if v < low), Fraction(0))
    lowered = sum((Fraction(v) - b for v in x.tolist() if v > bound), Fraction(0))
    return (raised - lowered) / x.size


def _fleet(kind: str) -> np.ndarray:
    rng = np.random.default_rng(1)
    base = rng.random(2000)
    if kind == "one_each":
        return np.concatenate([base, [-9.9e11, 9.9e11]])
    if kind == "mass_each":
        return np.concatenate([base, np.full(50, -9.9e11), 9.9e11 + rng.random(50)])
    if kind == "far_max":
        return np.concatenate([base, [9.9e11]])
    if kind == "far_min":
        return np.concatenate([base, [-9.9e11]])
    return np.concatenate([base * 1e-3, 1e11 + rng.random(500)])  # mass far from the median


@pytest.mark.parametrize("kind", ["one_each", "mass_each", "far_max", "far_min", "far_mass"])
def test_bias_equals_the_exact_reference(kind: str) -> None:
    x = _fleet(kind)
    pcts = (5, 25, 50, 75, 90, 95, 99, 99.9, 100)
    cal = dl.calibrate_clip(x, epsilon=1, cohort=100, low=0.0, percentiles=pcts)
    for row in cal.rows:
        want = _exact_bias(x, 0.0, row.bound)
        err = abs(Fraction(row.bias) - want)
        assert err <= abs(want) * Fraction(1, 10**12), (row.percentile, row.bias, float(want))


def test_bias_with_ties_equal_bounds_and_one_client() -> None:
    x = np.array([-3.0, 1.0, 2.0, 2.0, 5.0, 5.0, 5.0])
    cal = dl.calibrate_clip(x, epsilon=1, cohort=10, low=-1.0, percentiles=(60, 70, 90, 100))
    assert [row.bias for row in cal.rows] == [
        float(_exact_bias(x, -1.0, r.bound)) for r in cal.rows
    ]
    one = dl.calibrate_clip(np.array([3.0]), epsilon=1, cohort=10, low=-1.0, percentiles=(50,))
    assert one.rows[0].bias == 0.0


def test_a_bias_below_the_smallest_double_is_0_not_minus_0() -> None:
    m = 2.2250738585072014e-308  # a bound a policy takes; what clipping removes: 1 subnormal / 3
    x = np.array([0.0, m, np.nextafter(m, 1.0)])
    cal = dl.calibrate_clip(x, epsilon=1, cohort=10, low=0.0, percentiles=(50,))
    assert str(cal.rows[0].bias) == "0.0"

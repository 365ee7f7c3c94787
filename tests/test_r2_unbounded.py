"""R² with no lower bound is UNUSABLE (statistics review, D3).

R²'s range is (−∞, 1]. Where Σ(y−ȳ)² is small against its noise, Fieller's interval for
SSE/SST has no lower bound: (−∞, 1] is the whole range, which covers trivially but says
nothing, yet it was published as usable with a quotable point value (54% of releases at
n = 200 in the review's probe; the table printed ``r2  -0.0444  [-inf, 1.0000]``). Such
an interval is now flagged unusable (code ``UNBOUNDED``) with a reason in words.

Deterministic (seeded numpy noise, test-only simulation): 400 releases at n = 200 where
before the fix 213 of 375 usable had low = −∞; none does now (162 usable). The coverage
check among usable releases (k = 162, held to 0.95 − 3.72·√(0.95·0.05/k) = 0.888) has
false-failure probability 1e-4 at a true 0.95; measured 0.994 (overall 0.998, held to
0.93: 8e-4 at a true 0.95).
"""

from __future__ import annotations

import math

import numpy as np

from dpledger.metrics import flam_regression
from dpledger.metrics import records as rec
from dpledger.metrics._assemble import Batch, to_intervals
from dpledger.metrics.uncertainty import regression_batch


def _batch(releases: int = 400) -> tuple[dict[str, float], Batch]:
    codec = rec.record_regression_codec(y_clip=(0, 10), y_pred_clip=(0, 10), cap=1.0)
    n = 200
    rng = np.random.default_rng(0)
    y = np.clip(6 + 2.0 * rng.standard_normal(n), 0, 10)
    yh = np.clip(y - 0.6 * rng.standard_normal(n), 0, 10)
    r, d = y - yh, y - 5
    sums = np.array([np.sum(r * r), np.sum(abs(r)), d.sum(), np.sum(d * d), n])
    truth = flam_regression.regression_metrics(sums)
    x = sums / codec.decode(np.ones(5)) + np.random.default_rng(1).laplace(0, 1.0, (releases, 5))
    return truth, regression_batch(x, codec, 1.0, distribution="laplace", cohort=n)


def test_an_r2_interval_without_a_lower_bound_is_unusable_with_a_reason() -> None:
    truth, batch = _batch()
    usable = batch.usable("r2")
    assert np.isfinite(batch.low["r2"][usable]).all()  # before: 216 of 400 at −∞, usable
    from dpledger.metrics._assemble import UNBOUNDED

    unbounded = np.flatnonzero(batch.code["r2"] == UNBOUNDED)
    assert unbounded.size > 100
    iv = to_intervals(batch, 0.95, int(unbounded[0]))["r2"]
    assert not iv.usable
    assert (iv.low, iv.high) == (-math.inf, 1.0)
    assert iv.reason is not None
    assert "no lower bound" in iv.reason
    hit = (batch.low["r2"] <= truth["r2"]) & (truth["r2"] <= batch.high["r2"])
    assert hit.mean() >= 0.93
    k = int(usable.sum())
    assert k >= 50
    assert hit[usable].mean() >= min(0.93, 0.95 - 3.72 * math.sqrt(0.95 * 0.05 / k))

"""Review (hostile statistics): labels="present" micro averages under-cover.

With ``labels="present"`` the micro averages (precision/recall/F1 micro) and
recall_weighted are not given accuracy's Fieller interval (``_ACCURACY_LIKE`` in
``dpledger/metrics/_flam_intervals.py`` applies to ``labels="all"`` only): they take the
delta interval of Σ_L tp / Σ_L p over the classes L whose *noisy* t + p is > 0
(``_confusion_linear.classification_gradients``: ``mask = t + p > 0``), a cut on the
noise. With a dominant class (90%) and small classes within the noise every release is
published and the interval misses high: 0.84–0.93 covered (3–30 classes, accuracy
0.9–0.999, noise 0.5–1 of a mean cell, both laws). The truth is scikit-learn's
metric with labels = the classes present in the exact matrix (all of them here): 0.99.

Seeded numpy noise of the public scale (post-processing: the intervals never see
OpenDP). False-failure rate: the check is the coverage tests' floor,
level − 3.72·√(level(1 − level)/k), about 1e-4 at a true 0.95.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from coverage_cases import hard_confusion, published_floor

from dpledger.metrics import flam
from dpledger.metrics.uncertainty import classification_batch

RELEASES = 4000


@pytest.mark.parametrize("key", ["precision_micro", "recall_micro", "f1_micro", "recall_weighted"])
def test_present_micro_covers_with_a_dominant_class(key: str) -> None:
    c, n = 17, 1e6
    truth_m = hard_confusion(c, "dominant", 0.99, n)
    truth = flam.classification_metrics(truth_m, labels="present")[key]
    sigma = math.sqrt(2.0) * 0.6 * n / c**2  # Gaussian noise 0.6 of a mean cell
    rng = np.random.default_rng(20261203)
    noisy = truth_m.reshape(1, -1) + rng.normal(0.0, sigma, (RELEASES, c * c))
    batch = classification_batch(
        noisy, sigma, labels="present", distribution="gaussian", max_total=n
    )
    ok = batch.usable(key)
    covered = (batch.low[key] <= truth) & (truth <= batch.high[key])
    k = int(ok.sum())
    assert k >= RELEASES // 2
    # measured 0.89 (all published): misses all above the interval
    assert covered[ok].mean() >= published_floor(k), (covered[ok].mean(), k)

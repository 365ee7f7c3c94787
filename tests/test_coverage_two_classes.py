"""Known defect (cls2): at 2 classes a hard publication cut selects deflated ratios.

At 2 balanced classes with accuracy 0.6–0.7 and noise 0.1 × the mean cell
(:data:`coverage_cases.TWO_CLASS_SELECTION`), the minority predicted count lies just
below ``SECURE`` × its threshold, so precision_macro is published only where noise pushed
that count past the cut. Laplace noise carries such an excess in ONE cell: when that is
the false-positive cell, the class's precision is deflated far beyond its interval.
Measured on ``main`` (adc5205) with these seeds, 10,000 releases per cell, among usable
releases: precision_macro 0.661 (k = 180) and 0.815 (k = 926) under Laplace, 0.871
(k = 341) and 0.904 (k = 1,987) under Gaussian; MCC 0.916 (k = 3,767; Laplace, accuracy
0.6, 20,000 releases of another seed).
No guard moved along the count fixes it (the noise's tail is memoryless, so a higher cut
moves the failing cell, it does not remove it); a fix needs an interval conditional on
the cut under the noise law (see /work/research/notes/cls2.md).

The test is marked ``xfail(strict=True)``: it fails today, and a fix makes it XPASS,
which fails the suite until the marker is removed. After a fix, each (cell, metric) with
k ≥ 50 usable is held to ``min(0.93, 0.95 − 3.72·√(0.95·0.05/k))`` (false failure 1e-4
per check at a true 0.95; < 0.3% over the 2 × 2 × 7 checks, union bound). Fixed seeds:
today every one of the 4 cases fails on precision_macro (by ≥ 2 s.e.).
"""

from __future__ import annotations

import math

import pytest
from coverage_cases import TWO_CLASS_SELECTION, hard_classification_case

RELEASES = 10_000
KEYS = ("balanced_accuracy", "precision_macro", "recall_macro", "f1_macro",
        "precision_weighted", "f1_weighted", "mcc")  # fmt: skip


def _floor(k: int) -> float:
    return min(0.93, 0.95 - 3.72 * math.sqrt(0.95 * 0.05 / k))


@pytest.mark.xfail(strict=True, reason="cls2: 2-class SECURE cut selects deflated precision")
@pytest.mark.parametrize("dist", ["laplace", "gaussian"])
@pytest.mark.parametrize("regime", TWO_CLASS_SELECTION)
def test_two_class_averages_cover_among_published_near_the_secure_cut(
    dist: str, regime: tuple[int, str, float, float]
) -> None:
    seed = 7000 + TWO_CLASS_SELECTION.index(regime) + 100 * (dist == "gaussian")
    truth, batch = hard_classification_case(regime, dist, RELEASES, seed)
    for key in KEYS:
        hit = (batch.low[key] <= truth[key]) & (truth[key] <= batch.high[key])
        usable = batch.usable(key)
        k = int(usable.sum())
        if k >= 50:
            assert hit[usable].mean() >= _floor(k), (key, "among usable", hit[usable].mean(), k)

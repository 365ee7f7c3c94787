"""2 classes: a hard publication cut selected deflated ratios (cls2); fixed by bounding (cls3).

At 2 balanced classes with accuracy 0.6–0.7 and noise 0.1–0.12 × the mean cell
(:data:`coverage_cases.TWO_CLASS_SELECTION`), the minority predicted count lies near the
cut that used to decide whether a macro average was published (``SECURE`` × its
threshold, flagged below). Only releases whose noise pushed that count past it were
published, and Laplace noise carries such an excess in ONE cell: when that is the
false-positive cell the class's precision is deflated far beyond its interval. On
``main`` (adc5205), 10,000 releases per cell, among usable releases: precision_macro
0.661 (k = 180) and 0.815 (k = 926) under Laplace, 0.871 (k = 341) and 0.904 (k = 1,987)
under Gaussian; MCC 0.916 (k = 3,767; Laplace, accuracy 0.6, 20,000 releases of
another seed); at 0.6 / 0.12 (Laplace, 20,000) precision_macro 0.652, MCC 0.756,
f1_macro 0.935.

Since cls3 a class is measured only when its count's own interval lies above its
threshold, and otherwise BOUNDED in [0, 1] and published with that bound
(``_flam_intervals._two_class_measured``); MCC takes the hull of √(J·Mk) over balanced
accuracy's and precision_macro's intervals where a class is bounded. With these seeds
(10,000 releases per case) every key covers 0.953–0.997 among usable releases, every
macro average is usable in 100% of releases and MCC in 72–92%.

Each (cell, metric) with k ≥ 50 usable is held to ``min(0.93, 0.95 − 3.72·√(0.95·0.05/k))``
(false failure 1e-4 per check at a true 0.95; < 0.5% over the 3 × 2 × 7 checks, union
bound). The fix must not pass by flagging or by publishing [0, 1]: every key is usable
in ≥ 60% of releases (measured ≥ 72%) and the mean width of balanced accuracy,
recall_macro and f1_macro is ≤ 0.3 (measured ≤ 0.22), precision_macro's ≤ 0.7
(measured 0.26–0.56: its minority class is often bounded). Those bounds lie ≥ 10
binomial s.e. from the measured values: with fixed seeds they fail only if the rule
changes.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from coverage_cases import TWO_CLASS_SELECTION, hard_classification_case

RELEASES = 10_000
KEYS = ("balanced_accuracy", "precision_macro", "recall_macro", "f1_macro",
        "precision_weighted", "f1_weighted", "mcc")  # fmt: skip
MIN_USABLE_SHARE = 0.6
MAX_WIDTH = {"balanced_accuracy": 0.3, "recall_macro": 0.3, "f1_macro": 0.3,
             "precision_macro": 0.7}  # fmt: skip


def _floor(k: int) -> float:
    return min(0.93, 0.95 - 3.72 * math.sqrt(0.95 * 0.05 / k))


def _covered_among_usable(truth: dict[str, float], batch: Any, key: str) -> Any:
    """Assert ``key`` covers at :func:`_floor` among usable releases (k ≥ 50); the usable mask."""
    hit = (batch.low[key] <= truth[key]) & (truth[key] <= batch.high[key])
    usable = batch.usable(key)
    k = int(usable.sum())
    if k >= 50:
        assert hit[usable].mean() >= _floor(k), (key, "among usable", hit[usable].mean(), k)
    return usable


@pytest.mark.parametrize("dist", ["laplace", "gaussian"])
@pytest.mark.parametrize("regime", TWO_CLASS_SELECTION)
def test_two_class_averages_cover_among_published_near_the_cut(
    dist: str, regime: tuple[int, str, float, float]
) -> None:
    seed = 7000 + TWO_CLASS_SELECTION.index(regime) + 100 * (dist == "gaussian")
    truth, batch = hard_classification_case(regime, dist, RELEASES, seed)
    for key in KEYS:
        usable = _covered_among_usable(truth, batch, key)
        assert usable.mean() >= MIN_USABLE_SHARE, (key, "usable share", usable.mean())
        if key in MAX_WIDTH:
            width = float((batch.high[key] - batch.low[key])[usable].mean())
            assert width <= MAX_WIDTH[key], (key, "mean width", width)


STRESS = (
    ((2, "balanced", 0.8, 0.3), "laplace"),
    ((2, "70/30", 0.99, 0.3), "laplace"),
    ((2, "70/30", 0.99, 0.3), "gaussian"),
)
"""Known gap (the 2-class rule's leftover): noise 0.3 × the mean cell, a good model. Both
true counts sit near the measured threshold, so a macro average is flagged (both classes
bounded) in most releases — and the few published (2–11%) are those where noise carried
ONE class's count over it, which deflates that class's ratio. With 20,000 releases:
balanced 0.8 under Laplace, balanced accuracy and recall_macro 0.82–0.85 among published,
precision_macro 0.84–0.87, MCC 0.66–0.71; 70/30 at accuracy 0.99 (outside review),
Laplace 0.81–0.89 and Gaussian 0.91–0.92 (MCC 0.88 and 0.91). At noise 0.2–0.25 these
cells cover (0.92–0.97). They were all flagged before the rule. A gate on the noisy total
does not help (it is another cut: 0.60–0.74 among the 0.5–1% it lets through); a fix needs
an interval for the measured class conditional on the other being bounded, or a
publication decision made from public quantities only."""


@pytest.mark.xfail(
    strict=True, reason="2-class leftover: the both-bounded flag selects at noise 0.3"
)
@pytest.mark.parametrize(("regime", "dist"), STRESS)
def test_two_class_stress_cells_cover_among_published(
    regime: tuple[int, str, float, float], dist: str
) -> None:
    """Strict xfail: each cell fails today, and a fix makes it XPASS, which fails the suite
    until the marker goes. Same floor as above (false failure < 0.1% per cell at 0.95)."""
    truth, batch = hard_classification_case(
        regime, dist, RELEASES, 7300 + STRESS.index((regime, dist))
    )
    for key in KEYS:
        _covered_among_usable(truth, batch, key)

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
recall_macro and f1_macro is ≤ 0.4, precision_macro's ≤ 0.7 (measured 0.26–0.56: its
minority class is often bounded). Those bounds lie ≥ 10 binomial s.e. from the measured
values: with fixed seeds they fail only if the rule changes. Since s26c (stats4, F5) the
2-class macro averages take simultaneous per-class Fieller intervals wherever a class
is not far clear of the noise (``_simultaneous``): here they cover 0.956–0.998, and the
mean width of balanced accuracy, recall_macro and f1_macro is ≤ 0.34 (was ≤ 0.22; the
Laplace cell at noise 0.12 is 0.23 → 0.33, the others within 0.02), precision_macro's
0.21–0.43 — the price, in these cells, of removing the class-count cut (the bound was
0.3 before).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from coverage_cases import TWO_CLASS_SELECTION, hard_classification_case

from dpledger.metrics._assemble import TOO_NOISY, _reason

RELEASES = 10_000
KEYS = ("balanced_accuracy", "precision_macro", "recall_macro", "f1_macro",
        "precision_weighted", "f1_weighted", "mcc")  # fmt: skip
MIN_USABLE_SHARE = 0.6
MAX_WIDTH = {"balanced_accuracy": 0.4, "recall_macro": 0.4, "f1_macro": 0.4,
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
    ((2, "balanced", 0.9, 0.2), "laplace"),
    ((2, "balanced", 0.99, 0.2), "gaussian"),
)
"""Good models at noise 0.2–0.3 × the mean cell. Both true counts sit near the measured
threshold, so most releases have both classes bounded — and the ones whose noise carried ONE
class's count over it deflate that class's ratio. Before the public noise rule, among
published releases (13–35% at 0.2, 2–11% at 0.3): balanced accuracy 0.88–0.93 and MCC
0.80–0.90 at 0.2 (accuracy 0.9–0.99), 0.82–0.89 at 0.3 (balanced 0.8 under Laplace, 70/30 at
0.99 under both laws; the 70/30 cell found by the outside review). A gate on the noisy total
did not help (another cut: 0.60–0.74 among the 0.5–1% it let through). Now
:data:`TWO_CLASS_MAX_NOISE` flags them all from public quantities (the noise scale and the
cohort's largest total): no release is selected."""


@pytest.mark.parametrize(("regime", "dist"), STRESS)
def test_two_class_averages_are_not_published_above_the_public_noise_limit(
    regime: tuple[int, str, float, float], dist: str
) -> None:
    """Every macro average and MCC flagged TOO_NOISY with its reason, every release (the rule
    reads no released value); the weighted averages and accuracy are not touched."""
    truth, batch = hard_classification_case(
        regime, dist, 2_000, 7300 + STRESS.index((regime, dist))
    )
    for key in ("balanced_accuracy", "precision_macro", "recall_macro", "f1_macro", "mcc"):
        assert not batch.usable(key).any(), key  # a few fail an earlier guard: its reason
        noisy = np.flatnonzero(batch.code[key] == TOO_NOISY)
        assert len(noisy) >= 0.9 * len(batch.code[key]), key
        assert "0.15 of a cell" in (_reason(batch, key, int(noisy[0])) or ""), key
        lo, hi = (-1.0, 1.0) if key == "mcc" else (0.0, 1.0)
        assert (batch.low[key] == lo).all()
        assert (batch.high[key] == hi).all()
    for key in ("accuracy", "precision_weighted", "f1_weighted"):
        assert not (batch.code[key] == TOO_NOISY).any(), key
        _covered_among_usable(truth, batch, key)


def test_the_noise_limit_reads_only_public_quantities() -> None:
    """The same noise with the public maximum 1.5× larger: nothing flagged TOO_NOISY at 0.2
    of a true cell (0.13 of the largest possible one); without a maximum, never."""
    _, batch = hard_classification_case((2, "balanced", 0.6, 0.2), "laplace", 500, 7400)
    assert (batch.code["balanced_accuracy"] == TOO_NOISY).all()
    for options in ({"max_total": 1.5e6}, {"max_total": math.inf}):
        _, other = hard_classification_case(
            (2, "balanced", 0.6, 0.2), "laplace", 500, 7400, **options
        )
        assert not (other.code["balanced_accuracy"] == TOO_NOISY).any(), options


PERFECT = (
    ((2, "dominant", 1.0, 0.14), "laplace"),
    ((2, "5%", 1.0, 0.14), "laplace"),
    ((2, "dominant", 1.0, 0.1), "gaussian"),
    ((2, "5%", 1.0, 0.1), "gaussian"),
)
"""Accuracy exactly 1.0 (MCC = 1) with the minority class (10% or 5%) bounded: MCC's hull
covers 1 only where both balanced accuracy's and precision_macro's upper ends reach 1, and
their misses come from noise in different cells. With the two at level 0.95 (before
stats25) these cells covered 0.931–0.932 among published releases (10,000 each, these
seeds; the outside audit stats3, B3: 0.926–0.939); with each at 1 − α/2 (Bonferroni)
0.958–0.969, median width 1.09–1.17 (was 1.08–1.14)."""


@pytest.mark.parametrize(("regime", "dist"), PERFECT)
def test_two_class_mcc_covers_a_perfect_model(
    regime: tuple[int, str, float, float], dist: str
) -> None:
    """Held to 0.95 − 3.72 s.e. (≈ 0.942 at k ≈ 9,700 published: false failure 1e-4 per
    check at a true 0.95; < 0.05% over the 4 checks), which the former hull failed by
    ≥ 4 s.e. in every cell; MCC published in ≥ 95% of releases (measured 97%)."""
    truth, batch = hard_classification_case(
        regime, dist, RELEASES, 7500 + PERFECT.index((regime, dist))
    )
    assert truth["mcc"] == 1.0
    usable = batch.usable("mcc")
    k = int(usable.sum())
    assert usable.mean() >= 0.95, usable.mean()
    hit = (batch.low["mcc"] <= 1.0) & (batch.high["mcc"] >= 1.0)
    floor = 0.95 - 3.72 * math.sqrt(0.95 * 0.05 / k)
    assert hit[usable].mean() >= floor, (hit[usable].mean(), k)


def test_two_class_mcc_hull_takes_its_components_at_one_minus_half_alpha() -> None:
    """Both methods: where a class is bounded, MCC's interval is the hull of sign·√(J·Mk)
    over balanced accuracy's and precision_macro's intervals at level 0.975 (Bonferroni),
    checked against a batch run at that level (``method="monte_carlo"`` had the same
    defect as delta: stats3, B3)."""
    for method in ("delta", "monte_carlo"):
        options: dict[str, Any] = {
            "method": method,
            "draws": 1000,
        }  # the fewest accepted (MIN_DRAWS)
        _, batch = hard_classification_case(
            (2, "dominant", 1.0, 0.14), "laplace", 300, 7600, **options
        )
        _, parts = hard_classification_case(
            (2, "dominant", 1.0, 0.14), "laplace", 300, 7600, level=0.975, **options
        )
        hull = (batch.bounded["mcc"] > 0) & batch.usable("mcc")
        assert hull.mean() > 0.9, method
        j = 2.0 * parts.high["balanced_accuracy"] - 1.0
        m = 2.0 * parts.high["precision_macro"] - 1.0
        neg = -np.sqrt(np.maximum(-j, 0.0) * np.maximum(-m, 0.0))
        top = np.where((j > 0) & (m > 0), np.sqrt(np.abs(j * m)), neg)
        assert np.allclose(batch.high["mcc"][hull], top[hull]), method

"""Acceptance (issue 11): every published interval covers at 95%, or says it cannot.

For each regime of ``tests/coverage_cases.py`` — the issue's grid (10 classes at accuracy
0.6 / 0.9 / 0.99 with noise at 1%, 10%, 100% of the mean cell; regression at R² 0.5 /
0.8 / 0.95 with the noise of Σ(y−ŷ)² at 1%, 10%, 100% of it, and a 20-client cohort)
and the review's hard regimes (a rare class, a dominant class at accuracy 0.999, 2 and 3
classes, an absent class; off-centre regression targets) — 3,000 seeded noisy releases
go through the product's vectorised estimator (``classification_batch`` /
``regression_batch``, the code ``release_confusion`` and ``release_regression`` run),
for Laplace and Gaussian noise.

Coverage is asserted twice per (regime, metric): OVERALL (an unusable metric publishes
its whole range, so it counts as covered) and AMONG THE RELEASES NOT FLAGGED (what a
reader of a usable interval relies on; a threshold rule selects releases, so this is
the harder one). The easy regimes must also show (almost) no flags, else the acceptance
could pass by flagging.

The marginal zone (:data:`coverage_cases.MARGINAL_CLASSIFICATION`): cohorts where a
metric's guard passes in only 10–60% of 4,000 releases (accuracy-like, per-class
averages, MCC), asserted ≥ 0.93 among the releases that pass (k = 800–1,950 of them).
Measured there 0.964–1.000; false failure at a true 0.95 is ≤ 0.5% per cell (k ≥ 800),
at the lowest measured 0.964 below 1e-5.

False-failure rates (over seeds; seeds are fixed, so a run is deterministic): a cell
whose true coverage is 0.95 falls below 0.93 in 3,000 releases with probability 8e-7.
Among usable releases a cell with k < 3,000 usable releases is held to
``min(0.93, 0.95 − 3.72·√(0.95·0.05/k))`` (a one-sided binomial bound: false failure
1e-4 per cell at 0.95) and is not assessed below k = 50. Over the 2 × 544 checks the
union bound is < 0.5% at a true 0.95 everywhere; the lowest cell measured (0.942) fails
a 3,000-release check with probability ~3e-3.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from coverage_cases import (
    CLASSIFICATION_REGIMES,
    HARD_CLASSIFICATION,
    HARD_REGRESSION,
    MARGINAL_CLASSIFICATION,
    REGRESSION_REGIMES,
    classification_case,
    hard_classification_case,
    hard_regression_case,
    marginal_case,
    regression_case,
)

from dpledger.metrics._assemble import FEW_CLASSES, Batch
from dpledger.metrics._two_class import MACRO_KEYS
from dpledger.metrics.flam import CLASSIFICATION_KEYS
from dpledger.metrics.flam_regression import REGRESSION_KEYS

RELEASES = 3000
MARGINAL_RELEASES = 4000
NOMINAL_FLOOR = 0.93
MIN_USABLE = 50  # fewer usable releases than this cannot measure coverage
EASY_FLAGS = 0.02
EDGE_FLAGS = 0.035  # the one-sided miss rate 2.5% + 3.5 s.e. of 3,000 releases
ACCURACY_LIKE = ("accuracy", "precision_micro", "recall_micro", "f1_micro", "recall_weighted")
PER_CLASS = ("balanced_accuracy", "precision_macro", "recall_macro", "f1_macro",
             "precision_weighted", "f1_weighted")  # fmt: skip
DISTRIBUTIONS = ("laplace", "gaussian")


def _floor(k: int) -> float:
    """The coverage a cell of k releases must reach (see the module doc)."""
    return min(NOMINAL_FLOOR, 0.95 - 3.72 * math.sqrt(0.95 * 0.05 / k))


def _assert_covers(batch: Batch, truth: dict[str, float], keys: tuple[str, ...]) -> None:
    """Overall and among-usable coverage of every key, and no zero-width interval."""
    for key in keys:
        hit = (batch.low[key] <= truth[key]) & (truth[key] <= batch.high[key])
        assert hit.mean() >= NOMINAL_FLOOR, (key, "overall", hit.mean())
        usable = batch.usable(key)
        k = int(usable.sum())
        if k >= MIN_USABLE:
            assert hit[usable].mean() >= _floor(k), (key, "among usable", hit[usable].mean(), k)
        assert (batch.high[key] - batch.low[key] > 0).all(), key  # never zero width


@pytest.mark.slow
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize(("accuracy", "noise"), CLASSIFICATION_REGIMES)
def test_classification_intervals_cover_or_are_flagged(
    dist: str, accuracy: float, noise: float
) -> None:
    seed = 1000 + CLASSIFICATION_REGIMES.index((accuracy, noise)) + 100 * (dist == "gaussian")
    truth, batch = classification_case(accuracy, noise, dist, RELEASES, seed)
    _assert_covers(batch, truth, CLASSIFICATION_KEYS)
    for key in CLASSIFICATION_KEYS:
        flagged = 1.0 - batch.usable(key).mean()
        if noise <= 0.1:  # signal clear: the acceptance must not pass by flagging
            assert flagged <= EASY_FLAGS, (key, flagged)
            assert not (batch.code[key] > 0).any(), key  # no denominator guard fires
            if key in MACRO_KEYS:  # per-class sets (10 classes, s27c): a class's set is
                # [0, 1] where it lies wholly past 1 (≤ α/C per class), a recall near 1
                assert (batch.bounded[key] > 0).mean() <= EASY_FLAGS, key
            else:
                assert not (batch.bounded[key] > 0).any(), key  # every class measured
    if noise == 1.0:  # noise = the mean cell: the total still carries accuracy
        for key in ACCURACY_LIKE:
            assert batch.usable(key).mean() >= 0.98, key
        # the rare classes' counts are within the noise. These were flagged (MCC by a
        # spread guard, the averages most of whose classes are bounded): cuts on noisy
        # counts, which selected at 7–10 classes (audit stats5, F2–F3). Since s27c (10
        # classes: 2–12) MCC takes Fieller's set and the averages the simultaneous
        # per-class sets: published, wide (mostly [0, 1]), covering (checked above)
        assert not (batch.code["mcc"] > 1).any()  # no spread guard (N² − Σt²…) flags
        for key in ("balanced_accuracy", "precision_macro", "recall_macro"):
            assert not (batch.code[key] == FEW_CLASSES).any(), key
            assert np.median(batch.high[key] - batch.low[key]) >= 0.8, key


@pytest.mark.slow
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("regime", HARD_CLASSIFICATION)
def test_hard_classification_regimes_cover_among_usable(
    dist: str, regime: tuple[int, str, float, float]
) -> None:
    seed = 3000 + HARD_CLASSIFICATION.index(regime) + 100 * (dist == "gaussian")
    truth, batch = hard_classification_case(regime, dist, RELEASES, seed)
    _assert_covers(batch, truth, CLASSIFICATION_KEYS)
    _, priors, _, noise = regime
    if priors == "absent":  # one class never occurs: bounded in the averages
        for key in PER_CLASS:  # (its noisy count passes 2·q·se in ≪ 5% of releases)
            assert batch.usable(key).all(), key
            assert (batch.bounded[key] >= 1).mean() >= 0.95, key
        # MCC is well defined without that class (N² − Σt² ≫ its noise): published,
        # not flagged for the absent class's count (review D5; it covers, above)
        assert batch.usable("mcc").mean() >= 0.99
    if noise <= 0.1 and priors != "absent":
        for key in ACCURACY_LIKE:  # flags only for intervals wholly past 1 (≤ α/2 = 2.5%)
            assert not (batch.code[key] > 0).any(), key
            assert batch.usable(key).mean() >= 1.0 - EDGE_FLAGS, key


@pytest.mark.slow
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("regime", MARGINAL_CLASSIFICATION)
def test_marginal_zone_covers_among_the_releases_that_pass(
    dist: str, regime: tuple[float, float, tuple[str, ...]]
) -> None:
    """Where a metric's guard passes in only 10–60% of releases, the ones that pass are
    those whose noise inflated its denominator; their intervals must still cover at
    ≥ 93% (the interval is conditional on the guard having passed)."""
    accuracy, n, marginal = regime
    seed = 5000 + MARGINAL_CLASSIFICATION.index(regime) + 100 * (dist == "gaussian")
    truth, batch = marginal_case(accuracy, n, dist, MARGINAL_RELEASES, seed)
    _assert_covers(batch, truth, CLASSIFICATION_KEYS)
    for key in marginal:
        usable = batch.usable(key)
        if key in MACRO_KEYS or key == "mcc":  # 10 classes: no class-count or spread
            assert usable.mean() >= 0.99, (key, usable.mean())  # cut since s27c (stats5)
            continue
        assert 0.10 <= usable.mean() <= 0.60, (key, "not marginal", usable.mean())
        hit = (batch.low[key] <= truth[key]) & (truth[key] <= batch.high[key])
        assert hit[usable].mean() >= NOMINAL_FLOOR, (key, hit[usable].mean(), usable.sum())


@pytest.mark.slow
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize(("r2", "regime"), REGRESSION_REGIMES)
def test_regression_intervals_cover_or_are_flagged(dist: str, r2: float, regime: str) -> None:
    seed = 2000 + REGRESSION_REGIMES.index((r2, regime)) + 100 * (dist == "gaussian")
    truth, batch = regression_case(r2, regime, dist, RELEASES, seed)
    _assert_covers(batch, truth, REGRESSION_KEYS)
    for key in REGRESSION_KEYS:
        flagged = 1.0 - batch.usable(key).mean()
        if regime == "1%" or (regime == "10%" and key != "r2"):
            assert flagged <= EASY_FLAGS, (key, flagged)
        if regime == "20 clients":  # pure noise: every release flagged, whatever the draw
            assert flagged == 1.0, key


@pytest.mark.slow
@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("regime", HARD_REGRESSION)
def test_hard_regression_regimes_cover_among_usable(
    dist: str, regime: tuple[str, float, float]
) -> None:
    seed = 4000 + HARD_REGRESSION.index(regime) + 100 * (dist == "gaussian")
    truth, batch = hard_regression_case(regime, dist, RELEASES, seed)
    _assert_covers(batch, truth, REGRESSION_KEYS)


def test_an_interval_near_the_edge_keeps_its_width_and_covers() -> None:
    """Accuracy 0.99 and R² near 1: an interval crossing the range's edge keeps its full
    width ending at the edge (never clipped to near zero width); one wholly outside the
    range is flagged with a reason."""
    truth, batch = classification_case(0.99, 1.0, "laplace", RELEASES, 77)
    key = "accuracy"
    hit = (batch.low[key] <= truth[key]) & (truth[key] <= batch.high[key])
    edge = batch.edge[key]
    assert edge.sum() >= 100  # noise draws push many intervals across 1
    assert hit[edge].mean() >= NOMINAL_FLOOR
    assert (batch.high[key] <= 1.0).all()
    width = batch.high[key] - batch.low[key]
    assert width[batch.usable(key)].min() > 0.05  # the noise's width, not a sliver
    truth, batch = regression_case(0.95, "100%", "laplace", RELEASES, 78)
    assert (batch.high["r2"] <= 1.0).all()
    assert (batch.high["r2"] - batch.low["r2"] > 1e-3).all()


def test_the_conditional_interval_is_fiellers_far_from_the_threshold() -> None:
    """Conditioning on the total's guard changes nothing when the guard passed by far
    (the truncation is many s.e. away), and raises the upper end just above it (a total
    that only just passed was probably inflated by its noise, so the ratio deflated)."""
    from dpledger.metrics._intervals import fieller
    from dpledger.metrics._selective import selective_ratio

    w_num = np.zeros((3, 10))
    w_num[:, :3] = 1.0
    w_den = np.ones((3, 10))
    num, den = np.array([600.0, 60.0, 3.0]), np.array([1000.0, 100.0, 9.0])
    lo, hi, _ = fieller(num, den, w_num, w_den, 0.95, "gaussian")
    threshold = np.full(3, 1.96 * math.sqrt(10.0))
    s_lo, s_hi, found = selective_ratio(
        num, den, w_num, w_den, threshold, 0.95, np.full(3, 1.959964), (0.0, 1.0)
    )
    assert found.all()
    np.testing.assert_allclose([s_lo[:2], s_hi[:2]], [lo[:2], hi[:2]], atol=1e-6)
    assert s_hi[2] > hi[2] + 0.05, (s_hi[2], hi[2])

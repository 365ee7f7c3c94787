"""At 3–4 classes the macro averages never read a class's count to decide publication
(stats35, ``dpledger.metrics._simultaneous``): coverage is re-measured in
``tests/test_coverage_few_classes.py``; these pin the rule's form."""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.metrics._assemble import FEW_CLASSES, method_of
from dpledger.metrics._simultaneous import SIMULTANEOUS, class_bounds, subset_range
from dpledger.metrics.uncertainty import classification_batch

MACRO = ("balanced_accuracy", "precision_macro", "recall_macro", "f1_macro")


def _releases(c: int, rng: np.random.Generator, scale: float) -> np.ndarray:
    """A good model with its last class empty (true and predicted), plus Laplace noise."""
    m = np.eye(c) * 1e5
    m[-1, -1] = 0.0
    return m.reshape(1, -1) + rng.laplace(0.0, scale, (400, c * c))


@pytest.mark.parametrize("classes", [3, 4])
def test_a_class_in_the_noise_is_bounded_not_flagged(classes: int) -> None:
    """With labels="all" a class lost in the noise (here an empty one) is never a flag:
    every release whose total passed is published, that class contributes [0, 1] (so
    the interval is at least 1/C wide) and the method says so."""
    x = _releases(classes, np.random.default_rng(35 + classes), 2e3)
    batch = classification_batch(x, 2e3, max_total=1e5 * classes)
    for key in MACRO:
        assert batch.usable(key).all(), key
        assert not (batch.code[key] == FEW_CLASSES).any(), key
        out = batch.bounded[key] >= 1  # not every release: its noise may clear it (< α/C)
        assert out.mean() >= 0.9, (key, out.mean())
        assert (batch.high[key] - batch.low[key] >= 1.0 / classes - 1e-12)[out].all(), key
        assert method_of(batch, key, int(np.argmax(out))).startswith(SIMULTANEOUS), key


def test_with_labels_present_an_ambiguous_class_may_or_may_not_count() -> None:
    """labels="present" averages over the classes present only, and presence is private:
    no release is flagged by a class's count, and the interval spans the mean over the
    classes surely present (here the two measured, each near 1) and over all three (the
    empty class contributing [0, 1]), so it reaches 2/3 and 1."""
    x = _releases(3, np.random.default_rng(7), 2e3)
    batch = classification_batch(x, 2e3, labels="present", max_total=3e5)
    for key in MACRO:
        assert batch.usable(key).all(), key
        assert not (batch.code[key] == FEW_CLASSES).any(), key
        out = batch.bounded[key] >= 1
        assert out.mean() >= 0.9, (key, out.mean())
        assert (batch.low[key][out] <= 2.0 / 3.0).all(), key
        assert (batch.high[key][out] >= 0.99).all(), key


def test_subset_range_keeps_the_sure_classes_and_takes_the_extremes() -> None:
    """The min of mean(low) / max of mean(high) over the sets containing the sure classes."""
    low = np.array([[0.9, 0.1, 0.5], [0.9, 0.1, 0.5]])
    high = np.array([[0.95, 0.2, 1.0], [0.95, 0.2, 1.0]])
    sure = np.array([[True, False, False], [True, True, True]])
    lo, hi = subset_range(low, high, sure)
    assert lo[0] == pytest.approx(0.5)  # {0, 1}
    assert hi[0] == pytest.approx(0.975)  # {0, 2}
    assert lo[1] == pytest.approx(0.5)  # all three are sure: only their mean
    assert hi[1] == pytest.approx(2.15 / 3)


def test_far_clear_classes_keep_the_delta_interval() -> None:
    """Every class far clear of the noise: the interval and method are the delta ones."""
    rng = np.random.default_rng(11)
    m = np.full((3, 3), 1e4) + np.eye(3) * 3e5
    x = m.reshape(1, -1) + rng.laplace(0.0, 50.0, (50, 9))
    batch = classification_batch(x, 50.0, max_total=2e6)
    for key in MACRO:
        assert batch.usable(key).all(), key
        assert method_of(batch, key, 0).startswith("delta"), key
        assert (batch.high[key] - batch.low[key] < 0.01).all(), key


def test_a_class_set_is_fiellers_and_exact_for_gaussian_noise() -> None:
    """One class's recall set at level 0.95 under Gaussian noise covers at 0.95 whether its
    count is far from the noise or inside it (no selection: no cut on the count)."""
    rng = np.random.default_rng(3)
    std = np.full((3, 3), 1.0)
    for count, expect_bounded in ((40.0, False), (1.5, True)):
        m = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]]) * count
        x = m[None] + rng.normal(0.0, 1.0, (40_000, 3, 3))
        low, high, bounded, _ = class_bounds(x, std, "recall_macro", 0, 0.95, "gaussian")
        hit = (low <= 0.8) & (high >= 0.8)
        assert 0.94 <= hit.mean() <= 0.96 or (expect_bounded and hit.mean() >= 0.95), hit.mean()
        assert bounded.mean() > 0.5 if expect_bounded else bounded.mean() == 0.0


@pytest.mark.parametrize("classes", [1, 2, 5, 8])
def test_subset_range_equals_the_search_over_every_class_set(classes: int) -> None:
    """The sorted-prefix extremes (s27c: O(C log C), so the scheme runs at 7–12 classes)
    equal the former search over all 2^C − 1 class sets containing the sure ones."""
    rng = np.random.default_rng(classes)
    low = rng.uniform(0.0, 1.0, (300, classes))
    high = low + rng.uniform(0.0, 1.0 - low)
    sure = rng.uniform(size=(300, classes)) < rng.uniform(size=(300, 1))
    sets = np.array([[(s >> k) & 1 for k in range(classes)] for s in range(1, 1 << classes)])
    size = sets.sum(axis=1)
    ok = ~(sure[:, None, :] & (sets[None, :, :] == 0)).any(axis=-1)
    lo, hi = subset_range(low, high, sure)
    np.testing.assert_allclose(lo, np.where(ok, (low @ sets.T) / size, np.inf).min(axis=1))
    np.testing.assert_allclose(hi, np.where(ok, (high @ sets.T) / size, -np.inf).max(axis=1))

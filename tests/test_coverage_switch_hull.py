"""Just past a delta switch a macro average is the hull of both intervals (s29).

At 2–16 classes a macro average keeps the delta interval when every class count is clear
of its switch (:func:`~dpledger.metrics._simultaneous.safe_factor`) and otherwise takes the
simultaneous per-class Fieller sets. The releases just past the switch are selected (a rare
class's count noise pushed it over, deflating its ratio), and the delta interval's low tail
gathered there: with a 1% class under Gaussian noise, balanced accuracy covered 0.944–0.949
at 2 classes (the class 7–8 s.e. above zero) and 0.9456–0.948 at 7 (9–10 s.e.). Releases
whose least clear count lies within :data:`SWITCH_HULL` × the switch now get the hull of
the two intervals.

Each coverage cell: 100,000 seeded Gaussian releases, all published, held to
``0.95 − 3.72·√(0.95·0.05/k)`` (0.9474 at k = 100,000: false-failure rate 1e-4 per check at
a true 0.95, < 1e-3 over this file's 5 checks). Under the former rule these seeds cover
0.9466–0.9468 and fail (the dip is 0.944–0.949 over seeds: a seed of another cell may
pass); under the hull 0.956–0.997, ≥ 12 s.e. above the floor.
"""

from __future__ import annotations

import numpy as np
import pytest
from coverage_cases import published_floor, rare_last_class

from dpledger.metrics import _simultaneous
from dpledger.metrics._assemble import Batch
from dpledger.metrics._flam_intervals import classification_batch
from dpledger.metrics.flam import classification_metrics

RELEASES = 100_000
MACROS = ("balanced_accuracy", "recall_macro", "precision_macro", "f1_macro")


def _releases(
    classes: int, accuracy: float, se_above_zero: float, seed: int, n: int, law: str = "gaussian"
) -> tuple[dict[str, float], Batch]:
    """(truth, batch) of ``n`` releases of a matrix with a 1% last class whose true count
    lies ``se_above_zero`` noise s.e. above zero (``law``: "gaussian" or "laplace")."""
    m = rare_last_class(classes, accuracy)
    scale = classes**1.5 / se_above_zero  # the 1% class's count c² over its s.e. scale·√c
    rng = np.random.default_rng(seed)
    shape = (n, classes * classes)
    if law == "gaussian":
        x = m.reshape(1, -1) + rng.normal(0.0, scale, shape)
    else:  # the same s.e.: Laplace scale s.e./√2
        scale /= np.sqrt(2.0)
        x = m.reshape(1, -1) + rng.laplace(0.0, scale, shape)
    batch = classification_batch(x, scale, distribution=law, max_total=m.sum())
    return classification_metrics(m, labels="all"), batch


@pytest.mark.parametrize(
    ("classes", "accuracy", "se_above_zero", "keys", "seed"),
    [
        (2, 0.9, 7.0, ("balanced_accuracy", "recall_macro"), 2907),  # 0.9466 before
        (7, 0.99, 9.0, ("balanced_accuracy", "recall_macro"), 2909),  # 0.9468 before
        (2, 0.999, 7.0, ("precision_macro",), 2970),  # 0.9468 before
    ],
)
def test_a_rare_class_just_past_the_switch_covers(
    classes: int, accuracy: float, se_above_zero: float, keys: tuple[str, ...], seed: int
) -> None:
    """The cells where the dip was: every release published, coverage at 95%."""
    truth, batch = _releases(classes, accuracy, se_above_zero, seed, RELEASES)
    for key in keys:
        hit = (batch.low[key] <= truth[key]) & (truth[key] <= batch.high[key])
        usable = batch.usable(key)
        k = int(usable.sum())
        assert k >= 0.99 * RELEASES, (key, "published", k)
        assert hit[usable].mean() >= published_floor(k), (key, hit[usable].mean(), k)


@pytest.mark.parametrize(("classes", "se_above_zero"), [(2, 7.5), (7, 10.0), (8, 9.5)])
def test_the_hull_only_widens_and_only_just_past_the_switch(
    classes: int, se_above_zero: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against the former rule (``SWITCH_HULL`` = 1: the delta interval from the switch on)
    every interval contains the former one, the same releases are published, and some —
    those just past the switch — are wider (balanced accuracy: the rare class's true count
    sits near its switch); a release the per-class sets took before, or
    whose every count is past the hull's band, is unchanged."""
    _, now = _releases(classes, 0.9, se_above_zero, 29, 4000)
    monkeypatch.setattr(_simultaneous, "SWITCH_HULL", 1.0)
    _, before = _releases(classes, 0.9, se_above_zero, 29, 4000)
    for key in MACROS:
        assert np.array_equal(now.usable(key), before.usable(key)), key
        assert np.all(now.low[key] <= before.low[key]), key
        assert np.all(now.high[key] >= before.high[key]), key
        wider = (now.low[key] < before.low[key]) | (now.high[key] > before.high[key])
        delta_before = ~before.per_class[key][1]
        if key == "balanced_accuracy":  # the rare class's true count is near its switch
            assert np.any(wider), (key, "no release just past the switch")
        assert not np.any(wider & ~delta_before), key  # the per-class releases kept theirs
        assert np.all(now.per_class[key][1][wider]), key  # labelled with the per-class sets


@pytest.mark.parametrize(
    ("classes", "se_above_zero", "law"),
    [(3, 16.0, "gaussian"), (5, 10.0, "gaussian"), (2, 7.5, "laplace"), (7, 10.0, "laplace")],
)
def test_elsewhere_the_switch_is_as_before(
    classes: int, se_above_zero: float, law: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Other class counts, and Laplace noise, showed no dip: their intervals are unchanged."""
    _, now = _releases(classes, 0.9, se_above_zero, 31, 2000, law)
    monkeypatch.setattr(_simultaneous, "SWITCH_HULL", 1.0)
    _, before = _releases(classes, 0.9, se_above_zero, 31, 2000, law)
    for key in MACROS:
        assert np.array_equal(now.low[key], before.low[key]), key
        assert np.array_equal(now.high[key], before.high[key]), key


def test_a_count_below_zero_or_an_unreadable_switch_is_never_clear() -> None:
    """A class count at or below zero, or a switch that is not finite (NaN noise weights:
    refused before here by the public functions), reads as not clear of the switch — the
    per-class sets, never the delta interval (before s29 a count far below zero counted as
    clear)."""
    m = np.array([[[90.0, 10.0], [-70.0, -9.0]], [[90.0, 10.0], [1.0, 9.0]]])
    margin = _simultaneous.class_bounds(
        m, np.ones((2, 2)), "balanced_accuracy", 1, 0.975, "gaussian"
    )[3]
    assert margin[0] == 0.0
    assert margin[1] > 0.0
    nan = np.full((2, 2), np.nan)
    margin = _simultaneous.class_bounds(m, nan, "balanced_accuracy", 1, 0.975, "gaussian")[3]
    assert np.all(margin == 0.0)


LEVEL_99 = 0.99


@pytest.mark.parametrize(
    ("classes", "accuracy", "se_above_zero", "seed"),
    [
        (7, 0.99, 13.0, 2913),  # 0.9864 before s29 (30,000 releases)
        (9, 0.99, 10.0, 2910),  # 0.9848 before s29
    ],
)
def test_at_level_99_a_rare_class_near_the_switch_covers(
    classes: int, accuracy: float, se_above_zero: float, seed: int
) -> None:
    """Level 0.99: a 1% class whose count sits near its delta switch takes the per-class sets
    (``SWITCH_STRETCH_RARE``). 30,000 releases per cell, held to a floor a true 0.99 misses
    with probability 1e-4 (0.98786); under the former switch these cells covered
    0.9848–0.9864 (2.2–4.6 s.e. below the floor: they fail), now ≥ 0.999."""
    m = rare_last_class(classes, accuracy)
    scale = classes**1.5 / se_above_zero
    truth = classification_metrics(m, labels="all")["balanced_accuracy"]
    rng = np.random.default_rng(seed)
    x = m.reshape(1, -1) + rng.normal(0.0, scale, (30_000, classes * classes))
    batch = classification_batch(
        x, scale, distribution="gaussian", max_total=m.sum(), level=LEVEL_99
    )
    key = "balanced_accuracy"
    hit = (batch.low[key] <= truth) & (truth <= batch.high[key])
    usable = batch.usable(key)
    assert usable.mean() >= 0.99
    assert hit[usable].mean() >= published_floor(int(usable.sum()), LEVEL_99), hit[usable].mean()


@pytest.mark.parametrize("level", [0.95, 0.99])
def test_the_stretch_leaves_balanced_classes_and_level_95_alone(
    level: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No class of a balanced 7-class matrix is rare, and at level 0.95 nothing is
    stretched: their intervals are those of an unstretched switch; a 1% class at level
    0.99 is stretched (some interval changes)."""
    balanced = np.full((7, 7), 100.0 * 0.1 / 6)
    np.fill_diagonal(balanced, 100.0 * 0.9)
    rare = rare_last_class(7, 0.99)
    runs = {}
    stretched = _simultaneous.SWITCH_STRETCH_RARE
    for stretch in (stretched, 1.0):
        monkeypatch.setattr(_simultaneous, "SWITCH_STRETCH_RARE", stretch)
        out = []
        for m, scale in ((balanced, 100.0 / 20.0 / np.sqrt(7.0)), (rare, 7**1.5 / 15.0)):
            noise = np.random.default_rng(17).normal(0.0, scale, (2000, 49))
            b = classification_batch(
                m.reshape(1, -1) + noise, scale, distribution="gaussian", max_total=m.sum(),
                level=level,
            )  # fmt: skip
            out.append((b.low["balanced_accuracy"], b.high["balanced_accuracy"]))
        runs[stretch] = out
    now, before = runs[stretched], runs[1.0]
    assert np.array_equal(now[0][0], before[0][0])
    assert np.array_equal(now[0][1], before[0][1])
    changed = not (
        np.array_equal(now[1][0], before[1][0]) and np.array_equal(now[1][1], before[1][1])
    )
    assert changed == (level > 0.95)

"""Outside audit stats5, F1–F3: per-class averages and MCC at 7–12 classes (s27c).

Before s27c the rules that replaced cuts at 2–6 classes (simultaneous per-class Fieller
sets for the macro averages, Fieller's set for MCC) stopped at 6 classes, and from 7:

* F1: with a 1% class whose count lay ~6 s.e. above zero (a good model, small noise),
  balanced accuracy (= recall_macro) and precision_macro covered 0.935–0.94, all
  published: the delta interval is symmetric about a skewed ratio, and one class's skew
  dominates an average over 7–10 classes;
* F2: with a model predicting a 50% class for 99% of every class's samples, Gaussian noise
  0.3–0.4 of a cell, f1_macro covered 0.88–0.93 among the 3–32% published: the "more than
  half bounded" flag is a cut on noisy class counts and publishes the releases whose
  noise lifted them;
* F3: MCC there was published in ~2% of releases (its spread guard, a cut) and covered
  0.91 among them.

Each cell: 20,000 seeded releases (k published). Coverage among published releases and over
all of them (a flagged release counting as covered: it printed no interval) is held to
``0.95 − 3.72·√(0.95·0.05/k)``, a one-sided binomial floor with false-failure rate 1e-4 per
check at a true 0.95 (< 0.2% over this file's 18 checks, union bound); the fixed rules
cover 0.976–0.9998 in these checks, so the real rate is far lower. Every check is also that ≥
99% are published (no cut on noisy counts decides it). Before the fix (this file's seeds)
the F1 cells covered 0.936 and 0.940 (floor 0.944), F2's 0.926 among 32% and 0.885 among
2.5% published, and MCC was published in 2.2%.
"""

from __future__ import annotations

import numpy as np
import pytest
from coverage_cases import majority_predictor, published_floor, rare_last_class

from dpledger.metrics._flam_intervals import classification_batch
from dpledger.metrics.flam import classification_metrics

RELEASES = 20_000


def _check(
    m: np.ndarray, noise: float, dist: str, keys: tuple[str, ...], seed: int,
    releases: int = RELEASES,
) -> None:  # fmt: skip
    c = m.shape[0]
    scale = noise * m.sum() / c**2  # noise / mean cell
    truth = classification_metrics(m, labels="all")
    rng = np.random.default_rng(seed)
    draw = rng.laplace if dist == "laplace" else rng.normal
    x = m.reshape(1, -1) + draw(0.0, scale, (releases, c * c))
    batch = classification_batch(x, scale, distribution=dist, max_total=m.sum())  # type: ignore[arg-type]
    for key in keys:
        hit = (batch.low[key] <= truth[key]) & (truth[key] <= batch.high[key])
        usable = batch.usable(key)
        k = int(usable.sum())
        assert hit[usable].mean() >= published_floor(k), (
            key,
            "among published",
            hit[usable].mean(),
            k,
        )
        assert k >= 0.99 * releases, (key, "published", k)  # no cut on noisy counts
        overall = np.where(usable, hit, True).mean()
        assert overall >= published_floor(releases), (key, "overall", overall)


RECALL = ("balanced_accuracy", "recall_macro")


@pytest.mark.parametrize(
    ("classes", "noise", "keys"),
    [  # the 1% class's true count at 6 s.e. of its noise (Gaussian)
        (7, 0.03, (*RECALL, "precision_macro")),
        (10, 0.0527, (*RECALL, "precision_macro")),
    ],
)
def test_a_rare_class_near_the_noise_at_7_to_12_classes(
    classes: int, noise: float, keys: tuple[str, ...]
) -> None:
    """F1: balanced accuracy / recall_macro and precision_macro (0.936–0.94 before)."""
    _check(rare_last_class(classes, 0.99), noise, "gaussian", keys, seed=2700 + classes)


@pytest.mark.parametrize("noise", [0.3, 0.4])
def test_a_majority_class_predictor_in_heavy_noise_at_7_classes(noise: float) -> None:
    """F2: f1_macro (0.92 among 32% published at 0.3, 0.89 among 3% at 0.4, before)."""
    _check(
        majority_predictor(7, 0.99), noise, "gaussian", ("f1_macro",), seed=2710 + int(10 * noise)
    )


def test_mcc_with_predictions_in_one_class_at_7_classes() -> None:
    """F3: MCC is never cut by its spread guard at 7 classes (2% published before)."""
    _check(majority_predictor(7, 0.95), 0.05, "laplace", ("mcc",), seed=2720)


def test_a_rare_class_near_the_noise_at_13_classes() -> None:
    """Review s27c: with the per-class scheme stopping at 12 classes, the F1 cell came back
    at 13 (balanced accuracy 0.944–0.946); it now runs to 16 classes. 100,000 releases
    (floor 0.9474, false failure 1e-4 per check): the former rule covers 0.944 here."""
    _check(rare_last_class(13, 0.999), 0.0937, "gaussian", RECALL, seed=2713, releases=100_000)

"""The delta switch at 5–6 classes: a rare class whose count sits at it (s28a).

At 5–6 classes a macro average keeps the delta interval when every class's count is far
clear of its noise, and otherwise takes the simultaneous per-class Fieller sets
(:mod:`dpledger.metrics._simultaneous`). The switch decides only which interval, but it
reads the noisy counts: where a 1% class's count sits at it, the releases keeping the
delta interval are those whose count noise pushed it over, so their ratio is deflated
and the delta interval's low tail (a ratio with a noisy denominator is skewed) misses
more often than it would over all releases. Until s28a the switch was at 3 × the quantile
of the ratio's pivot (~8 s.e. under Gaussian noise) and balanced accuracy (= recall_macro)
covered 0.941–0.947 with the 1% class at 7–8 s.e. (Gaussian noise, accuracy 0.9–0.99,
30,000 releases per cell). It is now at 4 × the count's own quantile (~10.5 s.e.): those
cells take the per-class sets (0.996–0.998, 1.10–1.12 × the width), and around the new
switch the cells cover 0.9486–0.9651 (none more than 1.1 s.e. below 0.95).

Each cell: 100,000 seeded Gaussian releases, all published. Coverage is held to
``0.95 − 3.72·√(0.95·0.05/k)`` (0.9474 at k = 100,000), a one-sided binomial floor with
false-failure rate 1e-4 per check at a true 0.95 (< 1e-3 over this file's 6 checks, union
bound). The first two cells, below the new switch, cover 0.9959 and 0.9981 under the new
rule (this file's seeds), ~35 s.e. above the floor, so their real false-failure rate is
nil; under the former rule they cover 0.9435 each and fail. The third sits at the new
switch (62% per-class; 0.9531 here, 0.9520 under the former rule), where the coverage is
~0.950: its false-failure rate is the stated 1e-4 per check (3e-4 at a true 0.9495).
"""

from __future__ import annotations

import numpy as np
import pytest
from coverage_cases import published_floor, rare_last_class

from dpledger.metrics._flam_intervals import classification_batch
from dpledger.metrics.flam import classification_metrics

RELEASES = 100_000
RECALL = ("balanced_accuracy", "recall_macro")


@pytest.mark.parametrize(
    ("classes", "accuracy", "se_above_zero", "seed"),
    [
        (5, 0.9, 7.5, 2805),  # at the former switch (~8 s.e.): 0.9435 before s28a
        (6, 0.99, 7.5, 2806),  # 0.9435 before s28a
        (6, 0.9, 10.25, 2816),  # at the new switch (~10.5 s.e.)
    ],
)
def test_a_rare_class_at_the_delta_switch_at_5_to_6_classes(
    classes: int, accuracy: float, se_above_zero: float, seed: int
) -> None:
    """Balanced accuracy and recall_macro with the 1% class's true count this many s.e. of
    its Gaussian noise above zero."""
    m = rare_last_class(classes, accuracy)
    scale = classes**1.5 / se_above_zero  # the 1% class's count c² over its s.e. scale·√c
    truth = classification_metrics(m, labels="all")
    rng = np.random.default_rng(seed)
    x = m.reshape(1, -1) + rng.normal(0.0, scale, (RELEASES, classes * classes))
    batch = classification_batch(x, scale, distribution="gaussian", max_total=m.sum())
    for key in RECALL:
        hit = (batch.low[key] <= truth[key]) & (truth[key] <= batch.high[key])
        usable = batch.usable(key)
        k = int(usable.sum())
        assert k >= 0.99 * RELEASES, (key, "published", k)
        assert hit[usable].mean() >= published_floor(k), (
            key,
            "among published",
            hit[usable].mean(),
            k,
        )

"""Two classes, one never true (its row empty, predicted for 1 in 21 samples), Gaussian noise
at 0.01 of a cell: f1_macro's 95% interval covers 0.941 (review 39, der).

docs/intervals.md says every 2-class cell measured covers ≥ 0.944 among published at
level 0.95 (balanced, 70/30, 90/10, 97/3 and 1% classes). A class that is predicted but
never true is not among those cells: there f1_macro (every release published) covers
0.939–0.944 per 10,000 releases at noise 0.01 of a cell (0.9412 pooled over 30,000, s.e.
0.0014: 6 s.e. below 0.95), and jumps to 0.965 at 0.012 with a 30% narrower interval —
the signature of the switch between the per-class Fieller sets and the delta interval.
The fix is a change to the 2-class interval rule (a statistics review's call, not a
contained edit), so the test is xfail(strict=True). The noise is numpy's with fixed seeds
(a test of intervals, not of a release path): deterministic.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.metrics import flam
from dpledger.metrics.uncertainty import classification_batch


@pytest.mark.xfail(
    strict=True,
    reason="2-class rule: f1_macro covers 0.941 with a never-true class near its switch "
    "(review 39 der); needs a statistics decision on the switch",
)
def test_two_class_never_true_class_f1_macro_covers() -> None:
    m = np.array([[20.0, 1.0], [0.0, 0.0]])
    m = m / m.sum() * 10_000
    scale = 0.01 * m.sum() / 4
    truth = flam.classification_metrics(m, labels="all")["f1_macro"]
    hits = 0
    for seed in (1, 2, 3):
        rng = np.random.default_rng(seed)
        released = m.reshape(-1) + rng.normal(0.0, scale, (10_000, 4))
        b = classification_batch(
            released, scale, labels="all", distribution="gaussian", max_total=m.sum()
        )
        assert b.usable("f1_macro").all()
        hits += int(((b.low["f1_macro"] <= truth) & (truth <= b.high["f1_macro"])).sum())
    assert hits / 30_000 >= 0.944  # the floor the docs state for 2 classes

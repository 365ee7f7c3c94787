"""Review 40 (diff): ``DerivedRelease.notes(only)``/``caveats(only)`` (new in df6d7e2), which
the Flower round table's ``derived=`` passes through.

* ``only`` naming none of a release's metrics (``table(derived=[])``: no derived rows)
  still gave the "how estimates were made" caveat, so the round table closed with
  "notes on the derived metrics:" under a table that showed no derived metric.
* ``only`` given as one name, a string (a ``Collection[str]`` to the type checker, as
  ``table``'s ``Sequence[str]`` is), was matched by substring: ``"balanced_accuracy"``
  also picked ``accuracy``, and counted it ("… of 2 metrics"); the table's row filter did
  the same (``derived="rmse"`` showed ``mse`` too).
Deterministic.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from test_derived_guards import GOOD_CONFUSION
from test_published import SMALL

from dpledger import Ledger, Policy, ReleaseRequest
from dpledger.ledger.derived import derive_confusion, release_confusion


def test_notes_of_no_metric_and_of_one_name(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db", Policy.from_toml(SMALL), mode="create") as ledger:
        req = ReleaseRequest(epoch=0, metric="confusion", region="all", cohort=1000)
        out = release_confusion(ledger, req, GOOD_CONFUSION)
    m = np.zeros((10, 10))
    m[:, 0] = 40_000.0  # every sample predicted class 0: some metrics unusable
    d = derive_confusion(dataclasses.replace(out.release, noisy_sum=m.reshape(-1)), 1e8)
    assert {"accuracy", "balanced_accuracy"} <= set(d.metrics)
    assert d.caveats([]) == []
    assert d.notes([]) == []
    assert d.notes("balanced_accuracy") == d.notes(["balanced_accuracy"])
    assert d.caveats("balanced_accuracy") == d.caveats(["balanced_accuracy"])
    assert d.caveats() == d.caveats(list(d.metrics))  # all: unchanged
    assert d.table().splitlines()[1:] == [*d.rows(), *d.notes()]

"""Review 42 (met): ``sum_contributions`` checked that each job is a ``Contribution`` but
not its fields: bounds given as a dict raised AttributeError ('dict' object has no
attribute 'need'), a metric name in place of its declaration AttributeError, and
``settings=None`` TypeError, not the typed refusal naming the metric."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dpledger as dl
from dpledger.metrics.declarations import DECLARATIONS, Bounds, Contribution, sum_contributions

DATA = {"loss": np.ones(3), "y_true": np.zeros(3, dtype=int), "y_pred": np.zeros(3, dtype=int)}
LOSS = DECLARATIONS["clipped_loss"]


@pytest.mark.parametrize(
    "job",
    [
        Contribution(LOSS, {"low": 0, "high": 1}),  # type: ignore[arg-type]
        Contribution("clipped_loss", Bounds(low=0, high=1)),  # type: ignore[arg-type]
        Contribution(DECLARATIONS["confusion_matrix"], Bounds(cap=2), settings=None),  # type: ignore[arg-type]
        Contribution(LOSS, Bounds(low=0, high=1), grid=(0, 1)),  # type: ignore[arg-type]
    ],
)
def test_a_malformed_contribution_is_refused_by_name(job: Any) -> None:
    with pytest.raises(dl.InvalidInput, match="metric 'x': expected a Contribution"):
        sum_contributions({"x": job}, DATA, offsets=[0])


def test_a_well_formed_one_sums() -> None:
    got = sum_contributions({"x": Contribution(LOSS, Bounds(low=0, high=1))}, DATA, offsets=[0, 1])
    assert got["x"].tolist() == [2.0]  # two clients, each mean 1.0

"""Review 39 (api): ``MetricDeclaration.contribute``, ``contribute_sums`` and
``sum_contributions`` read each per-sample input with a bare ``np.asarray`` before the
metric's own checks, which then saw a plain array: a masked array's masked samples were
used (``{"loss": np.ma.array([1.0, 1e9], mask=[0, 1])}`` contributed the clip, where
``clipped_loss`` of the same array is refused), a boolean among the numbers became a
1.0, a ragged list was numpy's untyped ValueError, and ``data`` given as text a
TypeError."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dpledger.errors import InvalidInput
from dpledger.metrics import clipped_loss
from dpledger.metrics.declarations import (
    SPATIAL_DECLARATIONS,
    Bounds,
    Contribution,
    sum_contributions,
)

LOSS = SPATIAL_DECLARATIONS["clipped_loss"]
BOUNDS = Bounds(low=0.0, high=2.0)

CALLS: list[Callable[[Any], object]] = [
    lambda data: LOSS.contribute(data, BOUNDS),
    lambda data: LOSS.contribute(data, BOUNDS, offsets=[0, 1]),
    lambda data: LOSS.contribute_sums(data, BOUNDS, offsets=[0, 1]),
    lambda data: sum_contributions({"l": Contribution(LOSS, BOUNDS)}, data, offsets=[0, 1]),
]


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize(
    "data",
    [
        {"loss": np.ma.array([1.0, 1e9, 0.5], mask=[0, 1, 0])},
        {"loss": [True, 1.0, 0.5]},
        {"loss": [[1.0], [2.0, 3.0]]},
        "loss",
    ],
    ids=["masked", "bool", "ragged", "text"],
)
def test_odd_per_sample_data_is_refused_by_type(
    call: Callable[[Any], object], data: object
) -> None:
    with pytest.raises(InvalidInput):
        call(data)


def test_the_metric_itself_refuses_the_same_masked_array() -> None:
    with pytest.raises(InvalidInput, match="masked"):
        clipped_loss(np.ma.array([1.0, 1e9, 0.5], mask=[0, 1, 0]), clip_high=2.0)


def test_plain_data_still_contributes() -> None:
    rows = LOSS.contribute({"loss": [1.0, 3.0, 0.5]}, BOUNDS, offsets=[0, 1])
    assert rows.tolist() == [[1.0], [1.75]]

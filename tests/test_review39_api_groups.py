"""Review 39 (api): ``groups=`` and ``n_groups=`` of ``sum_contributions`` (and
``contribute_sums``, ``sums_in_blocks``) were read with a bare ``np.asarray``: a masked
group label was summed into the group its hidden value names, a ragged list was numpy's
ValueError, a ``timedelta64`` array a TypeError, a uint64 label past 2**63 wrapped
negative (numpy's ValueError in ``bincount``), a float ``n_groups`` a TypeError and
``n_groups=2**70`` an OverflowError."""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.errors import InvalidInput
from dpledger.metrics.declarations import (
    SPATIAL_DECLARATIONS,
    Bounds,
    Contribution,
    sum_contributions,
)

JOBS = {"l": Contribution(SPATIAL_DECLARATIONS["clipped_loss"], Bounds(low=0.0, high=2.0))}
DATA = {"loss": np.array([1.0, 2.0, 0.5, 0.25])}


def _sums(groups: object, n_groups: object = None) -> object:
    return sum_contributions(JOBS, DATA, offsets=[0, 2], groups=groups, n_groups=n_groups)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "groups",
    [
        np.ma.array([0, 1], mask=[0, 1]),
        [[0], [1, 2]],
        np.array([0, 1], dtype="m8[s]"),
        np.array([0, 2**63], dtype=np.uint64),
        [0, True],
    ],
    ids=["masked", "ragged", "timedelta", "uint64-past-int64", "bool"],
)
def test_odd_group_labels_are_refused(groups: object) -> None:
    with pytest.raises(InvalidInput, match="group"):
        _sums(groups)


@pytest.mark.parametrize("n_groups", [1.5, True, 2**70, 0, -1, "2"])
def test_odd_group_counts_are_refused(n_groups: object) -> None:
    with pytest.raises(InvalidInput, match="n_groups"):
        _sums([0, 1], n_groups)


def test_plain_groups_still_sum() -> None:
    out = _sums(np.array([1, 0], dtype=np.uint8), np.int64(3))
    assert out["l"].tolist() == [[0.375], [1.5], [0.0]]  # type: ignore[index]

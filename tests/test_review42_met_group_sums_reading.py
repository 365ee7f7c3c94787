"""Review 42 (met): ``blocks.group_sums`` read its per-sample arrays with ``np.asarray``
before the contribution saw them. A masked array was unmasked, its hidden values summed
(every metric refuses one: "its masked values would be used"); ragged rows raised numpy's
bare ValueError and a 0-d array an IndexError from slicing a block. They are read by
type now, as the metrics read them, each refusal an InvalidInput."""

from __future__ import annotations

import numpy as np
import pytest

import dpledger as dl
from dpledger.metrics import clipped_loss, confusion_matrix
from dpledger.metrics.blocks import group_sums
from dpledger.metrics.secure_sum import FixedPoint


@pytest.mark.parametrize("grid", [None, FixedPoint(0.0, 5.0)])
def test_a_masked_array_is_refused_not_unmasked(grid: FixedPoint | None) -> None:
    loss = np.ma.array([1.0, 2.0, 3.0], mask=[False, True, False])
    with pytest.raises(dl.InvalidInput, match="masked"):
        clipped_loss(loss, clip_high=5.0, offsets=[0, 1])
    with pytest.raises(dl.InvalidInput, match="masked"):
        group_sums(clipped_loss, loss, offsets=[0, 1], grid=grid, clip_high=5.0)


@pytest.mark.parametrize("loss", [[[1.0, 2.0], [3.0]], np.float64(3.0), 3.0])
def test_ragged_and_zero_d_arrays_are_invalid_input(loss: object) -> None:
    with pytest.raises(dl.InvalidInput):
        group_sums(clipped_loss, loss, offsets=[0], grid=None, clip_high=5.0)


def test_masked_labels_are_refused() -> None:
    t = np.ma.array([0, 1, 1], mask=[False, False, True])
    with pytest.raises(dl.InvalidInput, match="masked"):
        group_sums(confusion_matrix, t, [0, 1, 0], offsets=[0, 2], grid=None, n_classes=2)


def test_plain_inputs_still_sum() -> None:
    got = group_sums(
        clipped_loss, [1.0, 2.0, 4.0], offsets=[0, 1], grid=FixedPoint(0.0, 5.0), clip_high=5.0
    )
    assert float(got) == 4.0  # clients 1.0 and (2 + 4) / 2

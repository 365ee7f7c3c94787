"""Review 39 (api): the integer inputs of the client-side metrics — ``offsets=``, class
labels, cell ids — were read with a bare ``np.asarray``, not by the rules
:mod:`dpledger.metrics._reading` holds every real-number input to: a ragged list was an
untyped ``ValueError`` (numpy's "inhomogeneous shape"), a ``timedelta64`` label array a
``TypeError``, and a masked array was silently unmasked (its masked labels or cells
counted, a masked offset used) where a masked float array is refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dpledger.metrics as M
from dpledger.errors import InvalidInput
from dpledger.metrics.records import record_confusion

X = np.array([0.5, 1.0, 2.0, 0.0])
LABELS = np.array([0, 1, 1, 0])
MASKED = np.ma.array([0, 1, 1, 2], mask=[0, 0, 0, 1])

OFFSET_USERS: list[Callable[[Any], object]] = [
    lambda o: M.clipped_loss(X, clip_high=1.0, offsets=o),
    lambda o: M.along_across_ratio(X, X, offsets=o),
    lambda o: M.error_histogram(X, edges=[1.0], cap=2.0, offsets=o),
    lambda o: M.confusion_matrix(LABELS, LABELS, n_classes=2, offsets=o),
    lambda o: M.distinct_cells(LABELS, offsets=o),
    lambda o: record_confusion(LABELS, LABELS, n_classes=2, offsets=o),
]


@pytest.mark.parametrize("use", OFFSET_USERS)
@pytest.mark.parametrize(
    "offsets",
    [[[0], [1, 2]], np.ma.array([0, 2], mask=[0, 1]), np.array([0, 2], dtype="m8[s]"), [0, True]],
    ids=["ragged", "masked", "timedelta", "bool"],
)
def test_odd_offsets_are_refused_by_type(use: Callable[[Any], object], offsets: object) -> None:
    with pytest.raises(InvalidInput, match="offsets"):
        use(offsets)


LABEL_USERS: list[Callable[[Any], object]] = [
    lambda v: M.confusion_matrix(v, LABELS, n_classes=3),
    lambda v: M.confusion_matrix(LABELS, v, n_classes=3),
    lambda v: M.distinct_cells(v),
    lambda v: M.coverage(v, edges=[0.5, 1.5]),
    lambda v: record_confusion(v, LABELS, n_classes=3),
]


@pytest.mark.parametrize("use", LABEL_USERS)
@pytest.mark.parametrize(
    "values",
    [[[0, 1], [1]], MASKED, np.array([0, 1, 1, 0], dtype="m8[s]"), [0, 1, True, 0]],
    ids=["ragged", "masked", "timedelta", "bool"],
)
def test_odd_labels_and_cells_are_refused_by_type(
    use: Callable[[Any], object], values: object
) -> None:
    with pytest.raises(InvalidInput):
        use(values)


def test_plain_integers_still_read() -> None:
    assert M.confusion_matrix([0, 1, 1], [0, 1, 0], n_classes=2).sum() == 3
    assert M.distinct_cells(np.array([3, 3, 5], dtype=">i8"))[0] == 2
    assert M.clipped_loss(X, clip_high=1.0, offsets=np.array([0, 2], dtype=np.uint8)).shape == (2,)
    assert M.clipped_loss(X, clip_high=1.0, offsets=(0, 2)).shape == (2,)

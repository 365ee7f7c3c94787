"""Review 42 (met): ``as_labels`` checked class labels in one reduction by viewing a
signed array as unsigned (a negative label then reads as huge), but through the NATIVE
unsigned dtype whatever the array's byte order. A big-endian label array (FITS tables,
files written on another machine, ``np.dtype('>i2')``) was read byte-swapped: the label
-256 read as 255 and passed ``n_classes=300``, then was used as an index, so a sample of
client 1 was counted in client 0's confusion row (client 0's row held 3 counts from its
2 samples, past any cap computed from its own count), and -2**56 / 2**56 read as 255 / 1.
The view now keeps the array's byte order."""

from __future__ import annotations

import numpy as np
import pytest

import dpledger as dl
from dpledger.metrics import confusion_matrix
from dpledger.metrics.flam import confusion_cells
from dpledger.metrics.records import record_confusion


@pytest.mark.parametrize(
    ("dtype", "label"), [(">i2", -(2**8)), (">i4", -(2**24)), (">i8", -(2**56))]
)
def test_a_negative_big_endian_label_is_refused(dtype: str, label: int) -> None:
    # each label's bytes, read in native (little-endian) order, are the integer 255
    y_true = np.array([0, 0, label, 0], dtype=dtype)
    y_pred = np.zeros(4, dtype=dtype)
    with pytest.raises(dl.InvalidInput, match=f"label {label} at index 2"):
        confusion_matrix(y_true, y_pred, n_classes=300, offsets=[0, 2], cap=2.0)
    with pytest.raises(dl.InvalidInput, match=f"label {label}"):
        confusion_cells(y_true, y_pred, n_classes=300, offsets=[0, 2])
    with pytest.raises(dl.InvalidInput, match=f"label {label}"):
        record_confusion(y_true, y_pred, n_classes=300, offsets=[0, 2])


def test_a_large_big_endian_label_is_refused() -> None:
    y_true = np.array([0, 2**56], dtype=">i8")
    with pytest.raises(dl.InvalidInput, match="outside"):
        confusion_matrix(y_true, np.zeros(2, dtype=">i8"), n_classes=2, offsets=[0, 1])


@pytest.mark.parametrize("dtype", [">i2", ">u2", ">i8", "<i2", "i1"])
def test_valid_labels_of_any_byte_order_count_as_native_ones(dtype: str) -> None:
    rng = np.random.default_rng(42)
    t = rng.integers(0, 5, 50)
    p = rng.integers(0, 5, 50)
    offsets = [0, 10, 10, 33]
    got = confusion_matrix(t.astype(dtype), p.astype(dtype), n_classes=5, offsets=offsets)
    want = confusion_matrix(t, p, n_classes=5, offsets=offsets)
    np.testing.assert_array_equal(got, want)

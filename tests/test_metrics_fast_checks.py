"""The one-reduction range checks: what they let through and what they refuse.

Labels are checked with one maximum over their unsigned view, probabilities and outcomes
with one maximum over their bits; these tests pin the edge cases those tricks must get
right (negative labels, unsigned dtypes, −0.0, NaN, values just above 1).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.errors import InvalidInput
from dpledger.metrics import flam
from dpledger.metrics import spatial as sp
from dpledger.metrics._segments import as_labels


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_a_negative_label_is_refused_whatever_the_signed_dtype(dtype: type) -> None:
    labels = np.array([0, 2, -1, 1], dtype=dtype)
    with pytest.raises(InvalidInput, match=r"label -1 at index 2, outside \[0, n_classes=3\)"):
        as_labels(labels, "y_true", 3)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint64, np.int8, np.int64])
def test_labels_in_range_pass_as_int64_and_the_top_one_is_refused(dtype: type) -> None:
    got = as_labels(np.array([0, 2, 1], dtype=dtype), "y_true", 3)
    assert got.dtype == np.int64
    assert got.tolist() == [0, 2, 1]
    with pytest.raises(InvalidInput, match="label 3 at index 1"):
        as_labels(np.array([0, 3], dtype=dtype), "y_pred", 3)


def test_the_confusion_matrix_refuses_a_negative_prediction() -> None:
    with pytest.raises(InvalidInput, match="y_pred holds label -2"):
        flam.confusion_matrix([0, 1], [1, -2], n_classes=2)


def test_minus_zero_is_a_probability_and_gives_the_rows_of_plus_zero() -> None:
    plus = sp.calibration_gap([0.0, 0.5, 1.0], [0.0, 1.0, 1.0], cap=20, offsets=[0, 1])
    minus = sp.calibration_gap([-0.0, 0.5, 1.0], [-0.0, 1.0, 1.0], cap=20, offsets=[0, 1])
    np.testing.assert_array_equal(minus, plus)


@pytest.mark.parametrize(
    ("prob", "outcome", "message"),
    [
        ([0.2, math.nextafter(1.0, 2.0)], [0.0, 1.0], "prob must lie in"),
        ([0.2, 0.3], [0.0, -1e-300], "outcome must lie in"),
        ([0.2, math.nan], [0.0, 1.0], "prob holds NaN"),
        ([0.2, 0.3], [math.inf, 1.0], "outcome holds NaN or inf"),
    ],
)
def test_a_value_outside_the_unit_interval_is_refused(
    prob: list[float], outcome: list[float], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        sp.calibration_gap(prob, outcome, cap=20)

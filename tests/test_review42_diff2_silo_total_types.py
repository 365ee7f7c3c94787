"""Review 42 (diff 2, M): f89c29b added ``SiloSums.total``'s silos as Python integers,
but only after ``np.asarray(rows, dtype=np.int64)``: uint64 units of 2**64 − 1 wrapped to
−1 (total −1.0, while ``sums`` refused the same units as beyond 2**53), and float units
2.7 were truncated to 2 (``sums`` gave 2.7). The units are read by type now: integers
added exactly, anything else refused."""

from __future__ import annotations

import numpy as np
import pytest

import dpledger as dl
from dpledger.metrics.records import SiloSums


def _sums(units: np.ndarray) -> SiloSums:
    n = units.shape[0]
    return SiloSums(units, 1.0, np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int64))


def test_uint64_units_past_2_53_are_refused_not_wrapped() -> None:
    sums = _sums(np.array([[2**64 - 1], [0]], dtype=np.uint64))
    with pytest.raises(dl.InvalidInput, match="beyond 2\\*\\*53"):
        sums.sums  # noqa: B018
    with pytest.raises(dl.InvalidInput, match="beyond 2\\*\\*53"):
        sums.total()


def test_float_units_are_refused_not_truncated() -> None:
    with pytest.raises(dl.InvalidInput, match="integer grid units"):
        _sums(np.array([[2.7], [0.0]])).total()


def test_integer_units_keep_their_totals() -> None:
    for dtype in (np.int64, np.uint32, np.int8):
        sums = _sums(np.array([[4, 1], [3, 2]], dtype=dtype))
        np.testing.assert_array_equal(sums.total(), [7.0, 3.0])
        np.testing.assert_array_equal(sums.total([1]), [3.0, 2.0])
        assert sums.total().dtype == np.float64

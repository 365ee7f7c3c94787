"""Review 42 (met): ``SiloSums.total`` added the silos' int64 units in int64 and only then
checked the 2**53 exact range, so a sum that wrapped passed: four silos of 2**62 units
and one of 3 totalled 3 units (1.5), while ``sums`` refused each silo. It adds them as
Python integers now."""

from __future__ import annotations

import numpy as np
import pytest

import dpledger as dl
from dpledger.metrics.records import SiloSums


def _sums(units: list[list[int]]) -> SiloSums:
    n = len(units)
    arr = np.array(units, dtype=np.int64).reshape(n, -1)
    return SiloSums(arr, 0.5, np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int64))


def test_a_wrapping_total_is_refused() -> None:
    with pytest.raises(dl.InvalidInput, match="beyond 2\\*\\*53"):
        _sums([[2**62]] * 4 + [[3]]).total()


def test_ordinary_totals_are_exact() -> None:
    sums = _sums([[4, 1], [3, -2]])
    np.testing.assert_array_equal(sums.total(), [3.5, -0.5])
    np.testing.assert_array_equal(sums.total([1]), [1.5, -1.0])
    assert sums.total().dtype == np.float64

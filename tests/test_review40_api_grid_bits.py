"""Review 40 (api): ``FixedPoint(low, high, bits)`` refused numpy's integers as "bits must
be an integer in [8, 40], got np.int64(26)" — an integer in range — though every other
count the metrics take (``max_records``, ``n_samples``, cohorts) reads them as Python's.
They are read as the integer they hold now; a bool or a timedelta is still refused."""

from __future__ import annotations

import numpy as np
import pytest

import dpledger as dl
from dpledger.metrics import FixedPoint


@pytest.mark.parametrize("bits", [np.int64(26), np.uint8(20), 26])
def test_numpy_integer_bits_are_integers(bits: object) -> None:
    grid = FixedPoint(0.0, 1.0, bits)  # type: ignore[arg-type]
    assert type(grid.bits) is int
    assert grid == FixedPoint(0.0, 1.0, int(bits))  # type: ignore[call-overload]
    assert FixedPoint.for_cap(2.0, bits).bits == int(bits)  # type: ignore[arg-type, call-overload]


@pytest.mark.parametrize("bits", [True, np.timedelta64(26), 26.0, np.int64(41), "26"])
def test_other_bits_are_refused(bits: object) -> None:
    with pytest.raises(dl.InvalidInput, match="bits must be an integer"):
        FixedPoint(0.0, 1.0, bits)  # type: ignore[arg-type]

"""Review 42 (met): ``FixedPoint.decode`` — the server's reading of a secure aggregator's
summed integer units — read them with ``np.asarray``: a flag among the units was a unit
(``[True, 2]`` decoded as 1 and 2 units), raw bytes were small integers (``bytearray(b"ab")``
decoded as 97 and 98 units), and a masked array's hidden values were decoded as if sent.
Every other reading in dpledger.metrics refuses these by type; decode now does too."""

from __future__ import annotations

import numpy as np
import pytest

import dpledger as dl
from dpledger.metrics.secure_sum import FixedPoint

GRID = FixedPoint(-1.0, 1.0)


@pytest.mark.parametrize(
    ("units", "why"),
    [
        ([True, 2], "boolean"),
        ([[1, 2], [False, 3]], "boolean"),
        (bytearray(b"ab"), "raw bytes"),
        (memoryview(b"ab"), "raw bytes"),
        (np.ma.array([1, 5], mask=[False, True]), "masked"),
        (np.array([True, False]), "integers"),
    ],
)
def test_malformed_units_are_refused(units: object, why: str) -> None:
    with pytest.raises(dl.InvalidInput, match=why):
        GRID.decode(units)


def test_integer_units_of_any_width_and_order_decode_exactly() -> None:
    q = GRID.quantum
    for units in ([1, -2], np.array([1, -2], dtype=">i8"), np.array([1, -2], dtype=np.int8)):
        np.testing.assert_array_equal(GRID.decode(units), [q, -2 * q])
    assert float(GRID.decode(np.array([2**53], dtype=np.uint64))[0]) == 2**53 * q
    assert float(GRID.decode([2**53])[0]) == 2**53 * q

"""A fixed-point grid near the doubles' limit: its sum overflowed to inf (review 39, der).

``FixedPoint(-1e308, 1.7e308)`` said ``max_clients`` 141,930,755 (2⁵³ units), yet two
clients at its upper edge summed to 3.4e308: ``decode`` multiplied the exact integer sum
by the quantum, overflowed (a numpy RuntimeWarning), and ``exact_sum`` — "the exact
sum" — returned inf. ``max_clients`` now also keeps the decoded sum within the doubles'
range, and ``decode`` refuses a sum it cannot represent (InvalidInput), never inf.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

from dpledger.errors import InvalidInput
from dpledger.metrics.secure_sum import FixedPoint, exact_sum


def test_max_clients_keeps_the_sum_finite() -> None:
    grid = FixedPoint(-1e308, 1.7e308)
    assert grid.max_clients == 1
    with pytest.raises(InvalidInput, match="exceed the grid's exact range"):
        exact_sum(np.full((2, 1), 1.7e308), grid)
    assert exact_sum(np.full((1, 1), 1.7e308), grid)[0] <= sys.float_info.max


def test_decode_refuses_an_overflowing_sum() -> None:
    grid = FixedPoint(-1e308, 1.7e308)
    units = grid.encode(np.full((2, 1), 1.7e308)).sum(axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy overflow warning on the way either
        with pytest.raises(InvalidInput, match="doubles' range"):
            grid.decode(units)


def test_ordinary_grids_keep_their_range() -> None:
    assert FixedPoint.for_cap(1.0).max_clients == 2**53 // 2**25  # bound 1 = 2^25 quanta
    assert FixedPoint(0.0, 1.0, 40).max_clients == 2**53 // 2**39

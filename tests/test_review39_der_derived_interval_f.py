"""derived_interval reads what ``f`` and ``denominator`` return by type (review 39, der).

A careless ``f`` returning an array, text, a complex, a tuple or an integer past a double
reached numpy's ValueError/TypeError or float()'s OverflowError, and one returning None
came back as NaN: an unusable metric whose reason blamed "a denominator 0, negative or too
small" for what was a bug in ``f``. Each is now InvalidInput naming ``f``; a real number
(a numpy scalar, a one-element array, NaN or inf) is read as before.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from dpledger.errors import InvalidInput
from dpledger.metrics.uncertainty import derived_interval

RELEASED = [1.0, 2.0]
BAD = [
    lambda z: z,  # the whole vector
    lambda z: "x",
    lambda z: None,
    lambda z: (1.0,),
    lambda z: 1 + 1j,
    lambda z: True,
]


@pytest.mark.parametrize("f", BAD)
def test_f_returning_no_real_number_is_invalid_input(f: object) -> None:
    with pytest.raises(InvalidInput, match="f must return one real number"):
        derived_interval(f, RELEASED, 1.0)  # type: ignore[arg-type]


def test_a_denominator_returning_text_is_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="denominator must return one real number"):
        derived_interval(lambda z: z[0], RELEASED, 1.0, denominator=lambda z: "x")  # type: ignore[arg-type,return-value]


def test_real_returns_are_read_as_before() -> None:
    a = derived_interval(lambda z: float(z[0]), RELEASED, 1.0)
    b = derived_interval(lambda z: np.float32(1.0) * z[0:1], RELEASED, 1.0)  # type: ignore[arg-type,return-value]
    assert (a.low, a.high) == pytest.approx((b.low, b.high))
    assert a.usable
    huge = derived_interval(lambda z: 10**400, RELEASED, 1.0)
    assert not huge.usable  # beyond a double: flagged, as an inf is
    assert not derived_interval(lambda z: math.nan, RELEASED, 1.0).usable
    exact = derived_interval(lambda z: Fraction(1, 2) * Fraction(z[0]), RELEASED, 1.0)  # type: ignore[arg-type,return-value]
    decimal = derived_interval(lambda z: Decimal(z[0]) / 2, RELEASED, 1.0)  # type: ignore[arg-type,return-value]
    assert exact.usable
    assert (exact.low, exact.high) == pytest.approx((decimal.low, decimal.high))

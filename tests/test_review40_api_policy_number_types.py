"""Review 40 (api): a policy's numbers built in Python.

* ``to_fraction`` kept a ``Fraction`` subclass as it was, so the checks ran its own
  comparisons: one whose ``>`` answers True passed ``must be > 0`` with ε = -4 (the
  policy's consistency check happened to catch that one). ``Budget`` compared its
  amount before making it a plain ``Fraction``: ``Budget(that(-1), "epsilon")`` held -1.
* numpy's ``float64`` (a ``float``) was read through numpy's repr, ``"np.float64(4.0)"``:
  "Invalid literal for Fraction"; numpy's integers and a ``Decimal`` were "expected a
  number, got int64" — numbers all. They are read as the numbers they are now; a
  subclass as the plain rational it holds."""

from __future__ import annotations

import warnings
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import dpledger as dl
from dpledger.policy import to_fraction
from tests.factories import policy


class _AlwaysPositive(Fraction):
    def __gt__(self, other: object) -> bool:
        return True

    def __lt__(self, other: object) -> bool:
        return False


def _fields() -> dict[str, object]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        p = policy()
    return {k: getattr(p, k) for k in dl.Policy.model_fields}


def test_a_fraction_subclass_is_read_as_its_plain_value() -> None:
    q = to_fraction(_AlwaysPositive(-4))
    assert type(q) is Fraction
    assert q == -4
    with pytest.raises(dl.PolicyError, match="must be > 0"):
        dl.Policy(**{**_fields(), "epoch_epsilon": _AlwaysPositive(-4)})
    with pytest.raises(dl.InvalidInput, match="never negative"):
        dl.Budget(_AlwaysPositive(-1), "epsilon")


@pytest.mark.parametrize(
    ("value", "exact"),
    [
        (np.float64(4.1), Fraction(41, 10)),
        (np.int64(4), Fraction(4)),
        (np.uint8(3), Fraction(3)),
        (Decimal("4.25"), Fraction(17, 4)),
        (Decimal("1E+3"), Fraction(1000)),
    ],
)
def test_numpy_numbers_and_decimals_are_numbers(value: object, exact: Fraction) -> None:
    assert to_fraction(value) == exact
    p = dl.Policy(**{**_fields(), "epoch_epsilon": value})
    assert p.epoch_epsilon == exact
    assert type(p.epoch_epsilon) is Fraction


@pytest.mark.parametrize(
    "value",
    [np.float32(4.0), np.bool_(True), np.timedelta64(4), Decimal("NaN"), Decimal("1e-999")],
)
def test_other_values_name_what_a_number_is(value: object) -> None:
    with pytest.raises(ValueError, match=r"expected|decimal|out of range"):
        to_fraction(value)

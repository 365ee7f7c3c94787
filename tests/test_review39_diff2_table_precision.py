"""DerivedRelease.table(): one small number no longer costs the row's other numbers
their digits (review 39 diff2).

e68bf39 switched a whole row to 4 significant digits when any of value/low/high was a
nonzero below 0.01: MSE 1234.5678 with an interval reaching 0.001 printed its value as
``1234`` (4 decimals before: ``1234.5678``), and accuracy 0.5 [0.004, 0.996] as ``0.5``
rather than the table's ``0.5000``. Deterministic."""

from __future__ import annotations

from dpledger.ledger.derived import _shown_triple


def test_large_value_keeps_its_decimals_beside_a_small_end() -> None:
    value, low, _ = _shown_triple(1234.5678, 0.001, 2469.0)
    assert value.strip() == "1234.5678"
    assert low.strip() == "0.001"


def test_rate_keeps_four_decimals() -> None:
    value, low, high = _shown_triple(0.5, 0.004, 0.996)
    assert (value.strip(), high.strip()) == ("0.5000", "0.9960")
    assert low.strip() == "0.004"


def test_small_units_still_shown() -> None:
    assert tuple(s.strip() for s in _shown_triple(2.9e-7, 2.6e-7, 3.3e-7)) == (
        "2.9e-07",
        "2.6e-07",
        "3.3e-07",
    )
    _, b, c = _shown_triple(1234.56780, 1234.56780, 1234.56782)
    assert b != c

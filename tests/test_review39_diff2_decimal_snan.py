"""derived_interval: an ``f`` returning Decimal('sNaN') (review 39 diff2).

8c0386c reads any real number ``f`` returns, NaN included (the metric is then flagged),
but float() raises a bare ValueError for a *signalling* Decimal NaN, which escaped
derived_interval untyped: the one Decimal NaN that was neither flagged nor InvalidInput.
Deterministic."""

from __future__ import annotations

from decimal import Decimal

from dpledger.metrics.uncertainty import derived_interval


def test_signalling_nan_is_flagged_as_a_nan_is() -> None:
    out = derived_interval(lambda z: Decimal("sNaN"), [1.0, 2.0], 1.0)  # type: ignore[arg-type,return-value]
    assert not out.usable

"""Review 42 diff 2: the derived table's UNUSABLE row printed "the whole range" with ``:g``
(6 significant digits, to nearest) after review 42 rounded every other printed interval
end outward. A regression metric's range is set by the codec's residual bound r (MSE
[0, r²]), so its end is rarely a short decimal: r² = 1524154.4 printed as 1.52415e+06, a
"whole range" narrower than the metric's range. Its ends now round outward too (a short
end such as 0, 1 or inf prints as before).
"""

from __future__ import annotations

import math
from decimal import Decimal
from types import MappingProxyType

from dpledger.ledger.derived import DerivedRelease
from dpledger.metrics.uncertainty import Interval


def _row(low: float, high: float) -> str:
    iv = Interval(low, high, 0.95, "delta", reason="noise swamps it")
    d = DerivedRelease(None, MappingProxyType({"mse": 1.0}), MappingProxyType({"mse": iv}), "")  # type: ignore[arg-type]
    (row,) = d.rows()
    return row


def test_whole_range_ends_round_outward() -> None:
    end = 1524154.4
    row = _row(0.0, end)
    high = row.split("[")[1].split("]")[0].split(", ")[1]
    assert Decimal(high) >= Decimal(end), row  # was 1.52415e+06


def test_short_ends_print_as_before() -> None:
    assert "UNUSABLE  [0, 1] (the whole range)" in _row(0.0, 1.0)
    assert "UNUSABLE  [-1, inf] (the whole range)" in _row(-1.0, math.inf)

"""Review 42 diff 3: ``value_with_bar``'s new ``decimals=`` changed every caller that never
passes it.

79c09e7 added ``unit = min(unit, -decimals)`` for the CLI's vectors (``decimals=4``), but
the default ``decimals=0`` then capped the value's unit at 1 for every other caller
(Flower's round report, the demo, the CLI's scalar): a value whose bar is 1,000 or more
printed all its integer digits, and past 10¹⁷ seventeen significant digits beside its bar
(``5.1234567890123454e+20 ± 1e+19``, formerly ``5.123e+20``; Flower's histogram sums at
a bar of 1,198, ``122500`` formerly ``1.225e+05``), contrary to the commit's "as before".
Without ``decimals`` the value is again to a unit of at most a hundredth of its bar.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from dpledger._printed import value_with_bar


@pytest.mark.parametrize(
    ("value", "bar", "shown"),
    [(5.123456789012345e20, 1e19, "5.123e+20"), (122500.0064, 1198.3, "1.225e+05"),
     (1234567891.234, 3e7, "1.2346e+09"), (-2.5e6, 4e5, "-2.5e+06")],
)  # fmt: skip
def test_without_decimals_the_unit_follows_the_bar(value: float, bar: float, shown: str) -> None:
    text = value_with_bar(value, bar)[0]
    assert text == shown
    assert abs(Decimal(text) - Decimal(value)) <= Decimal(bar) / 100


def test_decimals_still_apply_when_asked() -> None:
    assert value_with_bar(122500.0064, 1198.3, 6, 6, 4)[0] == "122500.0064"

"""Review 42 diff 3: an interval's high end just below zero printed as ``-0.000``.

``outward`` rounds a high end toward +∞; for an end in (−10⁻ᵈ, 0) that is zero, which
Decimal keeps signed, so the demo printed ``top-bucket gap -0.001 [-0.001, -0.000]`` (at
2,000,000 clients) and any table an end ``-0.0000``. To nearest this happened only in
(−½·10⁻ᵈ, 0); rounding outward doubled the band. Zero now prints unsigned.
"""

from __future__ import annotations

import pytest

from dpledger._printed import outward


@pytest.mark.parametrize(
    ("x", "spec", "shown"),
    [(-0.0004, "+.3f", "+0.000"), (-0.0009, "+.3f", "+0.000"), (-3e-5, ".4f", "0.0000"),
     (-1.7e-05, ".2f", "0.00"), (-1e-300, ".2f", "0.00")],
)  # fmt: skip
def test_a_high_end_just_below_zero_is_no_negative_zero(x: float, spec: str, shown: str) -> None:
    assert outward(x, spec, True) == shown


def test_other_ends_unchanged() -> None:
    assert outward(-0.0004, "+.3f", False) == "-0.001"
    assert outward(0.0004, "+.3f", False) == "+0.000"
    assert outward(0.0004, "+.3f", True) == "+0.001"
    assert outward(-0.0012, ".3f", True) == "-0.001"

"""Review 41 (priv): an aggregate in a float wider than a double (numpy's ``longdouble``)
is read as its nearest double, at ANY size — not only past 2^53 as the docs said of
integers — so two neighbouring exact sums can be read more than their difference apart
(outside the charge, as the documented integer case). The docs now say so. Deterministic.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from dpledger.metrics._reading import read_real

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(
    np.finfo(np.longdouble).nmant <= np.finfo(np.float64).nmant,
    reason="longdouble is a double on this platform",
)
def test_neighbouring_longdouble_sums_are_read_more_than_their_difference_apart() -> None:
    # clients clipped to [0, 1] under add_remove (Δ = 1): {1, 3·2⁻⁵⁴} and {3·2⁻⁵⁴}
    s = np.array([1.0, 3 * 2.0**-54], dtype=np.longdouble).sum()
    s2 = np.longdouble(3 * 2.0**-54)
    assert s - s2 == 1  # exact in longdouble: one client's value
    a, _ = read_real(np.array([s]))
    b, _ = read_real(np.array([s2]))
    assert a is not None
    assert b is not None
    # read further apart than Δ, exactly: 1 + 2⁻⁵⁴ (a float subtraction would round it to 1)
    assert Fraction(float(a[0])) - Fraction(float(b[0])) == 1 + Fraction(1, 2**54)


def test_the_docs_name_the_longdouble_rounding() -> None:
    for doc in ("README.md", "docs/privacy-model.md"):
        text = " ".join((ROOT / doc).read_text(encoding="utf-8").split())
        assert "longdouble" in text, doc

"""Review 44 diff 3: 40134e7's README says an honest retry is refused as a conflict "with
probability ≤ 1e-9" (``RETRY_FALSE_CONFLICT``, a union bound over the coordinates). For
the Gaussian law ``retry_tolerance`` took ``inv_cdf(1 − 1e-9 / (2d))``: near 1 a double
keeps only ~16 digits, so 1 − 5e-15 (d = 100,000) or 1 − 7.6e-15 (d = 65,536) is off by up
to ~1% of its tail, and at d = 65,536 the bound read 1.0041e-9. The lower tail,
``−inv_cdf(1e-9 / (2d))``, is exact to a few ulps. Deterministic (no noise drawn); the
tail is ``erfc(z/√2)``, accurate to a few ulps relative."""

from __future__ import annotations

import math

import pytest

from dpledger import mechanisms as mech
from dpledger.ledger.retries import RETRY_FALSE_CONFLICT, retry_tolerance


@pytest.mark.parametrize("d", [1, 7, 1000, 4096, 21_674, 65_536, 99_999, 100_000])
def test_the_gaussian_tolerance_keeps_the_union_bound(d: int) -> None:
    facts = mech.MechanismFacts("gaussian", "rho", 1.0, 1.0, d)
    z = retry_tolerance(facts)
    union = d * math.erfc(z / math.sqrt(2.0))  # d · 2Φ(−z)
    assert union <= RETRY_FALSE_CONFLICT * (1 + 1e-12), (d, z, union)
    assert union >= RETRY_FALSE_CONFLICT * (1 - 1e-9), (d, z, union)  # not needlessly wide

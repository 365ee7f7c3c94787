"""Review 40 (docs): the README and docs/privacy-model.md bounded the ε excess of reading
an integer sum beyond 2^53 as the nearest double by "at most cohort·2⁻⁵³". Two neighbouring
sums each move by up to half an ulp, together one ulp ≤ 2⁻⁵²·|S| with |S| ≤ cohort·M
(M the cap or the largest |clip bound|), so the excess relative to the sensitivity Δ is
at most cohort·2⁻⁵²·M/Δ: cohort·2⁻⁵³ only where Δ = 2M (a capped vector, or a clip
[−h, h], under replace). Under add_remove (Δ = cap) it reaches nearly twice the stated
bound; the docs now state the general one. Exact integer arithmetic, no randomness."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpledger.metrics._reading import read_real

COHORT = 10**9
ULP = 2**17  # the doubles' spacing in [2^69, 2^70), where cohort × cap lands below


def _excess(cap: int, start: int) -> Fraction:
    """How far two neighbouring sums (start, start + cap) are apart once read, beyond cap."""
    read, _ = read_real([start, start + cap])
    assert read is not None
    low, high = (int(v) for v in np.asarray(read, dtype=np.float64))
    return Fraction(high - low - cap, cap)


def test_add_remove_excess_exceeds_cohort_2_pow_53_and_stays_within_the_general_bound() -> None:
    cap = 7_629_394 * ULP + 2  # 999,999,930,370: a policy's cap (≤ 1e12); cap ≡ 2 (mod ulp)
    base = 2**69 + 2**16 - 1  # rounds down by 2^16 − 1; base + cap rounds up by 2^16 − 1
    assert 2**69 <= base < base + cap <= COHORT * cap < 2**70
    excess = _excess(cap, base)
    assert excess == Fraction(ULP - 2, cap)  # 1.31e-7
    assert excess > Fraction(COHORT, 2**53)  # the bound the docs stated (1.11e-7)
    assert excess <= Fraction(COHORT, 2**52)  # cohort·2⁻⁵²·M/Δ with M = Δ = cap

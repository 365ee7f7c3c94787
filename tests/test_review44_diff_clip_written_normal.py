"""Review 44 diff: 3371492 wrote each candidate bound with the digits that keep it
clipping the held-out values its row says, so that ``to_clip`` of the recommended row is
a Clip (review 43: it was InvalidInput where 6 digits wrote the bound as ``low``). Its
6 digits could still write a bound just above the smallest normal double below it:
p49.986… of 1,000 zeros and 1,000 values of 1e-307 is 2.2250745e-308, a bound the
calibration accepts (it refuses only bounds below 2.2e-308), written ``2.22507e-308`` — a
subnormal, which no policy clip takes: ``to_clip()`` of the recommended row raised
InvalidInput. Deterministic (no noise)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

import dpledger as dl
from dpledger.policy.base import MIN_NORMAL


def test_a_bound_just_above_the_smallest_normal_is_written_as_one() -> None:
    x = np.concatenate([np.zeros(1000), np.full(1000, 1e-307)])
    p = 100 * 999.22250745 / 1999  # linear interpolation: 0.22250745 of the way to 1e-307
    cal = dl.calibrate_clip(x, epsilon=1, cohort=2000, low=0.0, percentiles=(p, 100))
    row = cal.row(p)
    assert row.bound >= float(MIN_NORMAL)
    assert Fraction(row.written) >= MIN_NORMAL
    clip = cal.to_clip(p)  # InvalidInput before: high 2.22507e-308 is subnormal
    assert clip.high == Fraction(row.written)
    assert cal.recommended == row
    cal.to_clip()

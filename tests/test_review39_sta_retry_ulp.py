"""Review h39 (statistics): a true retry must not be refused when the sum's ulp nears the noise.

``retry_tolerance`` bounds the noise at RETRY_FALSE_CONFLICT = 1e-9 (t ≈ 20.7 Laplace
scales for one coordinate), and ``near`` allowed that plus OpenDP's grid. But OpenDP
rounds its noisy output to the nearest double: where an ulp of the sum is ~21 noise
scales (ε·n ≈ 1e17, e.g. a clip of [0, 1e12] at ε = 1.8e8 over 1e9 clients), a draw of
|noise| > ~10.5 scales (P ≈ 2.75e-5, not 1e-9) rounds to the next double, ≥ 21 scales away,
and the caller's retry of that very aggregate was ``ReleaseIdConflict``: the value it
paid for, lost. The tolerance now adds an ulp of the recorded value.

OpenDP's noise is unseeded: 200,000 draws; before the fix ~5.5 false conflicts were
expected (P(|X| > 10.5 b) = 2.75e-5 each; 0 of them with probability e^-5.5 ≈ 0.4%: the
test's chance of missing the old bug); after it the reach is ~20.7 scales + 1 ulp ≈ 1.99
ulps, so a false failure needs an output 2 ulps away, a draw past 1.5 ulps = 31.5 scales
(P = e^-31.5 ≈ 2e-14 each, ≈ 4e-9 per run).
"""

from __future__ import annotations

import math

import numpy as np

from dpledger import mechanisms as mech
from dpledger.ledger.retries import near

DRAWS = 200_000


def test_a_retry_of_the_same_aggregate_is_near_its_recorded_output() -> None:
    x = 1.5 * 2.0**52  # an aggregate whose ulp is 1
    scale = 1.0 / 21.0  # the ulp is 21 noise scales: a half-ulp jump is a 10.5-scale draw
    facts = mech.MechanismFacts("laplace", "epsilon", scale, scale, 0)  # ε = 1 a release
    assert np.spacing(x) == 1.0
    # the same law drawn 1,000 coordinates a call (faster than 200,000 scalar releases)
    wide = mech.MechanismFacts("laplace", "epsilon", scale, scale, 1_000)
    chunks = [np.full(1_000, x)] * (DRAWS // 1_000)
    outputs = np.asarray(mech.apply_many(wide, chunks)).reshape(-1)
    moved = int(np.count_nonzero(outputs != x))
    assert moved < DRAWS * 1e-3  # the jumps are the rare large draws, as modelled
    aggregate = np.array([x])
    refused = sum(not near(aggregate, np.array([o]), facts) for o in outputs[outputs != x])
    assert refused == 0, (refused, moved, math.log(1e9))

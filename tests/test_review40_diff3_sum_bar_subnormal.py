"""Review 40 (diff 3): a vector's bar (``_bars.sum_half_width``) stepped one ulp at a time
from ``n · mean`` to the widest double that over ``n`` is at most the mean-form bar. For a
normal mean that is an ulp or two; for a subnormal mean (or 0) the mean's grid is coarser
than ``n · mean``'s ulps, and the widest double lies up to 2**51 steps away: a release with
no grid slack (facts with ``k=None``, OpenDP's finest grid, which the public
:class:`MechanismFacts` accepts) and ``half_width(0.0)`` (the slack and rounding alone)
stepped ~n/2 times, minutes at a billion clients; a subnormal mean at n = 1e9, ~2**48
times. Now it bisects the doubles once a few steps have not settled it. Deterministic:
``math.nextafter`` is counted, and a call past 10,000 fails the test instead of hanging.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger import _bars
from dpledger import mechanisms as mech
from dpledger.types import Budget


@pytest.fixture
def bounded_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    real = math.nextafter
    calls = [0]

    def counted(x: float, y: float) -> float:
        calls[0] += 1
        if calls[0] > 10_000:
            raise AssertionError("sum_half_width stepped more than 10,000 ulps")
        return real(x, y)

    monkeypatch.setattr(math, "nextafter", counted)


@pytest.mark.parametrize("mean", [0.0, 5e-324, 1e-323, 1e-318, 2.2e-308])
@pytest.mark.parametrize("n", [3, 10**6, 10**9, 2**63])
def test_a_subnormal_mean_bar_is_found_in_few_steps(
    bounded_steps: None, mean: float, n: int
) -> None:
    v = _bars.sum_half_width(mean, n)
    assert v / n <= mean
    up = np.nextafter(v, math.inf)
    assert not (up / n <= mean)  # the widest such double


def test_a_zero_slack_release_half_width_at_factor_zero(bounded_steps: None) -> None:
    policy = dl.Policy.load(SPATIAL)
    spec = policy.metric("error_histogram")
    facts = mech.MechanismFacts("laplace", "epsilon", 1.0, 1.0, spec.size, k=None)
    req = dl.ReleaseRequest(
        epoch=0, metric="error_histogram", region="eu-west", cohort=10**9,
        edges_version=spec.edges_version,
    )  # fmt: skip
    release = dl.Release.make(
        request=req, entry_id=1, entry_hash="0" * 64, noisy_sum=np.zeros(spec.size),
        bar="ci95", bar_factor=mech.bar_factor("ci95"), charge=Budget(Fraction(1), "epsilon"),
        facts=facts, kind=spec.kind, magnitude=0.0,
    )  # fmt: skip
    assert release.error_bar == pytest.approx(math.log(20.0))
    assert release.half_width(0.0) / req.cohort <= 0.0  # the slack and rounding alone: 0

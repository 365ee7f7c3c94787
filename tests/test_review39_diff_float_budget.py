"""Review 39 (diff): ``dl.error_bar`` / ``dl.cohort_floor`` with a float budget such as 0.2.

31e4e6c made them read the scale a release is calibrated to, and 9baff5e computes the bar
as a release does, so the planner's bar is the printed one bit for bit. But they calibrated
at ``Fraction(0.2)``, the binary double (0.2000000000000000111…), while a policy reads the
float 0.2 (or "0.2") as exactly 1/5 (``to_fraction`` reads floats through ``repr``): the
calibrated scale came out an ulp or two smaller at about 45% of clip widths, so
``dl.error_bar(Δ, 0.2, n)`` was below the bar a release at ``n`` prints, and a target set
to it got a ``dl.cohort_floor`` of ``n`` where the ledger's floor is ``n + 1`` (the README's
own example passes 0.2). A float budget is now read as the policy reads it. Deterministic.
"""

from __future__ import annotations

import warnings

import pytest
from _stores import SMALL_HEAD

import dpledger as dl
from dpledger import mechanisms as mech

POLICY = (
    SMALL_HEAD.format(name="tiny")
    + """[metrics.m]
kind = "scalar_mean"
epsilon = 0.2
clip = {{ low = "0", high = "{high}", source = "test" }}
"""
)

N = 2400
HIGHS = [3.4, 1.7, 2.9, 5.3, 7.1, 11.0, 13.7, 0.9, 42.0, 97.3]


@pytest.mark.parametrize("high", HIGHS)
def test_a_float_budget_is_the_policys_budget(high: float) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        policy = dl.Policy.from_toml(POLICY.format(high=high), source="t.toml")
    facts, _ = mech.mechanism_facts(policy, "m")
    delta = mech.policy_sensitivity(policy, "m")
    printed = mech.error_bar_of(facts, N)  # what a release at cohort N prints
    assert dl.error_bar(delta, 0.2, N) == printed
    assert dl.cohort_floor(delta, 0.2, printed) == mech.cohort_floor_of(facts, printed)

"""Budgets and sensitivities at the edges of what a policy may declare stay exact and finite.

A policy may declare ε or ρ up to 1e9 and clip bounds down to the smallest normal double;
OpenDP's zCDP conversion overflows past ρ ≈ 7·10⁴, dp_accounting's PLD grid needs memory
in proportion to the loss, and a sensitivity far below OpenDP's 2⁻⁴⁰ noise grid used to
fail calibration.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from dpledger import accounting
from dpledger.accounting import pld_epsilon, zcdp_epsilon, zcdp_epsilon_bound
from dpledger.mechanisms import MechanismFacts, calibrate, privacy_loss


def test_the_zcdp_view_past_opendps_range_is_the_closed_form_rounded_up() -> None:
    for rho in (Fraction(50_001), Fraction(10**6), Fraction(5 * 10**17)):
        eps = zcdp_epsilon(rho, 1e-6)
        assert eps == zcdp_epsilon_bound(rho, 1e-6)
        exact = float(rho) + 2 * math.sqrt(float(rho) * math.log(1e6))
        assert exact < eps < exact * (1 + 1e-11)


@pytest.mark.parametrize(
    ("sensitivity", "budget", "mechanism", "measure"),
    [
        (1e-15, 1, "laplace", "epsilon"),  # Δ below OpenDP's 2⁻⁴⁰ grid
        (2.3e-308, 10**9, "laplace", "epsilon"),
        (2.3e-308, 10**9, "gaussian", "rho"),
    ],
)
def test_a_sensitivity_below_the_noise_grid_still_calibrates_exactly(
    sensitivity: float, budget: int, mechanism: str, measure: str
) -> None:
    facts = calibrate(
        sensitivity=sensitivity,
        budget=Fraction(budget),
        measure=measure,  # type: ignore[arg-type]
        mechanism=mechanism,  # type: ignore[arg-type]
        dimension=0,
    )
    assert privacy_loss(facts) <= budget
    assert facts.scale >= 2.0**-40 / budget


def test_no_pld_view_when_the_composed_loss_is_past_its_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if pld_epsilon([], 1e-6) is None:
        pytest.skip("dp-accounting (extra 'pld') not installed")
    monkeypatch.setattr(accounting, "PLD_MAX_EPSILON", 1.0)
    at = MechanismFacts("laplace", "epsilon", 1.0, 2.0, 0)  # ε = 1/2 a release
    assert pld_epsilon([at], 1e-6) is not None
    assert pld_epsilon([at] * 3, 1e-6) is None  # 3/2 > 1: the accountant is not run

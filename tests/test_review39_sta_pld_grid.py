"""Review h39 (statistics): the PLD lifetime view must never understate OpenDP's own charge.

``pld_epsilon`` read each release as a continuous Laplace/Gaussian of noise multiplier
scale / sensitivity. OpenDP's mechanisms round the input onto the 2**k grid and charge
that rounding on top of the sensitivity (its map is the loss at Δ + the grid), and the
noise itself is discrete on that grid. With a sensitivity near the grid (a clip of width
1e-13) a release charged ρ = 1/2 (ε ≈ 5.2 at δ = 1e-6 by the zCDP view, ≈ 4.9 for a
continuous Gaussian of μ = 1) had a PLD view, and hence a zCDP ledger's headline
lifetime ε, of 0.39. Deterministic (no noise is read).
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import pytest

import dpledger as dl
from dpledger import mechanisms as mech
from dpledger.accounting import pld_epsilon, zcdp_epsilon

TINY = """
name = "tiny-clip"
version = "1"
neighbouring = "replace"
definition = "zcdp"
epoch_rho = "1"
eval_fraction = "0.25"
allocation = "pooled"
[regions]
names = ["a"]
[metrics.m]
kind = "scalar_mean"
rho = "0.125"
clip = { low = "0", high = "1e-13", source = "test: a clip width near OpenDP's grid" }
"""


def _needs_pld() -> None:
    if pld_epsilon([], 1e-6) is None:
        pytest.skip("dp-accounting (extra 'pld') not installed")


@pytest.mark.parametrize("sensitivity", [1e-13, 1e-11, 1e-9])
@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_pld_view_is_never_below_the_continuous_loss_of_opendps_charge(
    sensitivity: float, kind: str
) -> None:
    _needs_pld()
    measure = "epsilon" if kind == "laplace" else "rho"
    budget = Fraction(1) if kind == "laplace" else Fraction(1, 2)
    facts = mech.calibrate(
        sensitivity=sensitivity, budget=budget, measure=measure, mechanism=kind, dimension=0
    )
    assert mech.privacy_loss(facts) <= budget  # the charge OpenDP certifies
    got = pld_epsilon([facts], 1e-6)
    # the same mechanism read continuously at OpenDP's charged loss
    if kind == "laplace":
        at_charge = float(mech.privacy_loss(facts))  # pure ε: δ > 0 cannot go far below
        assert got is None or got >= 0.99 * at_charge
    else:
        mu = math.sqrt(2 * float(mech.privacy_loss(facts)))
        reference = pld_epsilon([mech.MechanismFacts("gaussian", "rho", mu, 1.0, 0)], 1e-6)
        assert reference is not None
        assert got is None or got >= reference * (1 - 1e-9)


def test_zcdp_ledger_headline_is_not_below_its_charge(tmp_path: Path) -> None:
    _needs_pld()
    policy = dl.Policy.from_toml(TINY, source="tiny.toml")
    with dl.Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        for i in range(2):
            req = dl.ReleaseRequest(epoch=0, metric="m", region="a", cohort=10, release_id=f"r{i}")
            ledger.release(req, 5e-13)
        life = ledger.lifetime("a")
    assert life.rho == Fraction(1, 4)
    # a continuous Gaussian of ρ = 1/4 (μ = 1/√2) is ≈ 3.3 at δ = 1e-6; the zCDP view 3.0+
    floor = pld_epsilon([mech.MechanismFacts("gaussian", "rho", math.sqrt(0.5), 1.0, 0)], 1e-6)
    assert floor is not None
    assert floor > 3.0
    assert life.epsilon >= floor * (1 - 1e-9)
    assert life.epsilon <= zcdp_epsilon(life.rho, 1e-6)

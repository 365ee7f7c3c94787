"""A release's error bar covers OpenDP's output grid (audit 2, finding 5).

OpenDP rounds a float release onto the grid 2^k (k = -40 here): the sum is rounded and
the noise is discrete on the grid. Where the noise scale Δ/ε is far below the grid (a
clip of 1e-6 at ε = 1e9, both within the policy's limits) the bar 3e-15 said nothing of
the rounding (~1e-13), and it covered in 0 of 300 releases. The bar now adds two grid
steps to the sum's half-width: the rounding (≤ one step) and the discrete quantile's
excess over the continuous one (≤ one step, shown in ``MechanismFacts.grid_slack``).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest

import dpledger as dl
from dpledger import mechanisms as mech

POLICY = """name = "grid"
version = "1"
neighbouring = "replace"
definition = "{definition}"
{budget}
eval_fraction = "1"
allocation = "pooled"
[regions]
names = ["a"]
[metrics.m]
kind = "scalar_mean"
{metric_budget}
clip = {{ low = "0", high = "{high}", source = "t" }}
"""


def policy(definition: str, high: str) -> dl.Policy:
    if definition == "pure":
        budget, metric_budget = 'epoch_epsilon = "1e9"', 'epsilon = "1e9"'
    else:
        budget, metric_budget = 'epoch_rho = "1e9"', 'rho = "1e9"\nmechanism = "gaussian"'
    text = POLICY.format(definition=definition, budget=budget, metric_budget=metric_budget,
                         high=high)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eval_fraction 1 is outside the usual range
        return dl.Policy.from_toml(text, source="grid.toml")


@pytest.mark.parametrize(("definition", "high"), [("pure", "1e-6"), ("zcdp", "1e-9")])
def test_a_bar_below_the_grid_still_covers(tmp_path: Path, definition: str, high: str) -> None:
    """Deterministic: the error is the grid's alone, so every release must cover."""
    p = policy(definition, high)
    truth, n = 0.33 * float(high), 1
    with dl.Ledger.open(tmp_path / "g.db", p, mode="create") as ledger:
        covered = 0
        for epoch in range(200):
            r = ledger.release(dl.ReleaseRequest(epoch=epoch, metric="m", region="a",
                                                 cohort=n), truth)  # fmt: skip
            assert r.scale < 1e-12 < r.error_bar  # the grid, not the noise, is the bar
            covered += abs(float(r.value) - truth / n) <= r.error_bar
    assert covered == 200


def test_the_grid_adds_two_steps_to_the_sum_and_nothing_else() -> None:
    facts = mech.MechanismFacts(mechanism="laplace", measure="epsilon", sensitivity=1.0,
                                scale=2.0, dimension=0, k=-40)  # fmt: skip
    assert facts.grid_slack == 2 * 2.0**-40
    assert mech.error_bar_of(facts, 1000) == (math.log(20) * 2.0 + 2 * 2.0**-40) / 1000
    finest = mech.MechanismFacts(mechanism="laplace", measure="epsilon", sensitivity=1.0,
                                 scale=2.0, dimension=0, k=None)  # fmt: skip
    assert finest.grid_slack == 0.0
    floor = mech.cohort_floor_of(facts, 0.01)
    assert mech.error_bar_of(facts, floor) <= 0.01 < mech.error_bar_of(facts, floor - 1)

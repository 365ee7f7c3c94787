"""Review 40 (planning): a vector's "needs n ≥ … even with all of ε_eval" was a scalar's.

``plan`` names, for a region below a metric's floor, the cohort the metric would need
with the whole evaluation budget on one release. It read that floor from
``least_cohort(Δ, ε_eval, …)``, which calibrates a *scalar* release; a vector (or
histogram) release of dimension d is calibrated by OpenDP's map, which charges every
coordinate's rounding onto the 2**-40 grid, so near the grid its scale is far above the
scalar's. At cap 1e-9, dimension 1000, ε = 1 the plan said "needs ≥ 5,997" (and warned
the region "can never publish m (needs n ≥ 5997)") where the ledger's floor with that
whole budget is 8,718: a cohort of 5,997 is refused. Deterministic.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import dpledger as dl

POLICY = """
name = "v"
version = "1"
neighbouring = "{nb}"
definition = "{definition}"
epoch_{unit} = "4"
eval_fraction = "0.25"
{delta}
[regions]
names = ["a"]
[metrics.m]
kind = "vector_sum"
{unit} = "{amount}"
dimension = {dimension}
cap_per_client = "{cap}"
nonnegative = true
target = {target}
"""


def _policy(amount: str, **kw: object) -> dl.Policy:
    unit = "epsilon" if kw["definition"] == "pure" else "rho"
    delta = "" if kw["definition"] == "pure" else "delta = 1e-6"
    text = POLICY.format(amount=amount, unit=unit, delta=delta, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dl.Policy.from_toml(text, source="t.toml")


@pytest.mark.parametrize("nb", ["replace", "add_remove"])
@pytest.mark.parametrize(
    ("definition", "dimension", "cap"),
    [("pure", 1000, "1e-9"), ("pure", 10, "1e-12"), ("zcdp", 1000, "1e-12"), ("pure", 10, "1")],
)
def test_whole_budget_floor_is_the_ledgers(
    tmp_path: Path, nb: str, definition: str, dimension: int, cap: str
) -> None:
    kw = {"nb": nb, "definition": definition, "dimension": dimension, "cap": cap}
    kw["target"] = float(cap) * 1e-3
    half = _policy("0.5", **kw)  # the metric has half of the evaluation budget (1)
    row = dl.plan(half, cohorts={"a": 10}).rows[0]
    m = re.search(r"needs ≥ (\d+) even with all of 1\)", row.reason)
    assert m is not None, row.reason
    best = int(m.group(1))
    whole = _policy("1", **kw)  # the same metric with the whole evaluation budget
    assert dl.plan(whole, cohorts={"a": 10}).rows[0].cohort_floor == best
    with dl.Ledger.open(tmp_path / "l.db", whole, mode="create") as ledger:
        for n, ok in ((best, True), (best - 1, False)):
            request = dl.ReleaseRequest(epoch=0, metric="m", region="a", cohort=n)
            verdict = ledger.check(request, np.zeros(dimension))
            floor = next(c for c in verdict.checks if c.name == "cohort_floor")
            assert (floor.passed) is ok, floor.reason

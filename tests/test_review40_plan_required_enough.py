"""Review 40 (planning): ``required_budget`` called a policy's budget "not enough" at a
cohort its releases are approved at.

``required`` is ``budget_for_target``'s answer, the least 4-significant-digit decimal that
meets the target, and ``enough`` was ``policy_budget >= required``. A weighted metric of
ε = 1/3 has a floor of 8,988 at target 0.001; there ``required`` is 0.3334 > 1/3, so
``enough`` was False while ``plan`` called the release publishable and the ledger approved
it. ``enough`` now asks whether the policy's own budget meets the target (the approval
check's floor at its calibrated scale). Deterministic.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import dpledger as dl
from dpledger.planning import required_budget

POLICY = """
name = "p"
version = "1"
neighbouring = "{nb}"
definition = "pure"
epoch_epsilon = "1"
eval_fraction = "1"
[regions]
names = ["a"]
[metrics.m]
kind = "scalar_mean"
weight = "1"
clip = {{ low = "0", high = "1", source = "t" }}
target = 0.001
[metrics.k]
kind = "scalar_mean"
weight = "2"
clip = {{ low = "0", high = "1", source = "t" }}
"""


@pytest.mark.parametrize("nb", ["replace", "add_remove"])
def test_enough_is_what_the_ledger_approves(tmp_path: Path, nb: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        policy = dl.Policy.from_toml(POLICY.format(nb=nb), source="t.toml")
    floor = dl.plan(policy, cohorts={"a": 10}).rows[0].cohort_floor
    assert floor is not None
    with dl.Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        for n in (floor, floor - 1):
            row = required_budget(policy, {"a": n}).regions[0].metrics[0]
            verdict = ledger.check(
                dl.ReleaseRequest(epoch=0, metric="m", region="a", cohort=n), 0.5
            )
            approved = next(c for c in verdict.checks if c.name == "cohort_floor").passed
            assert row.enough is approved is (n == floor), (n, row)
            assert dl.plan(policy, cohorts={"a": n}).rows[0].publishable is approved

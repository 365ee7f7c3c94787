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


THREE = """
name = "p3"
version = "1"
neighbouring = "replace"
definition = "pure"
epoch_epsilon = "1"
eval_fraction = "1"
[regions]
names = ["a"]
""" + "".join(
    f'[metrics.m{i}]\nkind = "scalar_mean"\nweight = "1"\n'
    f'clip = {{ low = "0", high = "1", source = "t" }}\ntarget = 0.001\n'
    for i in range(3)
)


def test_a_region_the_plan_and_the_ledger_fit_is_said_to_fit(tmp_path: Path) -> None:
    # three metrics of ε = 1/3 each at their floor: each "required" is 0.3334, whose sum
    # 1.0002 exceeds ε_eval = 1, yet the policy's own 1/3 each is enough and fits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        policy = dl.Policy.from_toml(THREE, source="t.toml")
    floor = dl.plan(policy, cohorts={"a": 10}).rows[0].cohort_floor
    assert floor is not None
    plan = dl.plan(policy, cohorts={"a": floor})
    assert plan.regions[0].fits
    assert all(r.publishable for r in plan.rows)
    with dl.Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        for metric in policy.metrics:
            ledger.release(dl.ReleaseRequest(epoch=0, metric=metric, region="a", cohort=floor), 0.5)
    need = required_budget(policy, {"a": floor})
    region = need.regions[0]
    assert all(m.enough for m in region.metrics)
    assert region.fits
    assert need.fits
    assert region.total.amount == 1

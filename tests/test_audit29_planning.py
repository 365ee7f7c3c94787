"""Audit s29, F12 and F6: plans of budgets no policy may hold, and untyped planning errors.

F12: ``plan --rounds N`` planned per-release budgets below the loader's floor (2.2e-308)
and called them publishable; ``budget_for_scale`` returned ε ≈ 9e-617;
``cohort_floor`` returned a floor above the largest cohort a release accepts. F6:
``plan(ledger='x')``, ``required_budget(targets=[1])`` and ``Policy.overcommitment('x')``
raised AttributeError/TypeError.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import dpledger as dl
from dpledger import InvalidInput, Policy
from dpledger.cli.main import main
from dpledger.planning.units import compare_units
from dpledger.policy import MAX_ROUNDS
from dpledger.types import MAX_COHORT

TINY = """
name = "tiny"
version = "1"
neighbouring = "replace"
definition = "pure"
epoch_epsilon = "2.3e-308"
eval_fraction = "1"
[regions]
names = ["a"]
[metrics.m]
kind = "scalar_mean"
clip = { low = "0", high = "1e-300", source = "x" }
weight = "1"
"""


@pytest.fixture
def tiny() -> Policy:
    with pytest.warns(dl.PolicyWarning):  # eval_fraction 1 is outside the advised range
        return Policy.from_toml(TINY, source="tiny")


@pytest.mark.parametrize("rounds", [2, 100, MAX_ROUNDS])
def test_plan_refuses_rounds_whose_budget_no_policy_could_hold(tiny: Policy, rounds: int) -> None:
    with pytest.raises(InvalidInput, match=r"would not load.*smallest normal double"):
        dl.plan(tiny, {"a": 1}, rounds_per_epoch=rounds)
    with pytest.raises(InvalidInput, match="would not load"):
        dl.required_budget(tiny, {"a": 1}, rounds_per_epoch=rounds)


def test_plan_of_the_policys_own_rounds_still_plans(tiny: Policy) -> None:
    plan = dl.plan(tiny, {"a": 1}, rounds_per_epoch=1)
    assert plan.rounds_per_epoch == 1


@pytest.mark.parametrize("rounds", [MAX_ROUNDS + 1, 10**20, 0, True, "x", 2.0])
def test_plan_refuses_rounds_beyond_a_policys_limit(rounds: object) -> None:
    pol = Policy.load(Path("policies/spatial-eval.toml"))
    with pytest.raises(InvalidInput, match="rounds_per_epoch must be an integer"):
        dl.plan(pol, {"eu-west": 2400}, rounds_per_epoch=rounds)  # type: ignore[arg-type]


def test_plan_cli_refuses_such_rounds_with_exit_2(
    tiny: Policy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    assert main(["plan", str(path), "--cohort", "a=1", "--rounds", "2"]) == 2  # CLI prints warnings
    err = capsys.readouterr().err
    assert "would not load" in err
    assert "Traceback" not in err
    assert main(["plan", "policies/spatial-eval.toml", "--cohort", "eu-west=2400",
                 "--rounds", "99999999999999999999"]) == 2  # fmt: skip
    assert "rounds_per_epoch must be an integer from 1 to 100_000" in capsys.readouterr().err


def test_plan_of_more_rounds_that_load_still_plans() -> None:
    pol = Policy.load(Path("policies/spatial-eval.toml"))
    plan = dl.plan(pol, {"eu-west": 2400}, rounds_per_epoch=MAX_ROUNDS)
    assert plan.rounds_per_epoch == MAX_ROUNDS
    assert not any(m.publishable for r in plan.regions for m in r.metrics)  # floors unmet


def test_budget_for_scale_refuses_a_budget_below_the_doubles() -> None:
    with pytest.raises(InvalidInput, match="below the smallest normal double"):
        dl.budget_for_scale(1e-308, 1e308)
    assert dl.budget_for_scale(1.0, 5.0).amount > 0


def test_cohort_floor_refuses_a_floor_no_release_accepts() -> None:
    with pytest.raises(InvalidInput, match="above the largest cohort"):
        dl.cohort_floor(1.0, 0.2, 1e-10, magnitude=1.0)
    assert dl.cohort_floor(1.0, 0.2, 0.01) <= MAX_COHORT


def test_plan_still_names_a_floor_beyond_the_largest_cohort() -> None:
    """The planner's "needs n ≥ …" reads the unbounded floor, not the public refusal."""
    pol = Policy.load(Path("policies/spatial-eval.toml"))
    plan = dl.plan(pol, {"eu-west": 1}, rounds_per_epoch=MAX_ROUNDS)
    reasons = [m.reason for r in plan.regions for m in r.metrics]
    assert all("needs ≥" in r for r in reasons), reasons


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda p: dl.plan(p, {"eu-west": 2400}, ledger="x"), "ledger must be an open"),
        (lambda p: dl.plan(p, {"eu-west": 2400}, ledger=5), "ledger must be an open"),
        (lambda p: dl.required_budget(p, {"eu-west": 2400}, targets=[1]), "targets must map"),
        (lambda p: dl.required_budget(p, {"eu-west": 2400}, targets={1: 0.1, "x": 2}), "unknown"),
        (lambda p: p.overcommitment("x"), "rounds_per_epoch must be"),
        (lambda p: p.overcommitment(np.array([])), "rounds_per_epoch must be"),
        (lambda p: p.release_budget("coverage", 0), "rounds_per_epoch must be"),
        (lambda p: compare_units(p, np.array([])), "silos must map"),
        (lambda p: dl.Budget(Fraction(1, 2), np.array([])), "unit must be"),
    ],
)
def test_planning_arguments_of_the_wrong_type_are_typed(call: object, match: str) -> None:
    pol = Policy.load(Path("policies/spatial-eval.toml"))
    with pytest.raises(InvalidInput, match=match):
        call(pol)  # type: ignore[operator]


def test_required_budget_sizes_rounds_whose_targets_are_out_of_reach() -> None:
    """Review s30: required_budget refused rounds at which the policy's budget cannot reach a
    target — the very case it exists to size (fits = False, and how much it would need)."""
    text = Path("policies/spatial-eval.toml").read_text()
    text = text.replace('epoch_epsilon = "4.0"', 'epoch_epsilon = "1e-6"')
    text = text.replace("target = 0.1", "target = 2e-6", 1)
    pol = Policy.from_toml(text, source="tight")
    need = dl.required_budget(pol, {"eu-west": 2400}, rounds_per_epoch=MAX_ROUNDS)
    assert not need.fits
    with pytest.raises(InvalidInput, match="would not load"):  # a plan of them still refuses
        dl.plan(pol, {"eu-west": 2400}, rounds_per_epoch=MAX_ROUNDS)


def test_review_s30_untyped_leftovers_are_typed(tmp_path: Path) -> None:
    pol = Policy.load(Path("policies/spatial-eval.toml"))
    with pytest.raises(InvalidInput, match="is None"):
        dl.required_budget(pol, {"eu-west": 2400}, targets={"clipped_mean_loss": None})
    with dl.Ledger.open(tmp_path / "l.db", pol, mode="create") as ledger:
        with pytest.raises(InvalidInput, match="after must be an integer"):
            ledger.entries(after=None)  # type: ignore[arg-type]
        assert ledger.entries(after=np.int64(0), limit=np.int64(3)) == []


def test_a_plan_says_a_floor_is_beyond_the_largest_cohort() -> None:
    """Review s30: the plan listed floors above 1e9 that dl.cohort_floor refuses."""
    pol = Policy.load(Path("policies/spatial-eval.toml"))
    text = (
        Path("policies/spatial-eval.toml")
        .read_text()
        .replace('epoch_epsilon = "4.0"', 'epoch_epsilon = "1e-6"')
    )
    pol = Policy.from_toml(text, source="small")
    reasons = [m.reason for r in dl.plan(pol, {"eu-west": 2400}).regions for m in r.metrics]
    assert any("above the largest cohort 1_000_000_000" in r for r in reasons), reasons

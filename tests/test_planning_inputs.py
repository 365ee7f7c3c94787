"""The planning API refuses what is not a cohort, a target or a policy with InvalidInput.

``cohort_floor``, ``error_bar``, ``plan`` and ``budget_for_target`` raised TypeError,
AttributeError or OverflowError, or answered garbage (NaN for n = nan, 0.0 for n = inf,
"publishable" for a cohort no release accepts).
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from factories import SPATIAL

import dpledger as dl
from dpledger import Budget, InvalidInput
from dpledger.approval import MAX_COHORT
from dpledger.cli.main import main
from dpledger.planning.inverse import budget_for_target

NOT_TARGETS = [None, "0.2", Decimal("0.2"), [0.2], np.array(0.2), True, 1 + 0j, 10**400,
               float("nan"), float("inf"), 0, -0.1]  # fmt: skip
NOT_COHORTS = [None, "0.2", [1], 1 + 0j, 10**80, float("nan"), float("inf"), 1e-320, 0.2,
               Fraction(1, 3), True, 0, -3, MAX_COHORT + 1, 2400.0]  # fmt: skip


@pytest.mark.parametrize("target", NOT_TARGETS, ids=repr)
def test_cohort_floor_refuses_a_target_that_is_not_a_positive_finite_real(target: object) -> None:
    with pytest.raises(InvalidInput, match="target error bar"):
        dl.cohort_floor(3.4, 0.2, target=target)  # type: ignore[arg-type]


@pytest.mark.parametrize("target", [0.1, Fraction(1, 10), np.float64(0.1), 2, 10**80], ids=repr)
def test_cohort_floor_takes_ints_floats_and_fractions(target: object) -> None:
    assert dl.cohort_floor(3.4, 0.2, target=target) >= 1  # type: ignore[arg-type]


@pytest.mark.parametrize("n", NOT_COHORTS, ids=repr)
def test_error_bar_refuses_a_cohort_that_is_not_an_integer_up_to_1e9(n: object) -> None:
    with pytest.raises(InvalidInput, match="cohort n"):
        dl.error_bar(3.4, 0.2, n)  # type: ignore[arg-type]


@pytest.mark.parametrize("budget", [None, "0.2", True, 1 + 0j, float("nan")], ids=repr)
def test_error_bar_refuses_a_budget_that_is_not_a_real(budget: object) -> None:
    with pytest.raises(InvalidInput, match="budget"):
        dl.error_bar(3.4, budget, 2400)  # type: ignore[arg-type]


def test_error_bar_takes_numpy_integers_and_the_largest_cohort() -> None:
    assert dl.error_bar(3.4, 0.2, np.int64(2400)) == dl.error_bar(3.4, 0.2, 2400)
    assert dl.error_bar(3.4, 0.2, MAX_COHORT) > 0


@pytest.mark.parametrize("policy", [str(SPATIAL), SPATIAL, None, 5], ids=repr)
def test_plan_of_something_that_is_not_a_policy_says_how_to_load_one(policy: object) -> None:
    with pytest.raises(InvalidInput, match=r"Policy\.load"):
        dl.plan(policy, cohorts={"eu-west": 10})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "cohorts",
    [[1], {"eu-west": 10**400}, {"eu-west": MAX_COHORT + 1}, {"eu-west": 10.0}],
    ids=repr,
)
def test_plan_refuses_cohorts_no_release_would_accept(cohorts: object) -> None:
    with pytest.raises(InvalidInput, match="cohort"):
        dl.plan(dl.Policy.load(SPATIAL), cohorts=cohorts)  # type: ignore[arg-type]


def test_plan_at_the_largest_cohort_matches_what_a_release_accepts() -> None:
    p = dl.plan(dl.Policy.load(SPATIAL), cohorts={"eu-west": MAX_COHORT})
    assert all(row.publishable for row in p.rows)
    dl.ReleaseRequest(epoch=0, metric="coverage", region="eu-west", cohort=MAX_COHORT)


@pytest.mark.parametrize("target", ["0.1", True, float("nan")], ids=repr)
def test_budget_for_target_refuses_what_is_not_a_target(target: object) -> None:
    with pytest.raises(InvalidInput, match="target error bar"):
        budget_for_target(dl.Policy.load(SPATIAL), "coverage", target, 100)  # type: ignore[arg-type]


@pytest.mark.parametrize("count", ["1000000001", "١٠", "1_000", "10" * 20])
def test_cli_plan_refuses_a_cohort_no_release_accepts(
    count: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["plan", str(SPATIAL), "--cohort", f"eu-west={count}"])
    err = capsys.readouterr().err
    assert code == 2
    assert "1_000_000_000" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("n", [0, -1, True, 2.5, "2400", MAX_COHORT + 1, 10**400])
def test_comparisons_take_the_cohorts_a_release_takes(n: object) -> None:
    """compare_definitions (region cohorts) and compare_units (silo record counts) refuse
    what a ReleaseRequest refuses, with InvalidInput."""
    from dpledger.planning import compare_definitions
    from dpledger.planning.units import compare_units

    spatial = dl.Policy.load(SPATIAL)
    with pytest.raises(InvalidInput):
        compare_definitions(spatial, {"eu-west": n})  # type: ignore[dict-item]
    silo = dl.Policy.load(SPATIAL.parent / "cross-silo.toml")
    with pytest.raises(InvalidInput):
        compare_units(silo, {"hospital-01": n})  # type: ignore[dict-item]


def test_comparisons_refuse_what_is_not_a_policy() -> None:
    from dpledger.planning import compare_definitions
    from dpledger.planning.units import compare_units

    with pytest.raises(InvalidInput, match="Policy"):
        compare_definitions("policies/spatial-eval.toml", {"eu-west": 10})  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="Policy"):
        compare_units(None, {"a": 10})  # type: ignore[arg-type]


@pytest.mark.parametrize("budget", [0.2, Fraction(1, 5), Budget(Fraction(1, 5), "epsilon")])
def test_a_gaussian_at_an_epsilon_budget_is_refused(budget: object) -> None:
    """σ = Δ/ε is the Gaussian of ρ = ε²/2, not an ε-DP release: its bar (0.0139) came out
    below Laplace's (0.0212) "at the same ε", and its floor below Laplace's."""
    with pytest.raises(InvalidInput, match="accounted in rho"):
        dl.error_bar(3.4, budget, 2400, mechanism="gaussian")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="accounted in rho"):
        dl.cohort_floor(3.4, budget, 0.1, mechanism="gaussian")  # type: ignore[arg-type]
    rho = Budget(Fraction(1, 50), "rho")  # ρ = ε²/2 at ε = 0.2: the same σ, named rightly
    assert dl.error_bar(3.4, rho, 2400, mechanism="gaussian") == dl.error_bar(
        3.4, 0.02, 2400, measure="rho", mechanism="gaussian"
    )

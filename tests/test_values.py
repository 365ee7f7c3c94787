"""The small value types and helpers everything else leans on: Budget and the monotone search."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction
from pathlib import Path

import pytest
from factories import policy as make_policy
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger import InvalidInput, Ledger, ReleaseRequest
from dpledger import mechanisms as mech
from dpledger._search import least_float, least_integer
from dpledger.types import Budget

EPS = "epsilon"

# -- Budget ----------------------------------------------------------------------------------


def test_a_budget_is_exact_carries_its_unit_and_prints_both() -> None:
    b = Budget(Fraction(1, 10), EPS)
    assert (b.amount, b.unit, b.text, b.symbol, str(b)) == (
        Fraction(1, 10),
        EPS,
        "1/10",
        "ε",
        "ε 1/10",
    )
    assert b.as_dict() == {"unit": EPS, "amount": "1/10", "value": 0.1}
    assert Budget(Fraction(1, 200), "rho").symbol == "ρ"


def test_budgets_add_scale_sum_and_subtract_to_no_less_than_zero() -> None:
    tenth = Budget(Fraction(1, 10), EPS)
    assert tenth + tenth == 2 * tenth == tenth * 2 == Budget(Fraction(1, 5), EPS)
    assert sum([tenth] * 10) == Budget(Fraction(1), EPS)
    assert tenth - 2 * tenth == Budget.zero(EPS)
    assert tenth < 2 * tenth
    assert tenth <= tenth


@pytest.mark.parametrize(
    "bad",
    [
        lambda: Budget(Fraction(-1), EPS),
        lambda: Budget(0.1, EPS),  # type: ignore[arg-type]  # a float is not exact
        lambda: Budget(True, EPS),  # type: ignore[arg-type]
        lambda: Budget(Fraction(1), "delta"),  # type: ignore[arg-type]
        lambda: Budget(Fraction(1), EPS) + Budget(Fraction(1), "rho"),
        lambda: Budget(Fraction(1), EPS) < Fraction(2),
        lambda: Budget(Fraction(1), EPS) * 0.5,
        lambda: 1 + Budget(Fraction(1), EPS),
    ],
)
def test_a_budget_refuses_what_would_lose_exactness_or_mix_units(bad: object) -> None:
    with pytest.raises(InvalidInput):
        bad()  # type: ignore[operator]


def test_the_old_release_epsilon_warns_and_still_answers(tmp_path: Path) -> None:
    policy = make_policy()
    with Ledger.open(tmp_path / "l.db", policy, mode="create") as ledger:
        r = ledger.release(ReleaseRequest(epoch=0, metric="loss", region="north", cohort=100), 5.0)
    with pytest.warns(DeprecationWarning, match="Release.charge"):
        assert r.epsilon == r.charge.amount
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert r.unit == r.charge.unit == EPS  # the new names do not warn


# -- the monotone search -----------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    lo=st.integers(-50, 50),
    width=st.integers(0, 200),
    threshold=st.integers(-60, 300),
    guess=st.one_of(st.none(), st.integers(-100, 400)),
)
def test_least_integer_finds_the_first_passing_point_from_any_guess(
    lo: int, width: int, threshold: int, guess: int | None
) -> None:
    hi = lo + width
    calls: list[int] = []

    def passes(i: int) -> bool:
        calls.append(i)
        return i >= threshold

    found = least_integer(passes, lo, hi, guess)
    brute = next((i for i in range(lo, hi + 1) if i >= threshold), None)
    assert found == brute
    assert all(lo <= i <= hi for i in calls)  # never outside the range
    assert len(calls) <= 4 * math.log2(width + 2) + 4  # logarithmic, not linear


def test_least_integer_is_cheap_from_a_close_guess() -> None:
    calls: list[int] = []
    assert least_integer(lambda i: calls.append(i) or i >= 10**12, 0, 2**62, 10**12 + 1) == 10**12
    assert len(calls) <= 4


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-300, 1e300), st.integers(0, 64))
def test_least_float_is_exact_on_the_grid_of_doubles(start: float, ulps: int) -> None:
    threshold = start
    for _ in range(ulps):
        threshold = math.nextafter(threshold, math.inf)
    found = least_float(lambda x: x >= threshold, start, math.inf, start)
    assert found == threshold


def test_calibration_is_the_least_double_from_the_closed_form_whose_map_fits() -> None:
    for budget, measure, kind in [
        (Fraction(1, 10), "epsilon", "laplace"),
        (Fraction(1, 3), "epsilon", "laplace"),
        (Fraction(1, 200), "rho", "gaussian"),
    ]:
        facts = mech.calibrate(
            sensitivity=3.4, budget=budget, measure=measure, mechanism=kind, dimension=5
        )
        assert mech.privacy_loss(facts) <= budget
        below = math.nextafter(facts.scale, 0.0)
        if below >= mech.noise_scale(3.4, budget, measure):
            smaller = mech.MechanismFacts(kind, measure, 3.4, below, 5, k=facts.k)
            assert mech.privacy_loss(smaller) > budget  # one ulp less noise would overspend

"""Sensitivities, OpenDP calibration (exact fit of the map), error bars and floors."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import opendp.prelude as dp
import pytest
from factories import policy

from dpledger import InvalidInput
from dpledger import mechanisms as mech
from dpledger.mechanisms import mechanism_facts


@pytest.mark.parametrize(
    ("metric", "relation", "expected"),
    [
        ("loss", "replace", Fraction(2)),  # clip [0, 2]: high - low
        ("loss", "add_remove", Fraction(2)),  # max(|0|, |2|)
        ("loss_b", "replace", Fraction(4)),  # clip [-1, 3]
        ("loss_b", "add_remove", Fraction(3)),
        ("hist5", "replace", Fraction(8)),  # L1 cap 4: 2·cap
        ("hist5", "add_remove", Fraction(4)),
    ],
)
def test_sensitivity_follows_clip_cap_and_neighbouring(
    metric: str, relation: str, expected: Fraction
) -> None:
    p = policy()
    assert mech.sensitivity(p.metric(metric), relation) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("budget", [Fraction(1, 10), Fraction(1, 3), Fraction(7, 10), Fraction(2)])
@pytest.mark.parametrize("dimension", [0, 7])
def test_calibrated_map_never_exceeds_the_budget_and_scale_is_the_closed_form(
    budget: Fraction, dimension: int
) -> None:
    facts = mech.calibrate(
        sensitivity=3.4, budget=budget, measure="epsilon", mechanism="laplace", dimension=dimension
    )
    assert mech.privacy_loss(facts) <= budget
    # noise on OpenDP's 2^-40 grid costs a relative ~1e-12 of extra scale, no more
    assert facts.scale == pytest.approx(3.4 / float(budget), rel=1e-10)
    assert facts.scale >= 3.4 / float(budget)


def test_histogram_of_20_buckets_gets_the_same_noise_and_charge_as_5() -> None:
    p = policy()
    f5, c5 = mechanism_facts(p, "hist5")
    f20, c20 = mechanism_facts(p, "hist20")
    assert (f5.dimension, f20.dimension) == (5, 20)
    assert c5 == c20
    # same ε, same noise: only OpenDP's 2^-40 rounding allowance grows with the size
    assert f5.scale == pytest.approx(f20.scale, rel=1e-10)
    assert mech.privacy_loss(f20) <= c20


def test_recorded_facts_rebuild_the_same_opendp_measurement() -> None:
    facts, charge = mechanism_facts(policy(), "hist5")
    again = mech.MechanismFacts.from_dict(facts.as_dict())
    assert again == facts
    atom = dp.atom_domain(T=float, nan=False)
    space = (dp.vector_domain(atom, size=5), dp.l1_distance(T=float))
    direct = dp.m.make_laplace(*space, scale=facts.scale, k=facts.k)
    assert Fraction(direct.map(facts.sensitivity)) == mech.privacy_loss(again) <= charge


def test_gaussian_charges_rho_from_opendp_map() -> None:
    facts = mech.calibrate(
        sensitivity=1.0, budget=Fraction(1, 200), measure="rho", mechanism="gaussian", dimension=3
    )
    assert facts.scale == pytest.approx(10.0, rel=1e-10)  # σ = Δ/√(2ρ)
    assert mech.privacy_loss(facts) <= Fraction(1, 200)
    assert float(mech.privacy_loss(facts)) == pytest.approx(1 / 200, rel=1e-12)


def test_laplace_under_zcdp_is_converted_to_rho() -> None:
    facts = mech.calibrate(
        sensitivity=1.0, budget=Fraction(1, 2), measure="rho", mechanism="laplace", dimension=0
    )
    # ρ = ε²/2 for pure ε = Δ/b
    assert float(mech.privacy_loss(facts)) == pytest.approx((1.0 / facts.scale) ** 2 / 2)


def test_l2_sensitivity_uses_sqrt2_only_for_nonnegative_vectors() -> None:
    p = policy()
    assert mech.l2_sensitivity(p.metric("hist5"), "replace") >= math.sqrt(2) * 4
    assert mech.l2_sensitivity(p.metric("hist5"), "replace") == pytest.approx(math.sqrt(2) * 4)
    assert mech.l2_sensitivity(p.metric("gap"), "replace") == 4.0  # signed: 2·cap
    assert mech.l2_sensitivity(p.metric("hist5"), "add_remove") == 4.0


def test_error_bars_are_the_laplace_quantiles_over_n() -> None:
    b = 2.0 / 0.5
    assert mech.error_bar(2.0, 0.5, 100, "scale") == pytest.approx(b / 100)
    assert mech.error_bar(2.0, 0.5, 100, "std") == pytest.approx(math.sqrt(2) * b / 100)
    assert mech.error_bar(2.0, 0.5, 100, "ci95") == pytest.approx(math.log(20) * b / 100)


@pytest.mark.parametrize("bar", ["ci95", "std", "scale"])
def test_cohort_floor_is_the_smallest_n_meeting_the_target(bar: str) -> None:
    n = mech.cohort_floor(3.4, 0.2, 0.1, bar)  # type: ignore[arg-type]
    assert mech.error_bar(3.4, 0.2, n, bar) <= 0.1  # type: ignore[arg-type]
    assert mech.error_bar(3.4, 0.2, n - 1, bar) > 0.1  # type: ignore[arg-type]


def test_float_up_never_rounds_down() -> None:
    for q in (Fraction(1, 3), Fraction(2, 7), Fraction(10**20 + 1, 3)):
        assert Fraction(mech.float_up(q)) >= q


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mechanism": "gaussian", "measure": "epsilon"},
        {"mechanism": "cauchy", "measure": "epsilon"},
        {"mechanism": "laplace", "measure": "epsilon", "scale": -1.0},
        {"mechanism": "laplace", "measure": "epsilon", "scale": math.nan},
    ],
)
def test_malformed_facts_are_refused(kwargs: dict[str, object]) -> None:
    base: dict[str, object] = {"sensitivity": 1.0, "scale": 1.0, "dimension": 0}
    with pytest.raises(InvalidInput):
        mech.MechanismFacts(**{**base, **kwargs})  # type: ignore[arg-type]


def test_bad_error_bar_inputs_are_refused() -> None:
    with pytest.raises(InvalidInput):
        mech.error_bar(1.0, 0.0, 10)
    with pytest.raises(InvalidInput):
        mech.error_bar(1.0, 1.0, 0)
    with pytest.raises(InvalidInput):
        mech.cohort_floor(1.0, 1.0, 0.0)


def test_sensitivity_covers_the_doubles_clients_clip_to_and_their_rounding() -> None:
    from dpledger import Policy
    from dpledger.policy import to_fraction

    text = BASE_SCALAR.format(low="0.1", high="0.4")
    spec = Policy.from_toml(text).metric("x")
    exact = to_fraction("0.4") - to_fraction("0.1")
    doubles = Fraction(0.4) - Fraction(0.1)  # what clients clipping to floats can span
    assert mech.sensitivity(spec, "replace") == max(exact, doubles) > exact
    released = mech.release_sensitivity(spec, "replace", "laplace")
    assert Fraction(released) >= max(exact, doubles) * (1 + mech.CLIENT_ROUNDING_SLACK)


def test_signed_vectors_get_the_triangle_bound_under_gaussian_replace() -> None:
    p = policy()
    # (0, 0, 1, 0) and (0, 0, -1, 0) are 2·cap apart in L2 when signs may differ
    assert mech.l2_sensitivity(p.metric("gap"), "replace") == 2 * 2


BASE_SCALAR = """
name = "s"
version = "1"
neighbouring = "replace"
epoch_epsilon = "4"
[regions]
names = ["a"]
[metrics.x]
kind = "scalar_mean"
epsilon = "0.1"
clip = {{ low = "{low}", high = "{high}", source = "test" }}
"""


@pytest.mark.parametrize(
    ("dimension", "delta"), [(10, 1e-12), (1000, 1e-10), (100_000, 1e-8), (0, 2.0**-40), (7, 5e-13)]
)
@pytest.mark.parametrize(
    ("measure", "kind", "budget"),
    [("epsilon", "laplace", Fraction(1, 5)), ("rho", "gaussian", Fraction(1, 100))],
)
def test_a_sensitivity_near_the_noise_grid_calibrates_to_the_least_fitting_scale(
    dimension: int, delta: float, measure: str, kind: str, budget: Fraction
) -> None:
    """OpenDP charges each coordinate's rounding to the 2**k grid on top of Δ, so the
    least fitting scale can lie far above the closed form: the search finds it (it raised
    InternalError, exit 3 from `plan`, for policies the range rules accept)."""
    facts = mech.calibrate(
        sensitivity=delta, budget=budget, measure=measure,  # type: ignore[arg-type]
        mechanism=kind, dimension=dimension,  # type: ignore[arg-type]
    )  # fmt: skip
    assert mech.privacy_loss(facts) <= budget
    below = dataclasses.replace(facts, scale=math.nextafter(facts.scale, 0.0))
    assert mech.privacy_loss(below) > budget  # the least such double

"""Closed-form error bars and cohort floors of a sensitivity and a budget (ε or ρ).

What a planner asks before any release: the noise scale Δ/ε (or Δ/√(2ρ)), the error bar
it gives a mean over n, the least n that meets a target. Re-exported by
:mod:`dpledger.mechanisms`, whose calibration starts from :func:`noise_scale`.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpledger._bars import (
    GRID_SLACK,
    ROUNDING,
    bar_factor,
    cohort_floor_for_scale,
    error_bar_for_scale,
)
from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.types import (
    MAX_COHORT,
    BarKind,
    Budget,
    MechanismKind,
    Unit,
    cohort_size,
    mechanism_kind,
    nonnegative_real,
    positive_real,
    unit_of,
)

__all__ = ["cohort_floor", "error_bar", "least_cohort", "noise_scale"]


def noise_scale(sensitivity: float | Fraction, budget: float | Fraction, measure: Unit) -> float:
    """Closed-form noise scale: Laplace ``b = Δ/ε``; under zCDP ``σ = Δ/√(2ρ)`` (both kinds).

    Where calibration starts; :func:`error_bar` and :func:`cohort_floor` read the
    calibrated scale (a few ulps above this, or more for a Δ near OpenDP's grid)."""
    try:
        d, b = float(sensitivity), float(budget)
    except (TypeError, ValueError, OverflowError) as e:
        raise InvalidInput(f"sensitivity and budget must be numbers: {e}") from None
    if not (math.isfinite(d) and d > 0 and math.isfinite(b) and b > 0):
        raise InvalidInput(
            f"sensitivity and budget must be finite and > 0, got {shown(d)}, {shown(b)}"
        )
    with np.errstate(over="ignore"):
        scale = d / b if measure == "epsilon" else d / math.sqrt(2.0 * b)
    if not (math.isfinite(scale) and scale > 0):
        raise InvalidInput(f"the noise scale Δ/budget = {d!r}/{b!r} is not a finite number")
    return scale


def _amount(
    budget: float | Fraction | Budget, measure: Unit | None, mechanism: MechanismKind
) -> tuple[float | Fraction, Unit]:
    """A budget argument as ``(amount, unit)``: a :class:`Budget` brings its own unit.

    A Gaussian at an ε budget is refused: σ = Δ/ε is the Gaussian of ρ = ε²/2, which is
    not ε-DP at all, so its bar would look smaller than Laplace's "at the same ε".
    """
    amount: float | Fraction
    mechanism_kind(mechanism)
    if measure is not None:  # None: ε, or the Budget's own unit
        unit_of(measure, "measure")
    if isinstance(budget, Budget):
        if measure is not None and measure != budget.unit:
            raise InvalidInput(f"measure={measure!r} contradicts the budget's unit {budget.unit}")
        amount, unit = budget.amount, budget.unit
    else:
        amount = budget if isinstance(budget, Fraction) else positive_real(budget, "budget")
        unit = measure or "epsilon"
    if mechanism == "gaussian" and unit != "rho":
        raise InvalidInput(
            "a Gaussian release is accounted in rho (zCDP), not epsilon: pass measure='rho' "
            "(or a Budget in ρ), or mechanism='laplace' for an ε budget"
        )
    return amount, unit


def error_bar(
    sensitivity: float | Fraction,
    budget: float | Fraction | Budget,
    n: int,
    bar: BarKind = "ci95",
    *,
    measure: Unit | None = None,
    mechanism: MechanismKind = "laplace",
    magnitude: float = 0.0,
) -> float:
    """Error bar of a mean over ``n`` clients: ``factor·Δ/(ε·n)`` (or σ/n under zCDP) at
    the scale a scalar release is calibrated to (OpenDP's map also charges the input's
    rounding onto its grid: near the grid the scale exceeds Δ/ε), plus OpenDP's grid
    (:data:`GRID_SLACK`, on the sum) and, for values up to ``magnitude``, the doubles'
    rounding (:data:`ROUNDING`), as a release's bar.

    Under a record-level policy ``n`` counts records and ``Δ`` is the per-record bound ×
    ``max_records_per_person`` (:func:`~dpledger.mechanisms.policy_sensitivity` gives it).

    ``budget`` is ε (or ρ with ``measure="rho"``), or a :class:`Budget` with its unit.
    ``n`` is an integer in 1..1e9 (what a release accepts); anything else, like a
    non-real sensitivity or budget, is :class:`InvalidInput`.
    """
    n = cohort_size(n, "cohort n")
    scale, rounding = _scale_and_rounding(sensitivity, budget, measure, mechanism, magnitude)
    out = error_bar_for_scale(scale, n, bar, mechanism, GRID_SLACK, rounding)
    if not math.isfinite(out):  # not a number anyone can use; a policy's bar never is
        raise InvalidInput(
            f"the {bar} error bar of sensitivity {float(sensitivity):.3g} at this budget and "
            f"n={n} is beyond the range of a double: use a larger budget or cohort, or a "
            "smaller sensitivity (other units)"
        )
    return out


def cohort_floor(
    sensitivity: float | Fraction,
    budget: float | Fraction | Budget,
    target: float,
    bar: BarKind = "ci95",
    *,
    measure: Unit | None = None,
    mechanism: MechanismKind = "laplace",
    magnitude: float = 0.0,
) -> int:
    """The smallest cohort ``n`` whose :func:`error_bar` is ≤ ``target`` (n − 1's is not).

    ``n`` counts clients, or records under a record-level policy (with its Δ).
    ``target`` is a finite real > 0 (int, float or Fraction); anything else, like a
    non-real sensitivity or budget, is :class:`InvalidInput`, as is a target that needs
    more than :data:`~dpledger.types.MAX_COHORT` clients (no release accepts that cohort).
    """
    floor = least_cohort(
        sensitivity, budget, target, bar, measure=measure, mechanism=mechanism, magnitude=magnitude
    )
    if floor > MAX_COHORT:  # audit s29, F12: a floor no release accepts is not a plan
        raise InvalidInput(
            f"no cohort a release accepts reaches the target error bar {shown(target)}: it "
            f"needs n ≥ {floor:_}, above the largest cohort {MAX_COHORT:_}; raise the "
            "target or the budget, or lower the sensitivity (other units)"
        )
    return floor


def least_cohort(
    sensitivity: float | Fraction,
    budget: float | Fraction | Budget,
    target: float,
    bar: BarKind = "ci95",
    *,
    measure: Unit | None = None,
    mechanism: MechanismKind = "laplace",
    magnitude: float = 0.0,
) -> int:
    """:func:`cohort_floor` without its upper limit (up to 2**62): what a planner reports
    as "needs n ≥ …" when even the whole budget cannot reach a target."""
    goal = positive_real(target, "target error bar")
    bar_factor(bar, mechanism)  # a bar checked before the cache below hashes it (review 39)
    scale, rounding = _scale_and_rounding(sensitivity, budget, measure, mechanism, magnitude)
    return cohort_floor_for_scale(scale, goal, bar, mechanism, GRID_SLACK, rounding)


def _scale_and_rounding(
    sensitivity: float | Fraction,
    budget: float | Fraction | Budget,
    measure: Unit | None,
    mechanism: MechanismKind,
    magnitude: float,
) -> tuple[float, float]:
    """The closed-form noise scale of a budget, and the rounding term of values up to
    ``magnitude``: what :func:`error_bar` and :func:`cohort_floor` both start from."""
    amount, unit = _amount(budget, measure, mechanism)
    delta = positive_real(sensitivity, "sensitivity")
    noise_scale(delta, amount, unit)  # the closed form: its checks and messages
    # the scale a release of this Δ and budget is calibrated to (a scalar's): OpenDP
    # charges the input's rounding onto its 2**k grid on top of Δ, so near the grid Δ/ε
    # is too little noise (Δ = 1e-9 at ε = 1: cohort_floor said 2,998, the ledger's floor
    # was 3,001; at 1e-12, 49 against 76: review h39, as stats6 F-PLAN for the inverse)
    from dpledger.mechanisms import calibrate  # mechanisms imports this module

    facts = calibrate(
        sensitivity=float(delta), budget=Fraction(amount), measure=unit,
        mechanism=mechanism, dimension=0,
    )  # fmt: skip
    return facts.scale, nonnegative_real(magnitude, "magnitude") * ROUNDING

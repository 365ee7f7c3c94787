"""The closed-form noise scale of a sensitivity and a budget (ε or ρ), and a budget
argument read as an amount and its unit.

Where calibration starts (:func:`dpledger.mechanisms.calibrate`) and what the planner's
bars and floors (:func:`dpledger.mechanisms.error_bar`, :func:`~dpledger.mechanisms.
cohort_floor`) check their arguments with: Δ/ε (or Δ/√(2ρ)). Re-exported by
:mod:`dpledger.mechanisms`.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

import numpy as np

from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.types import (
    MAX_DIMENSION,
    Budget,
    MechanismKind,
    Unit,
    mechanism_kind,
    positive_real,
    unit_of,
)

__all__ = ["budget_amount", "noise_scale", "release_dimension"]


def noise_scale(sensitivity: float | Fraction, budget: float | Fraction, measure: Unit) -> float:
    """Closed-form noise scale: Laplace ``b = Δ/ε``; under zCDP ``σ = Δ/√(2ρ)`` (both kinds).

    Where calibration starts; :func:`~dpledger.mechanisms.error_bar` and
    :func:`~dpledger.mechanisms.cohort_floor` read the calibrated scale (a few ulps above
    this, or more for a Δ near OpenDP's grid)."""
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


def budget_amount(
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


def release_dimension(value: object) -> int:
    """A planner's ``dimension``: 0 for a scalar release, else a vector's or histogram's
    number of values (1..:data:`~dpledger.types.MAX_DIMENSION`, as a policy's)."""
    d = int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else -1
    if not 0 <= d <= MAX_DIMENSION:
        raise InvalidInput(
            f"dimension must be 0 (a scalar release) or a vector's number of values, 1 to "
            f"{MAX_DIMENSION:_}; got {shown(value)}"
        )
    return d

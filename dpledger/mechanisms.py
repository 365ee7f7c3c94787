"""OpenDP measurements for releases: sensitivity, calibration, noise, error bars.

Every release is one OpenDP ``Measurement`` rebuilt from plain, recorded facts
(:class:`MechanismFacts`); the ledger charges a budget that is never below the
measurement's privacy map at the recorded sensitivity. Noise comes from OpenDP only.
The sensitivities are computed in :mod:`dpledger._sensitivity`, the closed-form scale
in :mod:`dpledger._closed_form`; both are exported from here, with the planner's bars
and floors of a sensitivity and budget (:func:`error_bar`, :func:`cohort_floor`) at the
scale a release is calibrated to.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from importlib.metadata import version
from typing import Any

import numpy as np
import numpy.typing as npt

from dpledger import _opendp as dp
from dpledger._bars import (
    BAR_KINDS,
    GRANULARITY_K,
    GRID_SLACK,
    ROUNDING,
    bar_factor,
    cohort_floor_for_scale,
    error_bar_for_scale,
)
from dpledger._closed_form import budget_amount, noise_scale, release_dimension
from dpledger._invoke import invoke
from dpledger._search import least_float
from dpledger._sensitivity import (
    CLIENT_ROUNDING_SLACK,
    check_records,
    float_up,
    l1_sensitivity,
    l2_sensitivity,
    policy_sensitivity,
    release_sensitivity,
    scalar_sensitivity,
    sensitivity,
)
from dpledger._shown import shown
from dpledger.errors import InternalError, InvalidInput
from dpledger.policy import Policy
from dpledger.types import (
    MAX_COHORT,
    BarKind,
    Budget,
    MechanismKind,
    PrivacyUnit,
    Unit,
    cohort_size,
    mechanism_kind,
    nonnegative_real,
    positive_real,
    unit_of,
)

__all__ = [
    "BAR_KINDS",
    "CLIENT_ROUNDING_SLACK",
    "GRANULARITY_K",
    "GRID_SLACK",
    "OPENDP_VERSION",
    "ROUNDING",
    "MechanismFacts",
    "apply",
    "apply_many",
    "bar_factor",
    "build",
    "calibrate",
    "cohort_floor",
    "cohort_floor_for_scale",
    "cohort_floor_of",
    "error_bar",
    "error_bar_for_scale",
    "error_bar_of",
    "facts_at_budget",
    "float_up",
    "l1_sensitivity",
    "l2_sensitivity",
    "least_cohort",
    "mechanism_facts",
    "noise_scale",
    "policy_sensitivity",
    "privacy_loss",
    "release_sensitivity",
    "scalar_sensitivity",
    "sensitivity",
]


OPENDP_VERSION = version("opendp")


_MAX_I32 = 2**31 - 1


@dataclass(frozen=True, slots=True)
class MechanismFacts:
    """Plain facts that rebuild one release's OpenDP measurement (a stable record type).

    Stability contract: these fields are persisted in ledger entries; a field is never
    removed or re-interpreted, only added with a default.
    """

    mechanism: MechanismKind
    measure: Unit
    sensitivity: float
    scale: float
    dimension: int  # 0 for a scalar release
    opendp_version: str = OPENDP_VERSION
    k: int | None = None  # OpenDP's discretisation exponent; None = its default
    privacy_unit: PrivacyUnit = "client"  # whom the sensitivity is of (added later)
    records: int = 1  # elements one privacy unit holds: max_records_per_person, or 1

    @property
    def grid_slack(self) -> float:
        """The most OpenDP's output grid 2^k adds to a coordinate's error, in the sum's
        units: the sum is rounded onto the grid (≤ one step) and the discrete noise's
        quantile lies at most one step beyond the continuous one's; 2 steps in all.
        Negligible unless the noise scale nears the grid (Δ/ε ≲ 1e-9 at k = -40);
        0 for k None (OpenDP's default, the finest grid)."""
        return 0.0 if self.k is None else math.ldexp(2.0, self.k)

    def __post_init__(self) -> None:
        mechanism_kind(self.mechanism)
        unit_of(self.measure, "measure")
        if self.mechanism == "gaussian" and self.measure != "rho":
            raise InvalidInput("a Gaussian release is accounted in rho (zCDP)")
        for name in ("sensitivity", "scale"):
            v = getattr(self, name)
            if not (isinstance(v, float) and math.isfinite(v) and v > 0):
                raise InvalidInput(f"{name} must be a finite float > 0, got {shown(v)}")
        d = self.dimension  # OpenDP reads it as an i32, and a bool as no integer
        if isinstance(d, bool) or not (isinstance(d, int) and 0 <= d <= _MAX_I32):
            raise InvalidInput(f"dimension must be an int in [0, 2**31 - 1], got {shown(d)}")
        if self.k is not None and (
            isinstance(self.k, bool) or not (isinstance(self.k, int) and -1074 <= self.k <= 0)
        ):
            raise InvalidInput(f"k must be None or an int in [-1074, 0], got {shown(self.k)}")
        if self.privacy_unit not in ("client", "record"):
            raise InvalidInput(f"unknown privacy unit {self.privacy_unit!r}")
        check_records(self.records)
        if self.privacy_unit == "client" and self.records != 1:
            raise InvalidInput("a client-level release counts one element per client")

    def as_json(self) -> str:
        """:meth:`as_dict` as JSON text (what a ledger entry stores), computed once per facts."""
        return _facts_json(self)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (floats round-trip exactly through ``repr``).

        The privacy unit is written only when it is not ``"client"``: a client-level
        release's JSON, hence its ledger entry's chain hash, is what it was before units.
        """
        d: dict[str, Any] = {
            "mechanism": self.mechanism,
            "measure": self.measure,
            "sensitivity": self.sensitivity,
            "scale": self.scale,
            "dimension": self.dimension,
            "opendp_version": self.opendp_version,
            "k": self.k,
        }
        if self.privacy_unit != "client":
            d["privacy_unit"] = self.privacy_unit
            d["records"] = self.records
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MechanismFacts:
        """Rebuild from :meth:`as_dict` output; raise :class:`InvalidInput` if malformed."""
        try:
            return cls(
                mechanism=d["mechanism"],
                measure=d["measure"],
                sensitivity=float(d["sensitivity"]),
                scale=float(d["scale"]),
                dimension=int(d["dimension"]),
                opendp_version=str(d["opendp_version"]),
                k=None if d.get("k") is None else int(d["k"]),
                privacy_unit=d.get("privacy_unit", "client"),
                records=d.get("records", 1),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidInput(f"malformed mechanism facts {d!r}: {e}") from e


@functools.lru_cache(maxsize=4096)
def _facts_json(facts: MechanismFacts) -> str:
    return json.dumps(facts.as_dict())


@functools.lru_cache(maxsize=4096)
def build(facts: MechanismFacts) -> dp.Measurement:
    """The OpenDP measurement these facts describe (cached by facts)."""
    atom = dp.atom_domain(T=float, nan=False)
    if facts.dimension == 0:
        space: tuple[Any, Any] = (atom, dp.absolute_distance(T=float))
    else:
        vector = dp.vector_domain(atom, size=facts.dimension)
        norm = dp.l1_distance if facts.mechanism == "laplace" else dp.l2_distance
        space = (vector, norm(T=float))
    if facts.mechanism == "laplace":
        meas = dp.m.make_laplace(*space, scale=facts.scale, k=facts.k)
        return dp.c.make_pureDP_to_zCDP(meas) if facts.measure == "rho" else meas
    return dp.m.make_gaussian(*space, scale=facts.scale, k=facts.k)


def privacy_loss(facts: MechanismFacts) -> Fraction:
    """OpenDP's privacy map at the recorded sensitivity, as an exact rational (ε or ρ)."""
    loss: float = build(facts).map(facts.sensitivity)
    return Fraction(loss)


@functools.lru_cache(maxsize=4096)
def calibrate(
    *,
    sensitivity: float,
    budget: Fraction,
    measure: Unit,
    mechanism: MechanismKind,
    dimension: int,
    k: int | None = GRANULARITY_K,
) -> MechanismFacts:
    """Facts for the least noise scale whose OpenDP privacy map is ≤ ``budget`` exactly.

    The closed form (Δ/ε, or Δ/√(2ρ)) is where the search starts: OpenDP rounds its map
    up, so the closed form usually overshoots by a few ulps. The result is the least
    double ≥ the closed form whose map, read as an exact rational, fits the budget.
    """

    def facts_at(scale: float) -> MechanismFacts:
        return MechanismFacts(mechanism, measure, sensitivity, scale, dimension, k=k)

    def fits(scale: float) -> bool:
        return privacy_loss(facts_at(scale)) <= budget

    # OpenDP charges the rounding to its 2**k noise grid on top of Δ, so the least scale
    # that fits is never below the closed form at max(Δ, 2**k): start there (a Δ far
    # below the grid would otherwise start at a scale whose map overflows).
    start = noise_scale(sensitivity if k is None else max(sensitivity, 2.0**k), budget, measure)
    loss = privacy_loss(facts_at(start))
    if loss <= budget:
        return facts_at(start)
    power = 1.0 if measure == "epsilon" else 0.5  # ε ∝ 1/scale, ρ ∝ 1/σ²
    guess = start * float(loss / budget) ** power  # the map's overshoot, corrected once
    # an upper end that fits: the map also charges each coordinate's rounding to the grid
    # (~dimension · 2**k), so a Δ near the grid can need far more than 2 × the closed form
    hi = min(max(2 * start, guess), _LARGEST)
    for _ in range(64):
        if hi == _LARGEST or fits(hi):
            break
        hi = min(2 * hi, _LARGEST)
    scale = least_float(fits, start, hi, min(guess, hi))
    if scale is None:  # even the largest double is too little noise for this budget
        raise InvalidInput(
            f"no noise scale within the range of a double calibrates {mechanism} noise at "
            f"sensitivity {sensitivity!r} to a budget of {float(budget):.3g} {measure}: use a "
            "larger budget (fewer rounds per epoch) or a smaller sensitivity (other units)"
        )
    return facts_at(scale)


_LARGEST = sys.float_info.max


def apply(facts: MechanismFacts, aggregate: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Run the measurement on a validated, finite float64 aggregate; noise from OpenDP
    (:func:`apply_many` of one release: OpenDP's own call through :mod:`dpledger._invoke`)."""
    return np.asarray(apply_many(facts, [aggregate])[0], dtype=np.float64)


def apply_many(
    facts: MechanismFacts, aggregates: Sequence[npt.NDArray[np.float64]]
) -> list[tuple[float, ...]]:
    """Noise for several releases that share one mechanism, drawn in one OpenDP call.

    Every coordinate of every release gets independent noise at ``facts.scale`` from
    OpenDP's sampler, exactly as separate calls of :func:`apply` would draw it: the
    joint measurement (one vector of all the coordinates, same scale, same grid) is used
    to sample only; each release is recorded, and charged, under its own ``facts``.
    One call instead of k saves OpenDP's per-call cost. Returns each release's noisy
    values as the tuple of floats its ledger entry records.
    """
    width = max(facts.dimension, 1)
    flat: list[float] = []
    for a in aggregates:
        if a.size != width:
            raise InternalError(f"aggregate of {a.size} values, mechanism has {width}")
        flat.extend(a.reshape(-1).tolist())
    if len(aggregates) == 1:
        noisy = invoke(build(facts), flat, facts.dimension > 0)
    else:
        noisy = invoke(_joint(facts, len(aggregates)), flat, True)
    return [tuple(noisy[i * width : (i + 1) * width]) for i in range(len(aggregates))]


@functools.lru_cache(maxsize=1024)
def _joint(facts: MechanismFacts, count: int) -> dp.Measurement:
    """The measurement of ``count`` releases' coordinates in one vector (sampling only)."""
    return build(dataclasses.replace(facts, dimension=max(facts.dimension, 1) * count))


def error_bar_of(
    facts: MechanismFacts, n: int, bar: BarKind = "ci95", magnitude: float = 0.0
) -> float:
    """The error bar a release of these calibrated facts reports on a mean over ``n``,
    OpenDP's output grid and the doubles' rounding of sums of values up to ``magnitude``
    (:attr:`~dpledger.policy.MetricSpec.magnitude`) included."""
    return error_bar_for_scale(
        facts.scale, n, bar, facts.mechanism, facts.grid_slack, magnitude * ROUNDING
    )


def cohort_floor_of(
    facts: MechanismFacts, target: float, bar: BarKind = "ci95", magnitude: float = 0.0
) -> int:
    """The least cohort whose :func:`error_bar_of` is ≤ ``target``."""
    return cohort_floor_for_scale(
        facts.scale, target, bar, facts.mechanism, facts.grid_slack, magnitude * ROUNDING
    )


@functools.lru_cache(maxsize=1024)
def mechanism_facts(
    policy: Policy, metric: str, rounds: int | None = None
) -> tuple[MechanismFacts, Fraction]:
    """The calibrated mechanism of one release of ``metric`` under ``policy``, and its charge.

    ``rounds`` (default: the policy's ``rounds_per_epoch``, what the ledger charges) lets
    a planner ask what another number of rounds per epoch would cost. Cached by the
    policy's content hash (policies are immutable), the metric and the rounds.
    """
    charge = policy.release_budget(metric, rounds)
    if charge <= 0:
        raise InvalidInput(
            f"metric {metric!r} has no budget: {policy.no_budget_reason(rounds)}; lower the "
            "absolute budgets or the rounds"
        )
    return facts_at_budget(policy, metric, charge), charge


def facts_at_budget(policy: Policy, metric: str, budget: Fraction) -> MechanismFacts:
    """The calibrated mechanism of one release of ``metric`` at ``budget`` (in the policy's
    unit): what :func:`mechanism_facts` charges, and what a planner searching budgets
    (:func:`~dpledger.planning.budget_for_target`) must read, not the closed form Δ/ε."""
    spec = policy.metric(metric)
    kind = policy.mechanism(metric)
    facts = calibrate(
        sensitivity=policy_sensitivity(policy, metric, kind),
        budget=budget,
        measure=policy.unit,
        mechanism=kind,
        dimension=0 if spec.kind == "scalar_mean" else spec.size,
    )
    if policy.privacy_unit != "client":
        facts = dataclasses.replace(
            facts, privacy_unit=policy.privacy_unit, records=policy.records_per_unit
        )
    return facts


# -- a planner's bars and floors of a sensitivity and a budget ---------------------------


def error_bar(
    sensitivity: float | Fraction,
    budget: float | Fraction | Budget,
    n: int,
    bar: BarKind = "ci95",
    *,
    measure: Unit | None = None,
    mechanism: MechanismKind = "laplace",
    magnitude: float = 0.0,
    dimension: int = 0,
) -> float:
    """Error bar of a mean over ``n`` clients: ``factor·Δ/(ε·n)`` (or σ/n under zCDP) at
    the scale a release of ``dimension`` values (0: a scalar) is calibrated to (OpenDP's
    map also charges each coordinate's rounding onto its grid: near the grid the scale
    exceeds Δ/ε, the more the more coordinates), plus OpenDP's grid
    (:data:`GRID_SLACK`, on the sum) and, for values up to ``magnitude``, the doubles'
    rounding (:data:`ROUNDING`), as a release's bar.

    Under a record-level policy ``n`` counts records and ``Δ`` is the per-record bound ×
    ``max_records_per_person`` (:func:`~dpledger.mechanisms.policy_sensitivity` gives it).

    ``budget`` is ε (or ρ with ``measure="rho"``), or a :class:`Budget` with its unit.
    ``n`` is an integer in 1..1e9 (what a release accepts); anything else, like a
    non-real sensitivity or budget, is :class:`InvalidInput`.
    """
    n = cohort_size(n, "cohort n")
    scale, rounding = _scale_and_rounding(
        sensitivity, budget, measure, mechanism, magnitude, dimension
    )
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
    dimension: int = 0,
) -> int:
    """The smallest cohort ``n`` whose :func:`error_bar` is ≤ ``target`` (n − 1's is not).

    ``n`` counts clients, or records under a record-level policy (with its Δ).
    ``target`` is a finite real > 0 (int, float or Fraction); anything else, like a
    non-real sensitivity or budget, is :class:`InvalidInput`, as is a target that needs
    more than :data:`~dpledger.types.MAX_COHORT` clients (no release accepts that cohort).
    """
    floor = least_cohort(
        sensitivity, budget, target, bar, measure=measure, mechanism=mechanism,
        magnitude=magnitude, dimension=dimension,
    )  # fmt: skip
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
    dimension: int = 0,
) -> int:
    """:func:`cohort_floor` without its upper limit (up to 2**62): what a planner reports
    as "needs n ≥ …" when even the whole budget cannot reach a target."""
    goal = positive_real(target, "target error bar")
    bar_factor(bar, mechanism)  # a bar checked before the cache below hashes it (review 39)
    scale, rounding = _scale_and_rounding(
        sensitivity, budget, measure, mechanism, magnitude, dimension
    )
    return cohort_floor_for_scale(scale, goal, bar, mechanism, GRID_SLACK, rounding)


def _scale_and_rounding(
    sensitivity: float | Fraction,
    budget: float | Fraction | Budget,
    measure: Unit | None,
    mechanism: MechanismKind,
    magnitude: float,
    dimension: int,
) -> tuple[float, float]:
    """The noise scale a release of this Δ, budget and dimension is calibrated to, and the
    rounding term of values up to ``magnitude``: what :func:`error_bar` and
    :func:`cohort_floor` both start from (the closed form checks the arguments)."""
    amount, unit = budget_amount(budget, measure, mechanism)
    delta = positive_real(sensitivity, "sensitivity")
    noise_scale(delta, amount, unit)  # the closed form: its checks and messages
    # the scale a release of this Δ and budget is calibrated to (a scalar's): OpenDP
    # charges the input's rounding onto its 2**k grid on top of Δ, so near the grid Δ/ε
    # is too little noise (Δ = 1e-9 at ε = 1: cohort_floor said 2,998, the ledger's floor
    # was 3,001; at 1e-12, 49 against 76: review h39, as stats6 F-PLAN for the inverse)
    # a float budget read as a policy reads it (through repr: 0.2 is 1/5, not the double
    # 0.2000000000000000111, whose scale is an ulp or two below the policy's; review 39)
    exact = amount if isinstance(amount, Fraction) else Fraction(repr(float(amount)))
    # at a vector's dimension: its map charges each coordinate's rounding (review 40)
    d = release_dimension(dimension)
    facts = calibrate(
        sensitivity=float(delta), budget=exact, measure=unit, mechanism=mechanism, dimension=d
    )
    return facts.scale, nonnegative_real(magnitude, "magnitude") * ROUNDING

"""Sensitivities: how far one privacy unit can move a metric's summed contributions.

Exact rationals from the policy's bounds, each with its one-line proof beside it, and
the double a release is calibrated at (rounded up, widened for client-side float
rounding). No OpenDP here: :mod:`dpledger.mechanisms` calibrates noise to these
numbers and re-exports every name, which is where callers import them from.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

from dpledger._shown import shown
from dpledger.errors import InternalError, InvalidInput
from dpledger.policy import MetricSpec, Policy
from dpledger.types import MechanismKind, Neighbouring

__all__ = [
    "CLIENT_ROUNDING_SLACK",
    "check_records",
    "float_up",
    "l1_sensitivity",
    "l2_sensitivity",
    "policy_sensitivity",
    "release_sensitivity",
    "scalar_sensitivity",
    "sensitivity",
]

CLIENT_ROUNDING_SLACK = Fraction(1, 10**12)
"""Relative widening of every sensitivity for float rounding in CLIENT code only.

A client's capped vector of d doubles has an L1 norm within ~d·2⁻⁵³ (relative) of its
cap (integer counts scaled once: within 2·2⁻⁵³); 1e-12 covers d up to ~10⁴ and costs
1e-12 relative extra noise. It does NOT cover the aggregator: a float sum of n clients
errs by up to 2⁻⁵³·n·cap even correctly rounded, i.e. n·2⁻⁵³ relative to Δ = 2·cap,
growing with n past any fixed slack. The aggregator must deliver the EXACT sum (a
fixed-point secure sum, as secure-aggregation protocols compute; see
:mod:`dpledger.metrics.secure_sum`)."""


def float_up(q: Fraction) -> float:
    """The smallest double ≥ ``q``: sensitivities and scales are rounded against privacy."""
    try:
        f = float(q)
    except OverflowError:  # beyond a double (a tampered ledger's sum): ±the largest
        return math.inf if q > 0 else -sys.float_info.max
    return f if Fraction(f) >= q else math.nextafter(f, math.inf)


def _check_neighbouring(neighbouring: str) -> None:
    if neighbouring not in ("replace", "add_remove"):
        raise InvalidInput(
            f"neighbouring must be 'replace' or 'add_remove', got {shown(neighbouring)}"
        )


def scalar_sensitivity(low: Fraction, high: Fraction, neighbouring: Neighbouring) -> Fraction:
    """Exact absolute sensitivity of a sum of per-client scalars clipped to [low, high].

    Swapping one client moves the sum by at most ``high − low``; adding or removing one
    moves it by at most ``max(|low|, |high|)``.
    """
    _check_neighbouring(neighbouring)
    if not low < high:
        raise InvalidInput(f"need low < high, got [{low}, {high}]")
    return high - low if neighbouring == "replace" else max(abs(low), abs(high))


def l1_sensitivity(cap: Fraction, neighbouring: Neighbouring) -> Fraction:
    """Exact L1 sensitivity of a sum of per-client vectors with ‖u‖₁ ≤ ``cap``.

    Swapping moves the sum by ≤ ‖u‖₁ + ‖v‖₁ ≤ 2·cap (triangle inequality); adding or
    removing one client by ≤ cap.
    """
    _check_neighbouring(neighbouring)
    if not cap > 0:
        raise InvalidInput(f"cap must be > 0, got {cap}")
    return 2 * cap if neighbouring == "replace" else cap


def check_records(records: int) -> int:
    if isinstance(records, bool) or not isinstance(records, int) or records < 1:
        raise InvalidInput(f"records per privacy unit must be an integer ≥ 1, got {shown(records)}")
    return records


def sensitivity(spec: MetricSpec, neighbouring: Neighbouring, *, records: int = 1) -> Fraction:
    """Exact L1 (absolute, for a scalar) sensitivity of a metric's summed contributions.

    ``records`` is how many elements one privacy unit may hold: 1 for a client (its whole
    contribution is one element, bounded by ``clip`` or ``cap_per_client``), or a record
    policy's ``max_records_per_person`` (each record bounded by ``clip`` or
    ``cap_per_record``). Proof of the scaling: a person's contribution is the sum of at
    most ``records`` bounded records, so by the triangle inequality it moves the sum at
    most ``records`` times as far as one record can; a silo keeps at most that many of a
    person's records (:func:`dpledger.metrics.records.keep_per_person`), by a rule that
    reads no other person's records, so one person's presence or records change only
    their own kept records.
    """
    k = check_records(records)
    if spec.kind == "scalar_mean":
        if spec.clip is None:
            raise InternalError("scalar_mean spec without clip passed validation")
        lo, hi = spec.clip.low, spec.clip.high
        exact = scalar_sensitivity(lo, hi, neighbouring)
        # clients clip to the doubles nearest the decimals; their range can be wider
        as_double = scalar_sensitivity(Fraction(float(lo)), Fraction(float(hi)), neighbouring)
        return k * max(exact, as_double)
    if spec.cap is None:
        raise InternalError(f"{spec.kind} spec without an L1 cap passed validation")
    return k * l1_sensitivity(spec.cap, neighbouring)


def l2_sensitivity(
    spec: MetricSpec, neighbouring: Neighbouring, *, records: int = 1
) -> Fraction | float:
    """An upper bound on the L2 sensitivity of the summed vector (exact where rational).

    Proof. Let u, v be one privacy unit's contributions, ‖u‖₁, ‖v‖₁ ≤ c (c = records ×
    the per-element cap). Add/remove: ‖u‖₂ ≤ ‖u‖₁ ≤ c. Replace with non-negative vectors
    (histograms): u·v ≥ 0, so ‖u − v‖₂² = ‖u‖₂² + ‖v‖₂² − 2u·v ≤ ‖u‖₁² + ‖v‖₁² ≤ 2c²,
    i.e. ≤ √2·c (a double, rounded up). Replace with signed vectors: only the triangle
    inequality holds, ‖u − v‖₂ ≤ 2c. A scalar's L2 sensitivity is its absolute sensitivity.
    """
    delta1 = sensitivity(spec, neighbouring, records=records)
    if spec.kind == "scalar_mean" or neighbouring == "add_remove" or not spec.is_nonnegative:
        return delta1
    bound = math.sqrt(2.0) * float_up(records * (spec.cap or Fraction(0)))
    return math.nextafter(bound, math.inf)


def release_sensitivity(
    spec: MetricSpec, neighbouring: Neighbouring, mechanism: MechanismKind, *, records: int = 1
) -> float:
    """The sensitivity a release is calibrated at: L1 (Laplace) or L2 (Gaussian), as a double.

    Rounded up, and widened by :data:`CLIENT_ROUNDING_SLACK` so that float rounding in
    the clients' clipping and capping (a capped row's norm can exceed its cap by a few
    ulps) can never make the true sensitivity exceed the recorded one. ``records`` as in
    :func:`sensitivity`; :func:`policy_sensitivity` passes the policy's.
    """
    delta = (
        l2_sensitivity(spec, neighbouring, records=records)
        if mechanism == "gaussian"
        else sensitivity(spec, neighbouring, records=records)
    )
    return float_up(Fraction(delta) * (1 + CLIENT_ROUNDING_SLACK))


def policy_sensitivity(
    policy: Policy, metric: str, mechanism: MechanismKind | None = None
) -> float:
    """:func:`release_sensitivity` of ``metric`` under ``policy``: its relation, its unit.

    The one call every caller holding a policy uses (release, audit, planning), so none
    can forget the record policy's ``max_records_per_person``. ``mechanism`` defaults to
    the policy's noise for the metric.
    """
    return release_sensitivity(
        policy.metric(metric),
        policy.neighbouring,
        mechanism or policy.mechanism(metric),
        records=policy.records_per_unit,
    )

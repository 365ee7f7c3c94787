"""The aggregate's checks: real numbers of the right shape, finite, signed as declared, and
within the bounds that ``n`` clipped clients can reach.

They run before OpenDP ever sees the aggregate (OpenDP turns NaN into 0, clamps inf and
accepts a vector of the wrong length). A reason names public facts only: the un-noised
aggregate must never reach a verdict, a log or a review.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpledger import mechanisms as mech
from dpledger.approval.noise_range import noise_reach, tail_scales
from dpledger.approval.verdict import Check
from dpledger.metrics._reading import read_real
from dpledger.policy import Clip, MetricSpec, Policy

__all__ = [
    "AGGREGATE_TOLERANCE",
    "Limits",
    "aggregate_checks",
    "as_float64",
    "each_aggregate_check",
    "inside",
    "l1_mass",
    "limits",
    "noise_room",
    "passes",
    "within",
]

AGGREGATE_TOLERANCE = 1e-9
"""Relative slack on the gross-clipping check, absorbing float rounding in the secure sum.

The check is evidence that client clipping ran, not the privacy guarantee (that rests on
the client module's clip), so a sum exceeding ``high·n`` by a few ulps is not refused.
"""

_SMALL = 64  # vectors up to this length are checked as Python floats
_MAX = sys.float_info.max


def as_float64(aggregate: object) -> tuple[npt.NDArray[np.float64] | None, str]:
    """The aggregate as a new float64 array, else None and why: decided by its type, never
    its values (:func:`dpledger.metrics._reading.read_real`, the one home of that rule)."""
    return read_real(aggregate)


def aggregate_checks(
    spec: MetricSpec, arr: npt.NDArray[np.float64], n: int, policy: Policy, metric: str
) -> Sequence[Check]:
    """The aggregate's checks: one shared tuple when they all pass, else each with its reason.

    A passing aggregate's checks name only public facts (its shape, the metric's bounds,
    ``n``), so they are built once per (metric, shape, n) and shared; the decisions are
    :func:`each_aggregate_check`'s, on the same arithmetic.
    """
    if passes(spec, arr, n, policy, noise_room(policy, metric, n)):
        return _passed(policy, metric, arr.shape, n)
    return each_aggregate_check(spec, arr, n, policy, metric)


def passes(
    spec: MetricSpec, arr: npt.NDArray[np.float64], n: int, policy: Policy, room: float = _MAX
) -> bool:
    """Whether every aggregate check passes (:func:`each_aggregate_check`'s decisions):
    :func:`within` the metric's :func:`limits` for ``n`` (``room``: :func:`noise_room`'s)."""
    return within(limits(spec, n, policy, room), arr)


@dataclass(frozen=True, slots=True)
class Limits:
    """What an aggregate of one metric summed over ``n`` must meet: public facts only
    (the policy's, and ``n``), so a caller may keep them per (metric, cohort)."""

    scalar: bool  # a scalar_mean: one value
    size: int  # a vector's length
    nonnegative: bool  # a vector's values must all be ≥ 0
    clipped: bool  # a scalar within [low, high]; else the L1 mass ≤ high
    low: float
    high: float


def limits(spec: MetricSpec, n: int, policy: Policy, room: float = _MAX) -> Limits:
    """The bounds :func:`_within_bounds` and :func:`within` hold an aggregate to, with
    their rounding slack (the same floats, computed once), within ``room``
    (:func:`noise_room`: below a double's limit by the noise's reach)."""
    scalar = spec.kind == "scalar_mean"
    if scalar and spec.clip is not None:
        lo, hi = _scalar_range(policy, spec.clip, n)
        tol = AGGREGATE_TOLERANCE
        low, high = max(lo - abs(lo) * tol, -room), min(hi + abs(hi) * tol, room)
        return Limits(True, 1, False, True, low, high)
    high = min(_l1_limit(spec, n, policy), room)
    return Limits(scalar, spec.size, spec.is_nonnegative, False, 0.0, high)


@functools.lru_cache(maxsize=4096)
def noise_room(policy: Policy, metric: str, n: int) -> float:
    """The largest |aggregate| whose noisy value stays a double but with chance
    :data:`~dpledger.approval.noise_range.NOISE_TAIL`, under ``add_remove`` (else the
    largest double: ``replace``'s bounds grow with the public ``n``, and ``noise_range``
    covers them).

    Under ``add_remove`` any finite sum is admitted (the count is private), while
    ``noise_range`` bounds the declared cohort's ``n × magnitude`` only: an aggregate of
    far more clients than declared could overflow in some draws, an outcome of the noise.
    Refused here instead, on the aggregate alone and before any draw, so a dry run and a
    release decide alike. Where the declared cohort's own sums leave no room, the
    ``noise_range`` check refuses every aggregate from public facts, and this leaves it to;
    where it passes them only by rounding (``tail × scale`` rounds to the largest double),
    the room is those sums' bound itself, with the rounding slack (review hfin: the largest
    double admitted an aggregate at the limit, which overflowed in half the draws).
    """
    if policy.neighbouring != "add_remove" or policy.release_budget(metric) <= 0:
        return _MAX
    facts, _ = mech.mechanism_facts(policy, metric)
    largest = n * policy.metric(metric).magnitude  # noise_range's bound (checks._largest)
    if not math.isfinite(noise_reach(facts, largest)):
        return _MAX  # noise_range refuses every aggregate
    room = _MAX - tail_scales(facts) * facts.scale - facts.grid_slack
    # with the sum's rounding slack: safe, as largest is far below half the doubles' last
    # step (1e292) wherever room < largest, so noise_range's rounding covers it too
    return max(room, largest * (1 + AGGREGATE_TOLERANCE))


def within(lim: Limits, arr: npt.NDArray[np.float64]) -> bool:
    """Whether every aggregate check passes, against ``lim`` (:func:`passes`' decisions).

    One pass: a vector's L1 mass (:func:`l1_mass`) is finite only if every value is, so it
    decides finiteness and the bounds together; a small vector is read as Python floats
    once (a release's hot path: ~1 µs instead of five numpy calls).
    """
    if lim.scalar:
        return (
            arr.shape in ((), (1,))
            and math.isfinite(x := float(arr.reshape(-1)[0]))
            and (lim.low <= x <= lim.high if lim.clipped else l1_mass(arr) <= lim.high)
        )
    if arr.shape != (lim.size,):
        return False
    if arr.size <= _SMALL:
        values = arr.tolist()
        mass = _fsum_abs(values)
        negative = min(values) < 0
    else:
        mass = l1_mass(arr)
        negative = bool((arr < 0).any())
    if not math.isfinite(mass) or (negative and lim.nonnegative):
        return False
    return mass <= lim.high


def l1_mass(arr: npt.NDArray[np.float64]) -> float:
    """``Σ|x|`` of an aggregate, correctly rounded up to :data:`_SMALL` values (``math.fsum``).

    NaN when a value is NaN; inf when a value is infinite or the mass overflows. The one
    definition the bounds check uses on every path, so a dry run and a release decide alike.
    """
    if arr.size <= _SMALL:
        return _fsum_abs(arr.reshape(-1).tolist())
    with np.errstate(over="ignore", invalid="ignore"):  # an overflowing mass is inf
        return float(np.abs(arr).sum())


def _fsum_abs(values: list[float]) -> float:
    try:
        return math.fsum(map(abs, values))
    except OverflowError:  # finite values whose exact sum exceeds the largest double
        return math.inf
    except ValueError:  # inf and -inf (abs makes both inf: unreachable, kept safe)
        return math.nan


def _l1_limit(spec: MetricSpec, n: int, policy: Policy) -> float:
    """The largest L1 mass ``n`` capped units can sum to, with the rounding slack; any
    finite mass under ``add_remove``, where the count is private (:func:`_within_bounds`)."""
    if policy.neighbouring == "add_remove":
        return sys.float_info.max  # any finite mass
    return float(spec.cap or 0) * n * (1 + AGGREGATE_TOLERANCE)


def inside(
    spec: MetricSpec, shape: tuple[int, ...], n: int, policy: Policy
) -> npt.NDArray[np.float64]:
    """An aggregate of ``shape`` that passes the bounds (public facts only): the middle of
    a scalar's range, zeros for a vector. A probe for building shared verdicts."""
    if spec.kind == "scalar_mean" and spec.clip is not None:
        lo, hi = _scalar_range(policy, spec.clip, n)
        return np.full(shape, 0.0 if math.isinf(lo) or math.isinf(hi) else lo / 2 + hi / 2)
    return np.zeros(shape)


@functools.lru_cache(maxsize=4096)
def _passed(policy: Policy, metric: str, shape: tuple[int, ...], n: int) -> tuple[Check, ...]:
    """The checks of an aggregate of ``shape`` that passes them all (public facts only)."""
    spec = policy.metric(metric)
    signed = spec.kind == "scalar_mean" or not spec.is_nonnegative
    return (
        Check("aggregate_shape", True, f"shape {shape}"),
        Check("aggregate_finite", True, "all finite"),
        Check("counts_nonnegative", True, "signed values allowed" if signed else "ok"),
        Check("clipping_bounds", True, _bounds_reason(policy, metric, n, True)),
    )


def each_aggregate_check(
    spec: MetricSpec, arr: npt.NDArray[np.float64], n: int, policy: Policy, metric: str
) -> list[Check]:
    """Each aggregate check in turn, with its reason (the path of a refusal)."""
    want = () if spec.kind == "scalar_mean" else (spec.size,)
    if arr.shape not in (want, want if want else (1,)):
        return [
            Check("aggregate_shape", False, f"shape {arr.shape}, expected {want or 'a scalar'}")
        ]
    checks = [Check("aggregate_shape", True, f"shape {arr.shape}")]
    # a reason says which check failed, never how many values failed it (the aggregate's)
    if not bool(np.isfinite(arr).all()):
        said = "a value is not finite: NaN, ±inf or beyond a double (±1.8e308); re-aggregate"
        checks.append(Check("aggregate_finite", False, said))
        return checks
    checks.append(Check("aggregate_finite", True, "all finite"))
    if spec.kind != "scalar_mean" and spec.is_nonnegative:
        ok = not bool((arr < 0).any())
        checks.append(Check("counts_nonnegative", ok, "ok" if ok else "a count is negative"))
    else:
        checks.append(Check("counts_nonnegative", True, "signed values allowed"))
    ok = _within_bounds(spec, arr, n, policy, noise_room(policy, metric, n))
    checks.append(Check("clipping_bounds", ok, _bounds_reason(policy, metric, n, ok)))
    return checks


def _within_bounds(
    spec: MetricSpec, arr: npt.NDArray[np.float64], n: int, policy: Policy, room: float
) -> bool:
    """Evidence that client clipping ran: the sum lies where ``n`` clipped clients can put it.

    Under a record-level policy ``n`` counts records and the clip or cap is per record.

    Under ``add_remove`` the number of clients actually summed is private, and a dataset
    and its neighbour with one more client may hold any number of them: every bound that
    grows with the count would approve one and refuse the other, at no charge. So there
    the check keeps only what any number of clipped clients respects: a scalar's sign
    (``[0, inf)`` for a clip with ``low ≥ 0``, ``(-inf, 0]`` for ``high ≤ 0``) and a
    vector's finiteness (its signs are :func:`each_aggregate_check`'s). That the planned
    ``n`` is at or above the count is the caller's to plan: it cannot be checked without
    revealing the count, and must never be enforced by truncating to it (where that binds,
    one client more pushes another out: twice the charged change; docs/privacy-model.md).
    One exception, at the doubles' limit: ``room`` (:func:`noise_room`), which only more
    clients than declared could pass.
    """
    lim = limits(spec, n, policy, room)
    if lim.clipped:
        return lim.low <= float(arr.reshape(-1)[0]) <= lim.high
    return l1_mass(arr) <= lim.high  # NaN compares False: refused


def _room_said(policy: Policy, metric: str, n: int, who: str) -> tuple[str, str]:
    """What a passing and a failing add_remove reason add for :func:`noise_room` (nothing
    while it is the largest double: the usual case)."""
    room = noise_room(policy, metric, n)
    if room == _MAX:
        return "", ""
    return (
        f", |sum| ≤ {room:.4g} (room for its noise below a double's limit)",
        f", or |sum| > {room:.4g} leaves its noise no room below a double's limit (more "
        f"{who}s than the declared cohort were summed: plan a cohort at or above the count; "
        "never truncate to it)",
    )


def _scalar_range(policy: Policy, clip: Clip, n: int) -> tuple[float, float]:
    """``[low·n, high·n]`` of a clipped scalar; under ``add_remove`` only its sign is
    bounded (any count: ``[min(0, low)·inf, max(0, high)·inf]``, 0 always inside)."""
    low, high = float(clip.low), float(clip.high)
    if policy.neighbouring == "add_remove":
        return (-math.inf if low < 0 else 0.0), (math.inf if high > 0 else 0.0)
    return low * n, high * n


@functools.lru_cache(maxsize=4096)
def _bounds_reason(policy: Policy, metric: str, n: int, ok: bool) -> str:
    """The clipping check's reason. It names public bounds only: the un-noised aggregate
    must never reach a verdict, a log or a review (a refused release would leak it at no
    charge)."""
    spec = policy.metric(metric)
    who = "client" if policy.privacy_unit == "client" else "record"
    if policy.neighbouring == "add_remove":  # the count is private: no bound grows with it
        if spec.kind == "scalar_mean" and spec.clip is not None:
            lo, hi = _scalar_range(policy, spec.clip, n)
            sign = "≥ 0" if lo == 0 and hi > 0 else "≤ 0" if hi == 0 and lo < 0 else "any sign"
            said = f"sum {sign} as clip [{spec.clip.low}, {spec.clip.high}] allows"
            room = _room_said(policy, metric, n, who)
            return (
                f"{said}{room[0]} (add_remove: the count is private, so no bound grows with it)"
                if ok
                else f"sum's sign is not what clip [{spec.clip.low}, {spec.clip.high}] allows "
                f"for any number of {who}s{room[1]}: {who} clipping failed; fix the client "
                "module before releasing"
            )
        room = _room_said(policy, metric, n, who)
        return (
            f"L1 mass finite{room[0]} (add_remove: the count is private, so no bound grows with it)"
            if ok
            else f"L1 mass overflows a double{room[1]}: no number of capped {who}s sums to it; "
            f"{who} capping failed; fix the client module before releasing"
        )
    if spec.kind == "scalar_mean" and spec.clip is not None:
        lo, hi = _scalar_range(policy, spec.clip, n)
        return (
            f"sum within clip × n = [{lo:g}, {hi:g}]"
            if ok
            else f"sum outside clip × n = [{lo:g}, {hi:g}] (n {policy.counted}): {who} "
            "clipping failed; fix the client module before releasing"
        )
    limit = float(spec.cap or 0) * n
    return (
        f"L1 mass within cap × n = {limit:g}"
        if ok
        else f"L1 mass exceeds cap × n = {limit:g} (n {policy.counted}): {who} capping "
        "failed; fix the client module before releasing"
    )

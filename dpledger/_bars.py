"""Error bars and cohort floors: the half-width a noise scale gives a mean over n, and the
least n whose bar meets a target (pure functions of public numbers; re-exported by
:mod:`dpledger.mechanisms`, which adds those of a release's calibrated facts)."""

from __future__ import annotations

import functools
import math
import struct

from dpledger._search import least_integer
from dpledger._shown import shown
from dpledger.errors import InternalError, InvalidInput
from dpledger.types import BarKind, MechanismKind

__all__ = [
    "BAR_KINDS",
    "GRANULARITY_K",
    "GRID_SLACK",
    "ROUNDING",
    "bar_factor",
    "cohort_floor_for_scale",
    "error_bar_for_scale",
    "mean_half_width",
    "sum_half_width",
]

BAR_KINDS: tuple[BarKind, ...] = ("ci95", "std", "scale")
GRANULARITY_K = -40
"""Noise is sampled on the grid 2^k (≈ 1e-12): ~1.4× faster than the finest grid, and
OpenDP's privacy map accounts for the rounding, so the charge stays exact."""

GRID_SLACK = math.ldexp(2.0, GRANULARITY_K)
"""Two steps of OpenDP's output grid at :data:`GRANULARITY_K` (what
:attr:`~dpledger.mechanisms.MechanismFacts.grid_slack` gives a release of dpledger's):
the public :func:`~dpledger.mechanisms.error_bar` and
:func:`~dpledger.mechanisms.cohort_floor` add it, as a release's bar does."""

_Z95 = 1.959963984540054  # two-sided 95% normal quantile


def bar_factor(bar: BarKind, mechanism: MechanismKind = "laplace") -> float:
    """Multiplier from noise scale to error bar: ``scale``; ``std`` (√2·b or σ); ``ci95``.

    For Laplace(b), P(|X| > t) = exp(−t/b), so the 95% half-width is b·ln 20.
    """
    if not isinstance(bar, str):  # np.array(["ci95"]) == "ci95" is truthy, and unhashable
        raise InvalidInput(f"bar must be one of {BAR_KINDS}, got {shown(bar)}")
    if bar == "scale":
        return 1.0
    if bar == "std":
        return math.sqrt(2.0) if mechanism == "laplace" else 1.0
    if bar == "ci95":
        return math.log(20.0) if mechanism == "laplace" else _Z95
    raise InvalidInput(f"bar must be one of {BAR_KINDS}, got {shown(bar)}")


ROUNDING = 2.0**-51
"""The double roundings of a sum (the aggregate, and OpenDP's output), relative to the
largest |sum| a cohort can reach: each is within half an ulp, and an ulp of x is at most
x·2⁻⁵². Times a metric's :attr:`~dpledger.policy.MetricSpec.magnitude` it is a constant
added to a mean's bar (invisible unless the noise is below the doubles' precision)."""


def error_bar_for_scale(
    scale: float,
    n: int,
    bar: BarKind = "ci95",
    mechanism: MechanismKind = "laplace",
    slack: float = 0.0,
    rounding: float = 0.0,
) -> float:
    """Error bar on a per-client mean (a sum divided by the cohort ``n``); ``slack`` is
    added to the sum's half-width (:attr:`MechanismFacts.grid_slack`), ``rounding`` to the
    mean's (magnitude × :data:`ROUNDING`).

    Computed as a release computes its bar (:func:`mean_half_width`, shared with
    :meth:`dpledger.ledger.Release.make`), so the bar the approval check and the planner
    compare with a target is, bit for bit, the one a release prints: two arithmetics
    differed by an ulp at 304 of 2,500 cohorts, so a release at the floor could print a
    bar above its target (review h39)."""
    if n <= 0:
        raise InvalidInput(f"cohort n must be ≥ 1, got {n}")
    return mean_half_width(bar_factor(bar, mechanism), scale, n, slack, rounding)


def mean_half_width(factor: float, scale: float, n: int, slack: float, rounding: float) -> float:
    """``(factor·scale + slack)/n + rounding``: a mean's half-width, in the one arithmetic
    the approval check, the planner and a release's bar share. Each step is one correctly
    rounded operation on a numerator fixed for all ``n``, so it never rises as ``n`` grows
    (the floor is a threshold: every cohort above it meets the target too). The form
    ``(factor·scale + slack + n·rounding)/n`` rose by an ulp from n to n + 1 where the
    rounding term dominates, so a cohort above the floor printed a bar above its target
    (review 40)."""
    return (factor * scale + slack) / n + rounding


def sum_half_width(mean: float, n: int) -> float:
    """A vector's half-width on each summed coordinate whose mean half-width is ``mean``
    (:func:`mean_half_width`): the widest double that over ``n`` is still at most ``mean``.
    ``n · mean`` equals ``factor·scale + slack + n·rounding`` to an ulp, but over ``n`` it
    can round above ``mean`` (as the sum form computed on its own did, at ~15% of
    cohorts): a vector released at its floor then had a per-client bar an ulp above the
    target the approval check compared (review 40)."""
    v = mean * n
    if not math.isfinite(v):
        return v
    for _ in range(8):  # a normal mean: the answer is within an ulp or two of n · mean
        if v / n > mean:
            v = math.nextafter(v, 0.0)
        elif math.isfinite(up := math.nextafter(v, math.inf)) and up / n <= mean:
            v = up
        else:
            return v
    # a subnormal mean (or 0) is coarser than n · mean's ulps: the widest v lies up to
    # 2**51 steps away (review 40 diff: the steps hung a zero-slack release's bar), so
    # bisect the doubles' bit patterns (in order for v ≥ 0; 0 / n ≤ mean always)
    lo, hi = 0, _BITS.unpack(_DOUBLE.pack(math.nextafter(math.inf, 0.0)))[0] + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _DOUBLE.unpack(_BITS.pack(mid))[0] / n <= mean:
            lo = mid
        else:
            hi = mid
    return float(_DOUBLE.unpack(_BITS.pack(lo))[0])


_DOUBLE, _BITS = struct.Struct("<d"), struct.Struct("<Q")


@functools.lru_cache(maxsize=4096)
def cohort_floor_for_scale(
    scale: float,
    target: float,
    bar: BarKind = "ci95",
    mechanism: MechanismKind = "laplace",
    slack: float = 0.0,
    rounding: float = 0.0,
) -> int:
    """The smallest ``n`` whose :func:`error_bar_for_scale` is ≤ ``target`` at this scale.

    The approval check and the planner use it with a release's calibrated scale, so the
    floor and the bar a release reports can never disagree.
    """
    if not (math.isfinite(target) and target > 0):
        raise InvalidInput(f"target error bar must be finite and > 0, got {shown(target)}")
    if not target > rounding:
        raise InvalidInput(
            f"no cohort reaches the target {target!r}: the doubles' rounding of the sums "
            f"alone adds {rounding:.3g} to every bar; state the metric in smaller units"
        )
    ratio = (bar_factor(bar, mechanism) * scale + slack) / (target - rounding)
    if not math.isfinite(ratio) or ratio > 2**62:
        raise InvalidInput(
            f"no cohort reaches the target {target!r} at noise scale {scale!r}: the floor "
            "would exceed 2**62 clients"
        )
    floor = least_integer(
        lambda n: error_bar_for_scale(scale, n, bar, mechanism, slack, rounding) <= target,
        1,
        2**63,
        max(1, math.ceil(ratio)),  # the closed form: exact up to float rounding
    )
    if floor is None:  # the bar shrinks like 1/n, so 2**63 always passes after the check
        raise InternalError(f"no cohort floor for scale {scale!r} and target {target!r}")
    return floor

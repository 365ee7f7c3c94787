"""What every metric's derived per-release budget must allow, checked when a policy loads.

A policy's fields are each in range (:mod:`dpledger.policy.base`), yet a metric's
per-release budget is derived (``eval_fraction × epoch budget / rounds_per_epoch``, shared
by weight) and can fall below the smallest normal double, or leave a noise scale Δ/ε (or
Δ/√(2ρ)) whose error bar overflows a double, so that no release or plan of it could ever
be calibrated; a ``target`` can lie below what any cohort reaches. Such a policy is
refused at load, naming the metric, its derived budget and what to change.

The bounds here over-estimate what the release path computes (the sensitivity of
:mod:`dpledger._sensitivity`, widened for client rounding; OpenDP's 2⁻⁴⁰ output grid; the
largest error-bar factor, ln 20 < 3), so a policy that loads always calibrates, and its
error bars and cohort floors are finite. (This package sits below the mechanisms, which
cannot be imported from here; ``tests/test_policy_budget_limits.py`` checks the bounds
against them at the edge.)
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from typing import TYPE_CHECKING

from dpledger.policy.base import MIN_NORMAL
from dpledger.policy.metric import MetricSpec

if TYPE_CHECKING:
    from dpledger.policy.model import Policy

__all__ = ["EVAL_FRACTION_ADVISED", "budget_limit_problems", "eval_fraction_note"]

_MAX_DOUBLE = Fraction(sys.float_info.max)
_BAR_FACTOR = 3
"""At least every error-bar factor (Laplace ci95 ln 20 ≈ 2.996, √2, Gaussian 1.96, 1)."""
_WIDEN = 1 + Fraction(1, 10**6)
"""Headroom over the release's sensitivity (widened by 1e-12 and rounded up to a double)
and over OpenDP's privacy map, which calibration meets a few ulps above the closed form."""
_GRID = Fraction(2) ** -38
"""Per coordinate, more than OpenDP's 2⁻⁴⁰ output grid adds to the scale calibration needs."""
_ROUNDING = 2.0**-51
"""The doubles' rounding of a sum, relative to the metric's magnitude (``_bars.ROUNDING``)."""
_MAX_FLOOR = 2**62
"""The largest cohort floor the approval check computes."""


def _sensitivity_bound(policy: Policy, spec: MetricSpec) -> Fraction:
    """At least the release's L1 (and L2) sensitivity: the policy's relation and unit, the
    clip as the decimals written or the doubles clients clip to, whichever is wider."""
    if spec.clip is not None:
        lo, hi = spec.clip.low, spec.clip.high
        lo, hi = min(lo, Fraction(float(lo))), max(hi, Fraction(float(hi)))
        one = hi - lo if policy.neighbouring == "replace" else max(abs(lo), abs(hi))
    else:
        cap = spec.cap or Fraction(0)
        one = 2 * cap if policy.neighbouring == "replace" else cap  # L2 ≤ L1
    return policy.records_per_unit * one


def _name_budget(policy: Policy, name: str, budget: Fraction, rounds: int | None = None) -> str:
    sym = "ε" if policy.unit == "epsilon" else "ρ"
    spec = policy.metrics[name]
    if spec.weight is None:
        how = "as declared"
    else:
        how = (
            f"eval_fraction × epoch_{policy.unit} / rounds_per_epoch "
            f"{rounds or policy.rounds_per_epoch}, by its weight's share"
        )
    return f"metric {name!r}: its per-release {sym} is {_shown(budget)} ({how})"


def _shown(q: Fraction) -> str:
    """``q`` to 3 digits; one below the doubles' range (0.0 as a float) by its power of ten."""
    if float(q) > 0:
        return f"{float(q):.3g}"
    return f"≈1e{round((q.numerator.bit_length() - q.denominator.bit_length()) * math.log10(2))}"


def _remedy(policy: Policy, spec: MetricSpec) -> str:
    if spec.weight is None:
        return f"raise its {policy.unit}"
    return f"raise epoch_{policy.unit}, eval_fraction or its weight, or lower rounds_per_epoch"


def budget_limit_problems(
    policy: Policy, rounds: int | None = None, *, targets: bool = True
) -> list[str]:
    """Why some metric of ``policy`` could never be calibrated or reach its target (empty: none).

    ``rounds`` (default: the policy's ``rounds_per_epoch``) asks the same of a version of
    the policy with that many rounds per epoch: what a planner planning other rounds needs;
    ``targets=False`` leaves out the targets no cohort reaches (what a budget sizer reports).
    A weighted metric an over-committed policy leaves no budget (exactly 0) is not listed:
    that policy loads with a :class:`~dpledger.policy.PolicyWarning`, as documented.
    """
    out = []
    for name, spec in policy.metrics.items():
        budget = policy.release_budget(name, rounds)
        if budget <= 0:
            continue
        head = _name_budget(policy, name, budget, rounds)
        if budget < MIN_NORMAL:
            out.append(
                f"{head}, below the smallest normal double 2.2e-308, so no noise scale can "
                f"be calibrated to it: {_remedy(policy, spec)}"
            )
            continue
        delta = (_sensitivity_bound(policy, spec) + spec.size * _GRID) * _WIDEN
        # the error bar at one client, 3·scale, must be a finite double (compared exactly)
        if policy.unit == "epsilon":
            finite = _BAR_FACTOR * delta <= _MAX_DOUBLE * budget
        else:
            finite = (_BAR_FACTOR * delta) ** 2 <= _MAX_DOUBLE**2 * 2 * budget
        if not finite:
            out.append(
                f"{head}: at sensitivity {float(delta):.3g} its noise scale and error bars "
                f"are beyond the range of a double, so it could never be released: "
                f"{_remedy(policy, spec)}, or state the metric in smaller units"
            )
            continue
        if targets and spec.target is not None:
            out.extend(_target_problems(policy, name, spec, budget, delta, rounds))
    return out


def _target_problems(
    policy: Policy,
    name: str,
    spec: MetricSpec,
    budget: Fraction,
    delta: Fraction,
    rounds: int | None,
) -> list[str]:
    """Why no cohort reaches ``spec.target``: the approval check's floor would raise."""
    target = float(spec.target or 0.0)
    rounding = spec.magnitude * _ROUNDING
    if not target > rounding:
        return [
            f"metric {name!r}: no cohort reaches its target {target!r}: the doubles' rounding "
            f"of the sums alone adds {rounding:.3g} to every bar; raise the target or state "
            "the metric in smaller units"
        ]
    b = float(budget)
    scale = float(delta) / (b if policy.unit == "epsilon" else math.sqrt(2.0 * b))
    ratio = (_BAR_FACTOR * scale * 1.000001 + 2.0**-38) / (target - rounding)
    if ratio > _MAX_FLOOR:
        return [
            f"{_name_budget(policy, name, budget, rounds)}: no cohort reaches its target "
            f"{target!r} "
            f"(the cohort floor would exceed 2**62 clients): raise the target, or "
            f"{_remedy(policy, spec)}"
        ]
    return []


EVAL_FRACTION_ADVISED = (Fraction(1, 10), Fraction(2, 5))
"""Outside this range of ``eval_fraction`` the policy loads with a :class:`PolicyWarning`."""


def eval_fraction_note(fraction: Fraction) -> str | None:
    """Why an ``eval_fraction`` outside :data:`EVAL_FRACTION_ADVISED` is unwise, naming
    the side it falls on; None inside the advised range."""
    lo, hi = EVAL_FRACTION_ADVISED
    shown = f"eval_fraction {float(fraction):g} is outside {float(lo):g}–{float(hi):g}"
    if fraction < lo:
        return f"{shown}: this little ε per release gives error bars that swallow the signal"
    if fraction > hi:
        return (
            f"{shown}: evaluation takes {float(fraction) * 100:.4g}% of each epoch's ε, leaving "
            "training less than the advised 60%"
        )
    return None

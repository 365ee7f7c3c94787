"""The checks of a request against the policy, of its cost, and of the ledger's state.

The request and costing checks read only public inputs (the policy, the request's public
fields, the declared cohort), so they are cached per distinct input and shared by every
release that repeats them. The state checks (epoch policy, allocation, budget) read the
epoch's committed spend: one function for the dry run and the re-check under the write lock.
"""

from __future__ import annotations

import functools
import math
import sys
from dataclasses import dataclass
from fractions import Fraction

from dpledger import mechanisms as mech
from dpledger.accounting import BudgetCheck, EpochSpend, check_allocation, check_budget
from dpledger.approval.aggregate import limits
from dpledger.approval.noise_range import NOISE_TAIL, noise_reach, tail_scales
from dpledger.approval.request import ReleaseRequest
from dpledger.approval.verdict import Check
from dpledger.policy import ALL, MetricSpec, Policy
from dpledger.types import Budget

__all__ = [
    "Costing",
    "costing",
    "noise_check",
    "noise_check_at",
    "request_checks",
    "state_checks",
]


@functools.lru_cache(maxsize=4096)
def request_checks(
    policy: Policy,
    metric: str,
    region: str,
    policy_version: str | None,
    edges_version: str | None,
) -> tuple[MetricSpec | None, tuple[Check, ...]]:
    """The checks of a request's public fields against the policy, and the metric's spec.

    They read nothing but the policy and these fields, so they are computed once per
    distinct (metric, region, versions) and shared by every release that repeats them
    (a round's twenty requests have five metrics and four regions). The spec is None when
    the metric is unknown (then only ``metric_known`` ran).
    """
    spec = policy.metrics.get(metric)
    if spec is None:
        known = ", ".join(sorted(policy.metrics))
        return None, (Check("metric_known", False, f"unknown metric; the policy has: {known}"),)
    checks = [Check("metric_known", True, f"{spec.kind}")]
    region_ok = region == ALL or policy.regions.admits(region)
    checks.append(
        Check(
            "region_known",
            region_ok,
            "ok" if region_ok else f"not a region of this policy: {list(policy.regions.names)}",
        )
    )
    pv = policy_version
    checks.append(
        Check(
            "policy_version",
            pv is None or pv == policy.version,
            "ok"
            if pv in (None, policy.version)
            # the policy here is the one given (--policy, Ledger.open), not one the ledger
            # recorded: say which version is which (audit s29, F10)
            else f"the request names policy version {pv}, but the policy this ledger was "
            f"opened with is {policy.name} version {policy.version}: send the request under "
            f"{policy.version}, or open the ledger with the policy of version {pv}",
        )
    )
    if spec.edges_version is None and edges_version is not None:
        # passed, not refused: earlier clients state one for every metric, and a retry of
        # a release they recorded must keep its fingerprint; the verdict says it is unused
        checks.append(
            Check(
                "edges_version",
                True,
                f"this {spec.kind} metric has no bucket edges: the stated {edges_version} "
                "is not used (leave edges_version out)",
            )
        )
    elif spec.edges_version is None:
        checks.append(Check("edges_version", True, "metric has no edges"))
    elif edges_version != spec.edges_version:
        got = edges_version or "none stated"
        checks.append(
            Check(
                "edges_version",
                False,
                f"client used {got}, policy has {spec.edges_version}: "
                "re-bucket with the policy's edges",
            )
        )
    else:
        checks.append(Check("edges_version", True, spec.edges_version))
    return spec, tuple(checks)


@dataclass(frozen=True, slots=True)
class Costing:
    """What a release of one metric to one public cohort costs, and its cohort check."""

    check: Check  # cohort_floor, or the over-committed policy's failed budget check
    facts: mech.MechanismFacts | None  # None when the policy gives the metric no budget
    charge: Fraction
    floor: int | None
    cost: Budget  # the charge in the policy's unit
    noise: Check | None = None  # noise_range: the noisy output stays a finite double


def noise_check(facts: mech.MechanismFacts, largest: float) -> Check:
    """``noise_range``: whether the noisy output stays a finite double but with chance
    :data:`~dpledger.approval.noise_range.NOISE_TAIL` (public facts only: never the aggregate)."""
    t = tail_scales(facts)
    if math.isfinite(noise_reach(facts, largest)):
        return Check("noise_range", True, f"scale {facts.scale:.3g}: {t:.4g} scales fit a double")
    return Check(
        "noise_range",
        False,
        f"noise scale {facts.scale:.3g} (Δ/ε) is too near the doubles' limit: {t:.4g} scales "
        f"(passed with chance < {NOISE_TAIL:g}) plus the largest aggregate {largest:.3g} pass "
        f"{sys.float_info.max:.4g}, so a draw could overflow; nothing is drawn or charged: "
        "raise the metric's ε or narrow its clip or cap",
    )


def _largest(spec: MetricSpec, cohort: int, policy: Policy) -> float:
    """A public bound on |aggregate coordinate|: the policy's for the declared cohort, or,
    under ``add_remove`` (any finite sum is admitted: the count is private), the declared
    cohort's ``n × magnitude``."""
    lim = limits(spec, cohort, policy)
    largest = max(abs(lim.low), abs(lim.high))
    if policy.neighbouring == "add_remove" or not math.isfinite(largest):
        return cohort * spec.magnitude
    return largest


def noise_check_at(
    facts: mech.MechanismFacts, spec: MetricSpec, cohort: int, policy: Policy
) -> Check:
    """``noise_range`` for a release of ``spec`` under ``facts`` to the declared ``cohort``
    (:func:`noise_check` at the policy's largest aggregate): the one rule the approval check
    and :func:`dpledger.planning.plan` both apply."""
    return noise_check(facts, _largest(spec, cohort, policy))


@functools.lru_cache(maxsize=4096)
def costing(policy: Policy, metric: str, cohort: int) -> Costing:
    """The mechanism, exact charge and cohort-floor check of ``metric`` at ``cohort``.

    Public inputs only (the policy, the metric, the declared cohort), so computed once
    per distinct triple.
    """
    unit = policy.unit
    spec = policy.metric(metric)
    if policy.release_budget(metric) <= 0:
        check = Check(
            "budget",
            False,
            f"{policy.no_budget_reason()}: this metric gets no {unit}; lower the absolute "
            "budgets or the rounds per epoch",
        )
        return Costing(check, None, Fraction(0), None, Budget(Fraction(0), unit))
    facts, charge = mech.mechanism_facts(policy, metric)
    noise = noise_check_at(facts, spec, cohort, policy)
    if spec.target is None:
        check = Check("cohort_floor", True, "no error-bar target declared")
        return Costing(check, facts, charge, None, Budget(charge, unit), noise)
    floor = mech.cohort_floor_of(facts, spec.target, spec.bar, spec.magnitude)
    ok = cohort >= floor
    bar = mech.error_bar_of(facts, cohort, spec.bar, spec.magnitude)
    counted = policy.counted
    shown_bar, target = _apart(bar, spec.target)
    check = Check(
        "cohort_floor",
        ok,
        f"n={cohort} {counted} ≥ floor {floor} ({spec.bar} bar {shown_bar} ≤ {target})"
        if ok
        else f"n={cohort} {counted} < floor {floor}: {spec.bar} bar "
        f"{shown_bar} > target {target}; merge regions or wait for a larger cohort",
    )
    return Costing(check, facts, charge, floor, Budget(charge, unit), noise)


def _apart(bar: float, target: float) -> tuple[str, str]:
    """``bar`` and ``target`` as text, 4 significant digits or as many more as tell two
    different numbers apart (a bar of 1.0004 over a target of 1 is not "1 > 1")."""
    for digits in range(4, 18):
        a, b = f"{bar:.{digits}g}", f"{target:.{max(digits, 6)}g}"
        if a != b or bar == target:
            return a, b
    return repr(bar), repr(target)


def state_checks(
    policy: Policy,
    request: ReleaseRequest,
    charge: Fraction,
    spend: EpochSpend,
    epoch_policy: tuple[str, str] | None,
) -> tuple[list[Check], BudgetCheck | None, BudgetCheck]:
    """The checks that read the ledger: the epoch's policy, the allocation, the budget.

    ``spend`` is the epoch's committed spend; ``epoch_policy`` the ``(hash, version)``
    the epoch was opened under (None if unopened). One function for the dry run and for
    the re-check under the write lock, so the two can never disagree.
    """
    checks: list[Check] = []
    unit = policy.unit
    if epoch_policy is None or epoch_policy[0] == policy.content_hash:
        checks.append(Check("epoch_policy", True, "ok"))
    else:
        bound_hash, bound_version = epoch_policy
        checks.append(
            Check(
                "epoch_policy",
                False,
                f"epoch {request.epoch} was opened under policy version {bound_version} (hash "
                f"{bound_hash[:12]}…); its budget, regions and privacy unit hold until it "
                f"ends (this policy's unit is {policy.privacy_unit!r}: an epoch never mixes "
                "units): finish it under that policy, or use the new one from a new epoch",
            )
        )
    allocation = check_allocation(
        policy, spend, request.epoch, request.region, request.metric, charge
    )
    if allocation is None:
        checks.append(Check("allocation", True, "pooled: metrics share the epoch's budget"))
    else:
        checks.append(
            Check(
                "allocation",
                allocation.fits,
                f"{unit} {charge} fits {request.metric}'s allocation: spent "
                f"{allocation.spent.text} of {policy.allocation_of(request.metric)}"
                if allocation.fits
                else f"requested {unit} {charge}, spent {allocation.spent.text}, remaining "
                f"{allocation.remaining.text} ({allocation.scope}: {policy.rounds_per_epoch} "
                "release(s) per epoch); it cannot use another metric's share: wait for the "
                "next epoch, or issue a policy version with more rounds or a pooled allocation",
            )
        )
    budget = check_budget(policy, spend.by_scope(), request.epoch, request.region, charge)
    checks.append(
        Check(
            "budget",
            budget.fits,
            f"{unit} {charge} fits: spent {budget.spent.text} of {policy.eval_budget} "
            f"({budget.scope})"
            if budget.fits
            else f"requested {unit} {charge}, spent {budget.spent.text}, remaining "
            f"{budget.remaining.text} ({budget.scope}); wait for the next epoch",
        )
    )
    return checks, allocation, budget

"""Approval's one path: :func:`evaluate` runs every check, :func:`recheck` and :func:`admits`
re-run the ledger-state ones on fresh state under the write lock.

:func:`evaluate` is the code behind both ``Ledger.check`` (dry run) and ``Ledger.release``
(which re-runs the budget check under the write lock), so the two can never disagree.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction

from dpledger import mechanisms as mech
from dpledger.accounting import EpochSpend, allocation_loss, budget_loss
from dpledger.approval.aggregate import (
    Limits,
    aggregate_checks,
    as_float64,
    inside,
    limits,
    noise_room,
    within,
)
from dpledger.approval.checks import costing, request_checks, state_checks
from dpledger.approval.request import ReleaseRequest, well_formed
from dpledger.approval.verdict import (
    STATE_CHECKS,
    Assessment,
    Check,
    Prepared,
    Verdict,
    complete,
)
from dpledger.policy import MetricSpec, Policy
from dpledger.types import Budget

__all__ = ["admits", "evaluate", "recheck"]

_NIL = Fraction(0)


def evaluate(
    policy: Policy,
    request: ReleaseRequest,
    aggregate: object,
    spend: EpochSpend | None,
    epoch_policy: tuple[str, str] | None = None,
) -> Assessment:
    """Run every approval check: the verdict, and the prepared release if all pass.

    ``spend`` is the epoch's exact committed spend; ``epoch_policy`` the ``(hash,
    version)`` the epoch was opened under (None if unopened). With ``spend=None`` the
    ledger-state checks (:data:`STATE_CHECKS`) are deferred to :func:`recheck`, which a
    release runs under the write lock anyway. Nothing is mutated.
    """
    request = well_formed(request)
    unit = policy.unit
    if spend is None:  # the release path: a passing request's verdict is shared
        arr, _ = as_float64(aggregate)
        if arr is not None:
            fast = _passing(
                policy,
                request.metric,
                request.region,
                request.policy_version,
                request.edges_version,
                request.cohort,
                arr.shape,
            )
            if fast is not None and within(fast.limits, arr):
                v = Verdict(request, fast.checks, fast.cost, unit, None, fast.floor)
                values = arr.reshape(1) if fast.spec.kind == "scalar_mean" else arr
                return Assessment(v, Prepared(v, fast.spec, values, fast.facts))
    return _evaluate(policy, request, aggregate, spend, epoch_policy)


def _evaluate(
    policy: Policy,
    request: ReleaseRequest,
    aggregate: object,
    spend: EpochSpend | None,
    epoch_policy: tuple[str, str] | None,
) -> Assessment:
    """:func:`evaluate`, every check run and every text built (no shared verdict)."""
    unit = policy.unit
    spec, head = request_checks(
        policy, request.metric, request.region, request.policy_version, request.edges_version
    )
    checks = list(head)
    if spec is None:
        return Assessment(complete(request, checks, unit))
    arr, why = as_float64(aggregate)
    checks.append(Check("aggregate_dtype", arr is not None, why or "real numbers"))
    if arr is None or not all(c.passed for c in checks):
        return Assessment(complete(request, checks, unit))
    checks.extend(aggregate_checks(spec, arr, request.cohort, policy, request.metric))
    if not all(c.passed for c in checks):
        return Assessment(complete(request, checks, unit))

    priced = costing(policy, request.metric, request.cohort)
    checks.append(priced.check)
    if priced.noise is not None:
        checks.append(priced.noise)
    if priced.facts is None:  # an over-committed policy: this metric gets no budget
        return Assessment(complete(request, checks, unit, Fraction(0)))
    facts, charge, floor = priced.facts, priced.charge, priced.floor
    values = arr.reshape(1) if spec.kind == "scalar_mean" else arr
    if spend is None:
        v = complete(request, checks, unit, priced.cost, floor=floor, deferred=STATE_CHECKS)
    else:
        state, allocation, budget = state_checks(policy, request, charge, spend, epoch_policy)
        checks.extend(state)
        v = complete(request, checks, unit, charge, budget, floor, allocation)
    return Assessment(v, Prepared(v, spec, values, facts) if v.approved else None)


@dataclass(frozen=True, slots=True)
class _Passing:
    """A deferred verdict's parts when a request's public checks all pass (its aggregate's
    checks passing, checked per aggregate by :func:`within` its :attr:`limits`)."""

    spec: MetricSpec
    checks: tuple[Check, ...]
    cost: Budget
    floor: int | None
    facts: mech.MechanismFacts
    limits: Limits  # the metric's for the request's cohort (public: kept with the rest)


@functools.lru_cache(maxsize=4096)
def _passing(
    policy: Policy,
    metric: str,
    region: str,
    policy_version: str | None,
    edges_version: str | None,
    cohort: int,
    shape: tuple[int, ...],
) -> _Passing | None:
    """The deferred verdict :func:`evaluate` builds for a request with these public fields
    whose aggregate passes, or None when a public check fails (then the slow path runs).

    Built by :func:`evaluate` itself on a passing aggregate of the metric's shape, so the
    two are the same verdict by construction (a test compares them field by field).
    """
    spec = policy.metrics.get(metric)
    if spec is None:
        return None
    probe = ReleaseRequest.model_construct(
        epoch=0,
        metric=metric,
        region=region,
        cohort=cohort,
        edges_version=edges_version,
        policy_version=policy_version,
        release_id=None,
    )
    found = _evaluate(policy, probe, inside(spec, shape, cohort, policy), None, None)
    p = found.prepared
    if p is None or (charge := p.verdict.charge) is None:
        return None
    checks = tuple(p.verdict.checks)
    lim = limits(spec, cohort, policy, noise_room(policy, metric, cohort))
    return _Passing(spec, checks, charge, p.verdict.floor, p.facts, lim)


def recheck(
    policy: Policy, prepared: Prepared, spend: EpochSpend, epoch_policy: tuple[str, str] | None
) -> Verdict:
    """The ledger-state checks of a prepared request, on fresh state (under the lock).

    Returns the request's whole verdict with :data:`STATE_CHECKS` (re)run: ``approved``
    says whether the release may go ahead.
    """
    v = prepared.verdict
    charge = v.charge.amount if v.charge is not None else Fraction(0)
    state, allocation, budget = state_checks(policy, v.request, charge, spend, epoch_policy)
    checks = (*(c for c in v.checks if c.name not in STATE_CHECKS), *state)
    return Verdict(v.request, checks, v.charge, v.unit, budget, v.floor, allocation)


def admits(
    policy: Policy, prepared: Prepared, spend: EpochSpend, epoch_policy: tuple[str, str] | None
) -> bool:
    """Whether :func:`recheck` would approve, without building its verdict.

    The same decisions on the same exact arithmetic (:func:`allocation_loss`,
    :func:`budget_loss`, which the checks themselves use), without their texts: the hot
    path of a round under the write lock. Only a refusal needs the verdict, and then the
    caller runs :func:`recheck` for it.
    """
    if epoch_policy is not None and epoch_policy[0] != policy.content_hash:
        return False
    req = prepared.verdict.request
    charge = prepared.verdict.charge.amount if prepared.verdict.charge is not None else _NIL
    allocation_room, budget_room = _headroom(policy, req.metric, charge)
    if (
        allocation_room is not None
        and allocation_loss(policy, spend, req.region, req.metric) > allocation_room
    ):
        return False
    return budget_loss(policy, spend, req.region) <= budget_room


def _headroom(policy: Policy, metric: str, charge: Fraction) -> tuple[Fraction | None, Fraction]:
    """``(allocation − charge, ε_eval − charge)``: spent + charge ≤ limit ⟺ spent ≤ limit − charge,
    exactly, so :func:`admits` compares instead of adding per release.

    Kept per (policy, metric) with the charge they were computed for, recomputed when
    another charge comes (a prepared release's charge is its costing's, shared): a lookup
    that hashes no rational (an ``lru_cache`` on the charge hashed a ``Fraction`` per
    release, ~1 µs).
    """
    kept = _ROOMS.get((policy, metric))
    if kept is not None and kept[0] is charge:
        return kept[1]
    allocation = policy.allocation_of(metric)
    rooms = (None if allocation is None else allocation - charge, policy.eval_budget - charge)
    if len(_ROOMS) >= 4096:  # bounded, as the lru_cache it replaces
        _ROOMS.clear()
    _ROOMS[(policy, metric)] = (charge, rooms)
    return rooms


_ROOMS: dict[tuple[Policy, str], tuple[Fraction, tuple[Fraction | None, Fraction]]] = {}

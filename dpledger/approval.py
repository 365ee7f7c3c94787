"""Release approval: named checks, each pass/fail with a human reason, and the Verdict.

:func:`evaluate` is the one code path behind both ``Ledger.check`` (dry run) and
``Ledger.release`` (which re-runs the budget check under the write lock), so the two
can never disagree. It validates the aggregate before OpenDP ever sees it: OpenDP
turns NaN into 0, clamps inf and accepts a vector of the wrong length.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Annotated, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BeforeValidator, ConfigDict, Field

from dpledger import mechanisms as mech
from dpledger.accounting import (
    BudgetCheck,
    EpochSpend,
    allocation_loss,
    budget_loss,
    check_allocation,
    check_budget,
)
from dpledger.errors import (
    BudgetExceeded,
    CohortTooSmall,
    InvalidAggregate,
    PolicyMismatch,
    ReleaseIdConflict,
    ReleaseRefused,
)
from dpledger.policy import ALL, Clip, FrozenModel, MetricSpec, Policy
from dpledger.types import Budget, Unit

__all__ = [
    "AGGREGATE_TOLERANCE",
    "MAX_COHORT",
    "MAX_EPOCH",
    "STATE_CHECKS",
    "Assessment",
    "Check",
    "Prepared",
    "ReleaseRequest",
    "Verdict",
    "admits",
    "evaluate",
    "fingerprint",
    "id_conflict",
    "recheck",
    "refusal",
]

AGGREGATE_TOLERANCE = 1e-9
"""Relative slack on the gross-clipping check, absorbing float rounding in the secure sum.

The check is evidence that client clipping ran, not the privacy guarantee (that rests on
the client module's clip), so a sum exceeding ``high·n`` by a few ulps is not refused.
"""

_EXACT_INT = 2**53
_NIL = Fraction(0)
_SKIPPED = "not checked: an earlier check failed"
_COMPACT = json.JSONEncoder(separators=(",", ":"))  # json.dumps(…, separators=…), built once
MAX_EPOCH = 2**63 - 1
"""The largest epoch number: what a signed 64-bit integer column (every store) holds."""
MAX_COHORT = 10**9
"""The largest cohort a release may declare (a billion clients: more than any fleet)."""

_FAMILY: dict[str, Literal["policy", "aggregate", "cohort", "budget", "release_id"]] = {
    "metric_known": "policy",
    "region_known": "policy",
    "policy_version": "policy",
    "edges_version": "policy",
    "aggregate_dtype": "aggregate",
    "aggregate_shape": "aggregate",
    "aggregate_finite": "aggregate",
    "counts_nonnegative": "aggregate",
    "clipping_bounds": "aggregate",
    "cohort_floor": "cohort",
    "epoch_policy": "policy",
    "allocation": "budget",
    "budget": "budget",
}
STATE_CHECKS = ("epoch_policy", "allocation", "budget")
"""The checks that read the ledger's state: re-run under the write lock before a release."""


def _numpy_int(value: object) -> object:
    """A numpy integer as a Python int (``cohort=mask.sum()``); anything else unchanged."""
    return int(value) if isinstance(value, np.integer) else value


_Count = Annotated[int, BeforeValidator(_numpy_int)]


class ReleaseRequest(FrozenModel):
    """What a caller asks to release: epoch, metric, region (or all), cohort, versions.

    Strict: ``epoch`` and ``cohort`` must be integers (``True``, ``1.0`` and ``"2400"``
    are refused, not coerced), strings must be strings. ``release_id`` makes the release
    idempotent: a retry with the same id, request and aggregate returns the recorded
    release (no new noise, no second charge).
    """

    model_config = ConfigDict(strict=True)  # merged with FrozenModel's frozen, closed config

    epoch: _Count = Field(ge=0, le=MAX_EPOCH, description="evaluation epoch (policy budget window)")
    metric: str = Field(min_length=1, max_length=64)
    region: str = Field(
        min_length=1, max_length=64, description=f"a region, or {ALL!r} for all (explicit)"
    )
    cohort: _Count = Field(
        ge=1,
        le=MAX_COHORT,
        description="clients summed into the aggregate — under a privacy_unit = 'record' "
        "policy, RECORDS (after each silo's per-person bound) — a public number: under "
        "replace the known cohort; under add_remove the planned cohort fixed before the "
        "round (the aggregator must sum at most this many), never the count of who reported",
    )
    edges_version: str | None = Field(default=None, min_length=1, max_length=128)
    policy_version: str | None = Field(default=None, min_length=1, max_length=64)
    release_id: str | None = Field(
        default=None,
        pattern=r"^[!-~]{1,128}$",
        description="caller-chosen idempotency key, unique per ledger: 1-128 printable "
        "ASCII characters without spaces (e.g. a UUID, or 'round-7/eu-west/loss')",
    )


@dataclass(frozen=True, slots=True)
class Check:
    """One named approval check: ``passed`` is None when a prerequisite failed first."""

    name: str
    passed: bool | None
    reason: str

    @property
    def status(self) -> str:
        """``pass``, ``FAIL`` or ``skipped``."""
        return {True: "pass", False: "FAIL", None: "skipped"}[self.passed]


@dataclass(frozen=True, slots=True)
class Verdict:
    """Every check for one request; ``approved`` is their conjunction."""

    request: ReleaseRequest
    checks: tuple[Check, ...]
    charge: Budget | None  # exact ε (or ρ) the release would cost; None before costing
    unit: Unit
    budget: BudgetCheck | None
    floor: int | None = None  # the metric's cohort floor, when it has a target
    allocation: BudgetCheck | None = None  # the metric's allocation, unless pooled

    @property
    def approved(self) -> bool:
        """True iff every check ran and passed."""
        return all(c.passed is True for c in self.checks)

    @property
    def failures(self) -> tuple[Check, ...]:
        """The checks that failed (skipped ones are not failures)."""
        return tuple(c for c in self.checks if c.passed is False)

    def summary(self) -> str:
        """One paragraph: the request, then each failed check and its reason."""
        r = self.request
        head = f"release of {r.metric!r} (epoch {r.epoch}, region {r.region}, n={r.cohort})"
        if self.approved:
            return f"{head}: approved, costs {self.charge}"
        why = "; ".join(f"{c.name}: {c.reason}" for c in self.failures)
        return f"{head}: refused: {why}"

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form for the CLI and reviews."""
        return {
            "approved": self.approved,
            "request": self.request.model_dump(),
            "charge": None if self.charge is None else self.charge.text,
            "unit": self.unit,
            "checks": [
                {"name": c.name, "status": c.status, "reason": c.reason} for c in self.checks
            ],
        }


@dataclass(frozen=True, slots=True)
class Prepared:
    """An approved request's validated aggregate and mechanism, ready to release."""

    verdict: Verdict
    spec: MetricSpec
    values: npt.NDArray[np.float64]
    facts: mech.MechanismFacts


@dataclass(frozen=True, slots=True)
class Assessment:
    """What :func:`evaluate` found: the verdict, and the prepared release if it approves.

    ``prepared`` is set exactly when every check that ran passed (with the ledger-state
    checks deferred, when they were: :func:`recheck` runs them under the write lock).
    """

    verdict: Verdict
    prepared: Prepared | None = None


def refusal(verdict: Verdict) -> ReleaseRefused:
    """The typed error for a refused verdict, chosen by its first failed check."""
    first = verdict.failures[0] if verdict.failures else None
    family = _FAMILY.get(first.name, "aggregate") if first else "aggregate"
    if first is not None and first.name == "release_id":
        return ReleaseIdConflict(verdict)
    binding = verdict.allocation if first is not None and first.name == "allocation" else None
    binding = binding or (verdict.budget if family == "budget" else None)
    if family == "budget" and binding is not None:
        return BudgetExceeded(
            verdict,
            requested=binding.requested,
            spent=binding.spent,
            remaining=binding.remaining,
            scope=binding.scope,
        )
    # a budget failure without a budget check is an over-committed policy
    if family == "cohort" and verdict.floor is not None:
        return CohortTooSmall(verdict, cohort=verdict.request.cohort, floor=verdict.floor)
    cls = {"policy": PolicyMismatch, "budget": PolicyMismatch}.get(family, InvalidAggregate)
    return cls(verdict)


def _as_float64(aggregate: object) -> tuple[npt.NDArray[np.float64] | None, str]:
    """The aggregate as float64 if it widens exactly, else None and why."""
    try:
        arr = np.asarray(aggregate)
    except (ValueError, TypeError) as e:
        return None, f"not an array of numbers ({e})"
    k = arr.dtype.kind
    if k == "f" and arr.dtype.itemsize <= 8:
        return arr.astype(np.float64), ""
    if k in "iu":
        if arr.size and int(np.max(np.abs(arr.astype(object)))) > _EXACT_INT:
            return None, "integers beyond 2**53 do not convert to float64 exactly"
        return arr.astype(np.float64), ""
    return None, f"dtype {arr.dtype} is not a real number type; send float64 or integers"


def _aggregate_checks(
    spec: MetricSpec, arr: npt.NDArray[np.float64], n: int, policy: Policy, metric: str
) -> Sequence[Check]:
    """The aggregate's checks: one shared tuple when they all pass, else each with its reason.

    A passing aggregate's checks name only public facts (its shape, the metric's bounds,
    ``n``), so they are built once per (metric, shape, n) and shared; the decisions are
    :func:`_each_aggregate_check`'s, on the same arithmetic.
    """
    want = () if spec.kind == "scalar_mean" else (spec.size,)
    signed = spec.kind == "scalar_mean" or not spec.is_nonnegative
    if (
        arr.shape in (want, want if want else (1,))
        and bool(np.isfinite(arr).all())
        and (signed or not bool((arr < 0).any()))
        and _within_bounds(spec, arr, n, policy)
    ):
        return _passed(policy, metric, arr.shape, n)
    return _each_aggregate_check(spec, arr, n, policy, metric)


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


def _each_aggregate_check(
    spec: MetricSpec, arr: npt.NDArray[np.float64], n: int, policy: Policy, metric: str
) -> list[Check]:
    """Each aggregate check in turn, with its reason (the path of a refusal)."""
    want = () if spec.kind == "scalar_mean" else (spec.size,)
    if arr.shape not in (want, want if want else (1,)):
        return [
            Check("aggregate_shape", False, f"shape {arr.shape}, expected {want or 'a scalar'}")
        ]
    checks = [Check("aggregate_shape", True, f"shape {arr.shape}")]
    bad = int(np.count_nonzero(~np.isfinite(arr)))
    if bad:
        checks.append(Check("aggregate_finite", False, f"{bad} NaN/inf value(s); re-aggregate"))
        return checks
    checks.append(Check("aggregate_finite", True, "all finite"))
    if spec.kind != "scalar_mean" and spec.is_nonnegative:
        neg = int(np.count_nonzero(arr < 0))
        checks.append(
            Check("counts_nonnegative", neg == 0, f"{neg} negative count(s)" if neg else "ok")
        )
    else:
        checks.append(Check("counts_nonnegative", True, "signed values allowed"))
    ok = _within_bounds(spec, arr, n, policy)
    checks.append(Check("clipping_bounds", ok, _bounds_reason(policy, metric, n, ok)))
    return checks


def _within_bounds(spec: MetricSpec, arr: npt.NDArray[np.float64], n: int, policy: Policy) -> bool:
    """Evidence that client clipping ran: the sum lies where ``n`` clipped clients can put it.

    Under a record-level policy ``n`` counts records and the clip or cap is per record.

    Under ``add_remove`` the number of clients actually summed is private (at most the
    planned ``n``), so a scalar's range is ``[min(0, low)·n, max(0, high)·n]``: the range
    of any number of clients up to n. With ``[low·n, high·n]`` a clip excluding 0 would
    approve a dataset and refuse its neighbour without one client, at no charge.
    """
    if spec.kind == "scalar_mean" and spec.clip is not None:
        lo, hi = _scalar_range(policy, spec.clip, n)
        x = float(arr.reshape(-1)[0])
        return lo - abs(lo) * AGGREGATE_TOLERANCE <= x <= hi + abs(hi) * AGGREGATE_TOLERANCE
    with np.errstate(over="ignore"):  # an overflowing mass is inf: refused below
        mass = float(np.abs(arr).sum())
    return mass <= float(spec.cap or 0) * n * (1 + AGGREGATE_TOLERANCE)


def _scalar_range(policy: Policy, clip: Clip, n: int) -> tuple[float, float]:
    """``[low·n, high·n]`` of a clipped scalar (0 included under ``add_remove``)."""
    low, high = float(clip.low), float(clip.high)
    if policy.neighbouring == "add_remove":
        low, high = min(0.0, low), max(0.0, high)
    return low * n, high * n


@functools.lru_cache(maxsize=4096)
def _bounds_reason(policy: Policy, metric: str, n: int, ok: bool) -> str:
    """The clipping check's reason. It names public bounds only: the un-noised aggregate
    must never reach a verdict, a log or a review (a refused release would leak it at no
    charge)."""
    spec = policy.metric(metric)
    who = "client" if policy.privacy_unit == "client" else "record"
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


def _state_checks(
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


def _complete(
    request: ReleaseRequest,
    checks: list[Check],
    unit: Unit,
    charge: Fraction | Budget | None = None,
    budget: BudgetCheck | None = None,
    floor: int | None = None,
    allocation: BudgetCheck | None = None,
    deferred: tuple[str, ...] = (),
) -> Verdict:
    """A verdict listing ``checks`` in order, and every check that did not run as skipped.

    ``deferred`` checks are left out: they run later (under the write lock).
    """
    rest: list[Check] = []
    if len(checks) + len(deferred) < len(_FAMILY):  # else every check ran (names are unique)
        ran = {c.name for c in checks} | set(deferred)
        rest = [Check(n, None, _SKIPPED) for n in _FAMILY if n not in ran]
    cost = (
        None if charge is None else charge if isinstance(charge, Budget) else Budget(charge, unit)
    )
    return Verdict(request, (*checks, *rest), cost, unit, budget, floor, allocation)


@functools.lru_cache(maxsize=4096)
def _request_checks(
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
            else f"client used {pv}, ledger has {policy.version}",
        )
    )
    if spec.edges_version is None:
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
class _Costing:
    """What a release of one metric to one public cohort costs, and its cohort check."""

    check: Check  # cohort_floor, or the over-committed policy's failed budget check
    facts: mech.MechanismFacts | None  # None when the policy gives the metric no budget
    charge: Fraction
    floor: int | None
    cost: Budget  # the charge in the policy's unit


@functools.lru_cache(maxsize=4096)
def _costing(policy: Policy, metric: str, cohort: int) -> _Costing:
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
            f"the policy is over-committed by {policy.overcommitment()}: this metric gets no "
            f"{unit}; lower the absolute budgets or the rounds per epoch",
        )
        return _Costing(check, None, Fraction(0), None, Budget(Fraction(0), unit))
    facts, charge = mech.mechanism_facts(policy, metric)
    if spec.target is None:
        check = Check("cohort_floor", True, "no error-bar target declared")
        return _Costing(check, facts, charge, None, Budget(charge, unit))
    floor = mech.cohort_floor_for_scale(facts.scale, spec.target, spec.bar, facts.mechanism)
    ok = cohort >= floor
    bar = mech.error_bar_for_scale(facts.scale, cohort, spec.bar, facts.mechanism)
    counted = policy.counted
    check = Check(
        "cohort_floor",
        ok,
        f"n={cohort} {counted} ≥ floor {floor} ({spec.bar} bar {bar:.4g} ≤ {spec.target:g})"
        if ok
        else f"n={cohort} {counted} < floor {floor}: {spec.bar} bar "
        f"{bar:.4g} > target {spec.target:g}; merge regions or wait for a larger cohort",
    )
    return _Costing(check, facts, charge, floor, Budget(charge, unit))


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
    unit = policy.unit
    spec, head = _request_checks(
        policy, request.metric, request.region, request.policy_version, request.edges_version
    )
    checks = list(head)
    if spec is None:
        return Assessment(_complete(request, checks, unit))
    arr, why = _as_float64(aggregate)
    checks.append(Check("aggregate_dtype", arr is not None, why or "real numbers"))
    if arr is None or not all(c.passed for c in checks):
        return Assessment(_complete(request, checks, unit))
    checks.extend(_aggregate_checks(spec, arr, request.cohort, policy, request.metric))
    if not all(c.passed for c in checks):
        return Assessment(_complete(request, checks, unit))

    costing = _costing(policy, request.metric, request.cohort)
    checks.append(costing.check)
    if costing.facts is None:  # an over-committed policy: this metric gets no budget
        return Assessment(_complete(request, checks, unit, Fraction(0)))
    facts, charge, floor = costing.facts, costing.charge, costing.floor
    values = arr.reshape(1) if spec.kind == "scalar_mean" else arr
    if spend is None:
        v = _complete(request, checks, unit, costing.cost, floor=floor, deferred=STATE_CHECKS)
    else:
        state, allocation, budget = _state_checks(policy, request, charge, spend, epoch_policy)
        checks.extend(state)
        v = _complete(request, checks, unit, charge, budget, floor, allocation)
    return Assessment(v, Prepared(v, spec, values, facts) if v.approved else None)


def recheck(
    policy: Policy, prepared: Prepared, spend: EpochSpend, epoch_policy: tuple[str, str] | None
) -> Verdict:
    """The ledger-state checks of a prepared request, on fresh state (under the lock).

    Returns the request's whole verdict with :data:`STATE_CHECKS` (re)run: ``approved``
    says whether the release may go ahead.
    """
    v = prepared.verdict
    charge = v.charge.amount if v.charge is not None else Fraction(0)
    state, allocation, budget = _state_checks(policy, v.request, charge, spend, epoch_policy)
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


@functools.lru_cache(maxsize=4096)
def _headroom(policy: Policy, metric: str, charge: Fraction) -> tuple[Fraction | None, Fraction]:
    """``(allocation − charge, ε_eval − charge)``: spent + charge ≤ limit ⟺ spent ≤ limit − charge,
    exactly, so :func:`admits` compares instead of adding per release."""
    allocation = policy.allocation_of(metric)
    return None if allocation is None else allocation - charge, policy.eval_budget - charge


def fingerprint(request: ReleaseRequest, principal: str | None = None) -> str:
    """SHA-256 of a request's public fields (all but its release id) and its principal.

    What an idempotent retry must repeat exactly (a release id belongs to whoever spent
    it). It holds nothing derived from the aggregate: the entry is readable by anyone who
    reads the ledger, and a digest of a private sum could be tested against guesses.
    """
    fields = [v for k, v in request.__dict__.items() if k != "release_id"]  # field order
    fields.append(principal)
    return hashlib.sha256(_COMPACT.encode(fields).encode()).hexdigest()


def id_conflict(request: ReleaseRequest, unit: Unit) -> Verdict:
    """The verdict refusing a reused release id (a different request or aggregate)."""
    check = Check(
        "release_id",
        False,
        f"release id {request.release_id!r} was already used for another request or "
        "aggregate; a retry must repeat both exactly; choose a new id for a new release",
    )
    return Verdict(request, (check,), None, unit, None)

"""The outcome of approval: each named :class:`Check`, the :class:`Verdict`, and its error.

The check names and their order are fixed here (:data:`_FAMILY`): a verdict lists every
check, those that did not run as skipped, so a reviewer always sees the same list. A
refused verdict becomes the typed error its first failure calls for (:func:`refusal`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np
import numpy.typing as npt

from dpledger import mechanisms as mech
from dpledger.accounting import BudgetCheck
from dpledger.approval.request import ReleaseRequest
from dpledger.errors import (
    BudgetExceeded,
    CohortTooSmall,
    InvalidAggregate,
    NoiseOutOfRange,
    PolicyMismatch,
    ReleaseIdConflict,
    ReleaseRefused,
)
from dpledger.policy import MetricSpec
from dpledger.types import Budget, Unit

__all__ = [
    "STATE_CHECKS",
    "Assessment",
    "Check",
    "Prepared",
    "Verdict",
    "complete",
    "id_conflict",
    "refusal",
]

_SKIPPED = "not checked: an earlier check failed"

_FAMILY: dict[str, Literal["policy", "aggregate", "cohort", "noise", "budget", "release_id"]] = {
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
    "noise_range": "noise",
    "epoch_policy": "policy",
    "allocation": "budget",
    "budget": "budget",
}
STATE_CHECKS = ("epoch_policy", "allocation", "budget")
"""The checks that read the ledger's state: re-run under the write lock before a release."""


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


def refusal(
    verdict: Verdict,
    *,
    index: int | None = None,
    staged: Budget | None = None,
    scope: str | None = None,
) -> ReleaseRefused:
    """The typed error for a refused verdict, chosen by its first failed check.

    ``index``: the request's position in a round (named in the message); ``staged``: what
    the round's earlier requests added to the binding budget check's spend, uncommitted
    (the error's ``spent`` and ``remaining`` are then the committed ones, read at ``scope``
    when given: a global request's binding region on committed spend).
    """
    first = verdict.failures[0] if verdict.failures else None
    family = _FAMILY.get(first.name, "aggregate") if first else "aggregate"
    rid = verdict.request.release_id
    named = f" (release id {rid!r})" if rid is not None else ""
    where = "" if index is None else f"request {index} of the round (from 0){named}: "
    message = where + verdict.summary()
    if first is not None and first.name == "release_id":
        return ReleaseIdConflict(verdict, message=message, index=index)
    binding = verdict.allocation if first is not None and first.name == "allocation" else None
    binding = binding or (verdict.budget if family == "budget" else None)
    if family == "budget" and binding is not None:
        extra = staged if staged is not None else Budget.zero(binding.spent.unit)
        return BudgetExceeded(
            verdict,
            requested=binding.requested,
            spent=binding.spent - extra,
            remaining=binding.remaining + extra,  # spent + staged ≤ the limit: exact
            scope=binding.scope if scope is None else scope,
            staged=extra,
            message=message,
            index=index,
        )
    # a budget failure without a budget check is an over-committed policy
    if family == "cohort" and verdict.floor is not None:
        return CohortTooSmall(
            verdict, cohort=verdict.request.cohort, floor=verdict.floor, message=message,
            index=index,
        )  # fmt: skip
    if family == "noise":
        return NoiseOutOfRange(verdict, message=message, index=index)
    cls = {"policy": PolicyMismatch, "budget": PolicyMismatch}.get(family, InvalidAggregate)
    return cls(verdict, message=message, index=index)


def complete(
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


def id_conflict(request: ReleaseRequest, unit: Unit) -> Verdict:
    """The verdict refusing a reused release id (a different request or aggregate)."""
    check = Check(
        "release_id",
        False,
        f"release id {request.release_id!r} was already used for another request or "
        "aggregate; a retry must repeat both exactly; choose a new id for a new release",
    )
    return Verdict(request, (check,), None, unit, None)

"""The service's wire format: request bodies and responses, as strict pydantic models.

Bodies embed the library's own :class:`~dpledger.approval.ReleaseRequest` (strict:
``"2400"`` or ``true`` is not a cohort). An aggregate is a JSON number or array of
numbers, finite (``NaN``/``Infinity``, which Python's JSON reader accepts, are refused
here), at most :data:`MAX_AGGREGATE_VALUES` of them (the body limit always admits the
policy's largest aggregate, whatever its digits: see
:func:`~dpledger.service.state.body_bytes_needed`); its shape and dtype against the
metric are the library's approval checks. Responses never carry an aggregate: a
verdict names the failed checks with reasons that cite public bounds only.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dpledger.approval import MAX_COHORT, MAX_EPOCH, ReleaseRequest, Verdict
from dpledger.ledger import Entry, Release
from dpledger.types import MAX_DIMENSION, Budget, Unit

__all__ = [
    "MAX_AGGREGATE_VALUES",
    "UNAVAILABLE",
    "BudgetOut",
    "CheckBody",
    "CheckOut",
    "EntryOut",
    "ErrorOut",
    "FieldError",
    "PlanBody",
    "RefusedBudget",
    "ReleaseBody",
    "ReleaseOut",
    "VerdictOut",
    "budget_out",
    "entry_out",
    "release_out",
    "verdict_out",
]

MAX_AGGREGATE_VALUES = MAX_DIMENSION
"""The most numbers an aggregate may hold: the largest dimension a policy admits (a
histogram's bins are not held to it: the service refuses at start a policy with more)."""

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
Aggregate = FiniteFloat | Annotated[list[FiniteFloat], Field(max_length=MAX_AGGREGATE_VALUES)]


class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class CheckBody(_Body):
    """A dry run: every approval check for ``request`` and ``aggregate``; nothing is spent."""

    request: ReleaseRequest
    aggregate: Aggregate = Field(description="the secure sum: a number, or an array of numbers")


class ReleaseBody(CheckBody):
    """A release: checked, charged, noised and recorded; its principal is the caller's key."""

    aggregate_error: Annotated[float, Field(ge=0.0, allow_inf_nan=False)] = Field(
        default=0.0,
        description="a public bound on the aggregate's error per coordinate (e.g. a "
        "fixed-point secure sum's n quanta: FixedPoint.sum_error(n)), added to the "
        "returned bar (post-processing; the recorded entry is the same)",
    )


class PlanBody(_Body):
    """A plan of one epoch's releases for the given cohorts, against the ledger's spend."""

    cohorts: Annotated[
        dict[
            Annotated[str, Field(min_length=1, max_length=64)],
            Annotated[int, Field(ge=1, le=MAX_COHORT)],
        ],
        Field(min_length=1, max_length=256, description="planned clients per region"),
    ]
    epoch: int = Field(default=0, ge=0, le=MAX_EPOCH)
    rounds: int | None = Field(default=None, ge=1, le=100_000)


class CheckOut(BaseModel):
    """One named approval check."""

    name: str
    status: Literal["pass", "FAIL", "skipped"]
    reason: str


class VerdictOut(BaseModel):
    """Every check for one request; ``approved`` is their conjunction."""

    approved: bool
    request: ReleaseRequest
    charge: str | None = Field(description="exact cost as 'p/q' text, in `unit`")
    unit: Unit
    checks: list[CheckOut]


class BudgetOut(BaseModel):
    """An exact amount of privacy loss: ``amount`` is ``'p/q'`` text, ``value`` a float."""

    unit: Unit
    amount: str
    value: float


class RefusedBudget(BaseModel):
    """What a budget refusal found: the request's cost against the binding scope."""

    requested: BudgetOut
    spent: BudgetOut
    remaining: BudgetOut
    scope: str


class FieldError(BaseModel):
    """One invalid field of a request (its input is never echoed)."""

    loc: list[str | int]
    msg: str
    type: str


class ErrorOut(BaseModel):
    """Every error: a code, a message, the failed checks by name, and the verdict if any."""

    error: str = Field(description="e.g. budget_exceeded, invalid_aggregate, not_permitted")
    message: str
    failed_checks: list[str] = Field(default_factory=list)
    verdict: VerdictOut | None = None
    budget: RefusedBudget | None = None
    errors: list[FieldError] | None = None


class ReleaseOut(BaseModel):
    """A committed release (or, for a retried id, the recorded one) and who spent it."""

    entry_id: int
    entry_hash: str
    metric: str
    epoch: int
    region: str
    cohort: int
    value: float | list[float]
    error_bar: float
    bar: str
    scale: float
    charge: str
    unit: Unit
    release_id: str | None
    principal: str
    retried: bool = Field(
        default=False,
        description="the release id was recorded by an earlier call: this one charged nothing",
    )


class EntryOut(BaseModel):
    """One ledger entry, as the audit trail records it."""

    entry_id: int
    created_at: str
    epoch: int
    region: str
    metric: str
    policy: dict[str, str]
    edges_version: str | None
    mechanism: dict[str, Any]
    unit: Unit
    charge: str
    cohort: int
    output: list[float]
    release_id: str | None
    request_hash: str | None
    principal: str | None
    prev_hash: str
    hash: str


def budget_out(b: Budget) -> BudgetOut:
    """The wire form of a :class:`Budget`."""
    return BudgetOut(unit=b.unit, amount=b.text, value=float(b))


def verdict_out(v: Verdict) -> VerdictOut:
    """The wire form of a :class:`Verdict` (no aggregate: reasons cite public bounds)."""
    return VerdictOut(
        approved=v.approved,
        request=v.request,
        charge=None if v.charge is None else v.charge.text,
        unit=v.unit,
        checks=[CheckOut(name=c.name, status=c.status, reason=c.reason) for c in v.checks],
    )


def release_out(r: Release, principal: str) -> ReleaseOut:
    """The wire form of a :class:`Release`."""
    v = r.value
    return ReleaseOut(
        entry_id=r.entry_id,
        entry_hash=r.entry_hash,
        metric=r.request.metric,
        epoch=r.request.epoch,
        region=r.request.region,
        cohort=r.request.cohort,
        value=v if isinstance(v, float) else [float(x) for x in v],
        error_bar=r.error_bar,
        bar=r.bar,
        scale=r.scale,
        charge=r.charge.text,
        unit=r.unit,
        release_id=r.release_id,
        principal=principal,
        retried=r.retried,
    )


def entry_out(e: Entry) -> EntryOut:
    """The wire form of an :class:`Entry`."""
    return EntryOut.model_validate(e.as_dict())


UNAVAILABLE = {
    False: "the ledger's database is unavailable or busy; the request may not have "
    "completed: retry it (a release with the same Idempotency-Key is never charged twice)",
    True: "the ledger's database did not confirm the release's COMMIT: it may have been "
    "recorded, its ε spent; retry with the same Idempotency-Key to get it (a retry "
    "without one is charged again)",
}
"""A 503's message, by whether the outcome is unknown (``CommitUnknown``) or nothing ran."""

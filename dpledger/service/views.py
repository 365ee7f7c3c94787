"""The API's views: budgets, epochs, entries, head, verify, lifetime, policy, refusal log.

Each needs the ``read`` action, except ``verify`` (its own action: it re-derives every
charge, so its cost grows with the ledger). None writes anything. An unknown region in a
path is 404; an epoch with no releases is 404 for its record, and its whole budget in the
budget view.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Security
from pydantic import BaseModel

from dpledger.approval import MAX_EPOCH
from dpledger.errors import InvalidInput, UnknownResource
from dpledger.ledger import Ledger
from dpledger.ledger.regions import admits, epoch_budgets, epoch_regions
from dpledger.policy import ALL
from dpledger.service.models import BudgetOut, EntryOut, budget_out, entry_out
from dpledger.service.routes import bearer, error_responses, needs, service_state
from dpledger.types import Budget

__all__ = ["router"]

router = APIRouter(prefix="/v1", dependencies=[Security(bearer)])

Epoch = Annotated[int, Path(ge=0, le=MAX_EPOCH, description="evaluation epoch")]
Region = Annotated[str, Path(min_length=1, max_length=64, description="a region, or '*'")]


def _epoch_region(ledger: Ledger, epoch: int, region: str) -> str:
    """404 for a region neither the policy nor the one ``epoch`` is bound to has."""
    if not admits(ledger, epoch, region):
        known = list(epoch_regions(ledger, epoch)) or "any region name (open regions)"
        raise UnknownResource(f"unknown region {region!r}; epoch {epoch}'s regions: {known}")
    return region


# -- budget views ----------------------------------------------------------------------


class RegionBudget(BaseModel):
    """What a client of ``region`` has lost in an epoch, and has left."""

    region: str
    spent: BudgetOut
    remaining: BudgetOut


class EpochBudget(BaseModel):
    """An epoch's budget per region (``'*'``: the worst region's client)."""

    epoch: int
    opened: bool
    eval_budget: BudgetOut
    regions: list[RegionBudget]


class MetricSpend(BaseModel):
    """What one metric used of a region's epoch budget."""

    metric: str
    spent: BudgetOut


class RegionDetail(RegionBudget):
    """One region's epoch budget, and each metric's share of its spend."""

    epoch: int
    metrics: list[MetricSpend]


@router.get(
    "/budget/{epoch}",
    response_model=EpochBudget,
    responses=error_responses(),
    openapi_extra=needs("read"),
    summary="Spent and remaining budget per region in an epoch",
)
def budget(epoch: Epoch, request: Request) -> EpochBudget:
    """Any epoch: one with no releases yet has its whole budget left (``opened`` false)."""
    state = service_state(request)
    with state.ledger() as ledger:
        rows = [  # one read of the epoch's spend (per region it was quadratic: review 42)
            RegionBudget(region=r, spent=budget_out(spent), remaining=budget_out(left))
            for r, spent, left in epoch_budgets(ledger, epoch)
        ]
        opened = epoch in ledger.epochs()
        policy = ledger.epoch_policy(epoch) or state.policy  # the epoch's own budget
    eval_budget = budget_out(Budget(policy.eval_budget, policy.unit))
    return EpochBudget(epoch=epoch, opened=opened, eval_budget=eval_budget, regions=rows)


@router.get(
    "/budget/{epoch}/{region}",
    response_model=RegionDetail,
    responses=error_responses(404),
    openapi_extra=needs("read"),
    summary="One region's budget in an epoch, with each metric's spend",
)
def region_budget(epoch: Epoch, region: Region, request: Request) -> RegionDetail:
    """404 for a region neither the policy nor the one the epoch is bound to has."""
    state = service_state(request)
    with state.ledger() as ledger:
        _epoch_region(ledger, epoch, region)
        bound = ledger.epoch_policy(epoch) or state.policy  # the epoch's own metrics
        metrics = [
            MetricSpend(metric=m, spent=budget_out(ledger.metric_spent(epoch, region, m)))
            for m in bound.metrics
        ]
        return RegionDetail(
            epoch=epoch,
            region=region,
            spent=budget_out(ledger.spent(epoch, region)),
            remaining=budget_out(ledger.remaining(epoch, region)),
            metrics=metrics,
        )


class Epochs(BaseModel):
    """The epochs with at least one release, ascending."""

    epochs: list[int]


class EpochRecord(BaseModel):
    """An opened epoch: the policy it is bound to and its raw spend per region."""

    epoch: int
    policy_version: str
    policy_hash: str
    spent_by_region: dict[str, BudgetOut]
    worst_client: BudgetOut


@router.get(
    "/epochs",
    response_model=Epochs,
    responses=error_responses(),
    openapi_extra=needs("read"),
    summary="Epochs that have releases",
)
def epochs(request: Request) -> Epochs:
    """Ascending."""
    with service_state(request).ledger() as ledger:
        return Epochs(epochs=list(ledger.epochs()))


@router.get(
    "/epochs/{epoch}",
    response_model=EpochRecord,
    responses=error_responses(404),
    openapi_extra=needs("read"),
    summary="An opened epoch: its policy and spend (404 if it has no releases)",
)
def epoch_record(epoch: Epoch, request: Request) -> EpochRecord:
    """404 for an epoch with no releases (its whole budget remains: see ``/v1/budget``)."""
    with service_state(request).ledger() as ledger:
        first = ledger.entries(epoch=epoch, limit=1)
        if not first:
            raise UnknownResource(
                f"epoch {epoch} has no releases yet: every client has its whole budget; "
                "GET /v1/epochs lists the epochs that have releases"
            )
        d = first[0].draft
        return EpochRecord(
            epoch=epoch,
            policy_version=d.policy_version,
            policy_hash=d.policy_hash,
            spent_by_region={r: budget_out(b) for r, b in ledger.spent_by_region(epoch).items()},
            worst_client=budget_out(ledger.spent(epoch)),
        )


# -- the audit trail -------------------------------------------------------------------


class EntriesPage(BaseModel):
    """A page of entries; ask again with ``after=next_after`` until it is null."""

    entries: list[EntryOut]
    next_after: int | None


@router.get(
    "/entries",
    response_model=EntriesPage,
    responses=error_responses(),
    openapi_extra=needs("read"),
    summary="The ledger's entries in chain order, paged and filtered",
)
def entries(
    request: Request,
    epoch: Annotated[int | None, Query(ge=0, le=MAX_EPOCH)] = None,
    region: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
    metric: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
    after: Annotated[int, Query(ge=0, le=MAX_EPOCH, description="entry id to start after")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> EntriesPage:
    """Entries after ``after``, at most ``limit``, optionally of one epoch/region/metric."""
    with service_state(request).ledger() as ledger:
        found = ledger.entries(epoch=epoch, region=region, metric=metric, after=after, limit=limit)
    next_after = found[-1].entry_id if len(found) == limit else None
    return EntriesPage(entries=[entry_out(e) for e in found], next_after=next_after)


class Head(BaseModel):
    """The chain head: keep ``anchor`` outside the database, verify against it later."""

    entry_id: int
    hash: str
    anchor: str


@router.get(
    "/head",
    response_model=Head,
    responses=error_responses(),
    openapi_extra=needs("read"),
    summary="The chain head (last entry id and hash), for anchoring",
)
def head(request: Request) -> Head:
    """``anchor`` is ``ENTRY_ID:HASH``, what ``dpledger ledger verify --expected-head`` takes."""
    with service_state(request).ledger() as ledger:
        seq, digest = ledger.head()
    return Head(entry_id=seq, hash=digest, anchor=f"{seq}:{digest}")


class VerifyOut(BaseModel):
    """The audit's result: ``ok`` iff there are no problems."""

    ok: bool
    entries_checked: int
    problems: list[str]
    notices: list[str]
    head: Head


@router.get(
    "/verify",
    response_model=VerifyOut,
    responses=error_responses(),
    openapi_extra=needs("verify"),
    summary="Verify the hash chain, every recorded policy and every charge",
)
def verify(
    request: Request,
    expected_head: Annotated[
        str | None,
        Query(pattern=r"^[0-9]{1,19}:[0-9a-f]{64}$", description="ENTRY_ID:HASH kept outside"),
    ] = None,
) -> VerifyOut:
    """Re-derives every charge through OpenDP: its cost grows with the ledger."""
    anchor = None
    if expected_head is not None:
        anchor_id, _, anchor_hash = expected_head.partition(":")
        anchor = (int(anchor_id), anchor_hash)
        if anchor[0] > MAX_EPOCH:  # 19 digits pass the pattern; no entry id is this large
            raise InvalidInput(
                f"expected_head's entry id {anchor_id} is past the largest an entry can have "
                f"({MAX_EPOCH}): copy ID:HASH as GET /v1/head gives it"
            )
    with service_state(request).ledger() as ledger:
        seq, digest = ledger.head(checked=False)  # as recorded: the report names any damage
        report = ledger.verify(expected_head=anchor)
    return VerifyOut(
        ok=report.ok,
        entries_checked=report.entries_checked,
        problems=list(report.problems),
        notices=list(report.notices),
        head=Head(entry_id=seq, hash=digest, anchor=f"{seq}:{digest}"),
    )


@router.get(
    "/lifetime/{region}",
    responses=error_responses(404),
    openapi_extra=needs("read"),
    summary="A client's (on a record-level ledger, a person's) total loss over all epochs",
)
def lifetime(
    region: Region,
    request: Request,
    delta: Annotated[float | None, Query(gt=0, lt=1, allow_inf_nan=False)] = None,
) -> dict[str, Any]:
    """The unit's lifetime loss (``privacy_unit`` in the answer), with (ε, δ) views;
    ``region='*'``: the worst client or person, who may change region between epochs."""
    state = service_state(request)
    with state.ledger() as ledger:
        try:  # a region a later version removed still has its recorded spend
            return ledger.lifetime(region, delta=delta).as_dict()
        except InvalidInput as e:
            if region != ALL and not state.policy.regions.admits(region):
                raise UnknownResource(str(e)) from None  # 404, as for the budget views
            raise


@router.get(
    "/policy",
    responses=error_responses(),
    openapi_extra=needs("read"),
    summary="The policy the service approves against, and its content hash",
)
def policy(request: Request) -> dict[str, Any]:
    """Public configuration: budgets, regions, metrics and their clip bounds."""
    p = service_state(request).policy
    return {"content_hash": p.content_hash, "policy": p.model_dump(mode="json")}


@router.get(
    "/refusals",
    responses=error_responses(),
    openapi_extra=needs("read"),
    summary="Recent refusals (operator log, not the ledger): principal and failed checks",
)
def refusals(
    request: Request, limit: Annotated[int, Query(ge=1, le=500)] = 50
) -> dict[str, list[dict[str, object]]]:
    """Newest first; public request fields and the names of the failed checks only."""
    return {"refusals": [r.as_dict() for r in service_state(request).store.refusals(limit)]}

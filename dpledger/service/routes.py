"""The versioned JSON API (``/v1/``): check, release, plan, budgets, entries, audit, keys.

Each operation names the action its key needs in its OpenAPI entry (``x-dpledger-action``),
which the gate checks before the body is read. Endpoints are plain ``def``: FastAPI runs
them in its thread pool, each borrowing one ledger connection.
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Header, Path, Query, Request, Security
from fastapi.security import HTTPBearer
from pydantic import BaseModel

from dpledger.approval import MAX_EPOCH, ReleaseRequest, refusal
from dpledger.errors import InvalidInput, UnknownResource
from dpledger.ledger import Ledger
from dpledger.planning import plan
from dpledger.policy import ALL
from dpledger.service.app import ACTION_KEY, ANY_KEY, caller
from dpledger.service.keys import Action, ApiKey
from dpledger.service.models import (
    BudgetOut,
    CheckBody,
    EntryOut,
    ErrorOut,
    PlanBody,
    ReleaseBody,
    ReleaseOut,
    VerdictOut,
    budget_out,
    entry_out,
    release_out,
    verdict_out,
)
from dpledger.service.state import ServiceState
from dpledger.types import Budget

__all__ = ["public", "router"]

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="`Authorization: Bearer dpl_<key id>_<secret>` (`dpledger keys create`)",
)
router = APIRouter(prefix="/v1", dependencies=[Security(_bearer)])
public = APIRouter(prefix="/v1")

_E = {"model": ErrorOut}
_WHY = {
    400: "the body is not decodable (not UTF-8, or nested too deeply)",
    401: "no valid API key (missing, malformed, unknown, wrong or revoked)",
    403: "the key lacks the action, region or metric this request needs",
    404: "an unknown region, epoch or key",
    409: "refused: budget, allocation, cohort floor, epoch policy or a reused release id",
    413: "the body is larger than the service's limit",
    422: "invalid input: a field, an unknown metric or region, a malformed aggregate",
    503: "the ledger's database is unavailable or busy: retry",
}


def _responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    out: dict[int | str, dict[str, Any]] = {}
    for code in (401, 403, 422, 503, *codes):
        if code == 413:
            out[413] = {
                "description": _WHY[413],
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        else:
            out[code] = {**_E, "description": _WHY[code]}
    return out


def _needs(action: Action | None) -> dict[str, Any]:
    """The operation's OpenAPI extension naming its action (None: any valid key)."""
    return {ACTION_KEY: action or ANY_KEY}


def _state(request: Request) -> ServiceState:
    state: ServiceState = request.app.state.service
    return state


def _regions(state: ServiceState, ledger: Ledger, epoch: int | None = None) -> list[str]:
    names = list(state.policy.regions.names)
    if not names and epoch is not None:  # open regions: those the epoch has spent in
        names = sorted(r for r in ledger.spent_by_region(epoch) if r != ALL)
    return [*names, ALL]


def _known_region(state: ServiceState, region: str) -> str:
    if region != ALL and not state.policy.regions.admits(region):
        known = list(state.policy.regions.names) or "any region name (open regions)"
        raise UnknownResource(f"unknown region {region!r}; this policy's regions: {known}")
    return region


Epoch = Annotated[int, Path(ge=0, le=MAX_EPOCH, description="evaluation epoch")]
Region = Annotated[str, Path(min_length=1, max_length=64, description="a region, or '*'")]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        pattern=r"^[!-~]{1,128}$",
        description="the release id: a retry with the same key, request and aggregate "
        "returns the recorded release (no new noise, no second charge)",
    ),
]


# -- release approval ----------------------------------------------------------------


def _scoped(request: Request, action: Action, req: ReleaseRequest) -> ApiKey:
    key = caller(request)
    request.scope.setdefault("state", {})["subject"] = (action, req)  # for the refusal log
    key.require(action, req.region, req.metric)
    return key


@router.post(
    "/check",
    response_model=VerdictOut,
    responses=_responses(400, 409, 413),
    openapi_extra=_needs("check"),
    summary="Dry-run every approval check; nothing is spent",
)
def check(body: CheckBody, request: Request) -> VerdictOut:
    """The verdict a release would get now: 200 if approved, else the release's status
    (409 or 422) with the same verdict. Nothing is spent or recorded."""
    _scoped(request, "check", body.request)
    with _state(request).ledger() as ledger:
        verdict = ledger.check(body.request, np.asarray(body.aggregate, dtype=np.float64))
    if not verdict.approved:
        raise refusal(verdict)
    return verdict_out(verdict)


@router.post(
    "/releases",
    status_code=201,
    response_model=ReleaseOut,
    responses=_responses(400, 409, 413),
    openapi_extra=_needs("release"),
    summary="Release: check, charge, add OpenDP noise, record (with the caller's principal)",
)
def release(
    body: ReleaseBody, request: Request, idempotency_key: IdempotencyKey = None
) -> ReleaseOut:
    """Check, atomically charge, add OpenDP noise and record. The entry records the key's
    principal inside the hash chain. With ``Idempotency-Key`` (or ``release_id``) a retry
    returns the recorded release; the same id from another principal, or with another
    request, is a 409 conflict."""
    req = body.request
    if idempotency_key is not None:
        if req.release_id not in (None, idempotency_key):
            raise InvalidInput(
                "the Idempotency-Key header and the request's release_id differ: send one, "
                "or the same value in both"
            )
        req = ReleaseRequest(**{**req.model_dump(), "release_id": idempotency_key})
    key = _scoped(request, "release", req)
    with _state(request).ledger() as ledger:
        done = ledger.release(
            req, np.asarray(body.aggregate, dtype=np.float64), principal=key.principal
        )
    return release_out(done, key.principal)


@router.post(
    "/plan",
    responses=_responses(400, 413),
    openapi_extra=_needs("read"),
    summary="Plan an epoch's releases for given cohorts, against the ledger's spend",
)
def plan_epoch(body: PlanBody, request: Request) -> dict[str, Any]:
    """Per region × metric: cost, noise, error bar, cohort floor, what fits (public only)."""
    state = _state(request)
    with state.ledger() as ledger:
        made = plan(state.policy, body.cohorts, body.rounds, ledger=ledger, epoch=body.epoch)
    result: dict[str, Any] = made.model_dump(mode="json")
    return result


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
    responses=_responses(),
    openapi_extra=_needs("read"),
    summary="Spent and remaining budget per region in an epoch",
)
def budget(epoch: Epoch, request: Request) -> EpochBudget:
    """Any epoch: one with no releases yet has its whole budget left (``opened`` false)."""
    state = _state(request)
    with state.ledger() as ledger:
        rows = [
            RegionBudget(
                region=r,
                spent=budget_out(ledger.spent(epoch, r)),
                remaining=budget_out(ledger.remaining(epoch, r)),
            )
            for r in _regions(state, ledger, epoch)
        ]
        opened = epoch in ledger.epochs()
    eval_budget = budget_out(_eval_budget(state))
    return EpochBudget(epoch=epoch, opened=opened, eval_budget=eval_budget, regions=rows)


def _eval_budget(state: ServiceState) -> Budget:
    return Budget(state.policy.eval_budget, state.policy.unit)


@router.get(
    "/budget/{epoch}/{region}",
    response_model=RegionDetail,
    responses=_responses(404),
    openapi_extra=_needs("read"),
    summary="One region's budget in an epoch, with each metric's spend",
)
def region_budget(epoch: Epoch, region: Region, request: Request) -> RegionDetail:
    """404 for a region the policy does not have."""
    state = _state(request)
    _known_region(state, region)
    with state.ledger() as ledger:
        metrics = [
            MetricSpend(metric=m, spent=budget_out(ledger.metric_spent(epoch, region, m)))
            for m in state.policy.metrics
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
    responses=_responses(),
    openapi_extra=_needs("read"),
    summary="Epochs that have releases",
)
def epochs(request: Request) -> Epochs:
    """Ascending."""
    with _state(request).ledger() as ledger:
        return Epochs(epochs=list(ledger.epochs()))


@router.get(
    "/epochs/{epoch}",
    response_model=EpochRecord,
    responses=_responses(404),
    openapi_extra=_needs("read"),
    summary="An opened epoch: its policy and spend (404 if it has no releases)",
)
def epoch_record(epoch: Epoch, request: Request) -> EpochRecord:
    """404 for an epoch with no releases (its whole budget remains: see ``/v1/budget``)."""
    with _state(request).ledger() as ledger:
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
    responses=_responses(),
    openapi_extra=_needs("read"),
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
    with _state(request).ledger() as ledger:
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
    responses=_responses(),
    openapi_extra=_needs("read"),
    summary="The chain head (last entry id and hash), for anchoring",
)
def head(request: Request) -> Head:
    """``anchor`` is ``ENTRY_ID:HASH``, what ``dpledger ledger verify --expected-head`` takes."""
    with _state(request).ledger() as ledger:
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
    responses=_responses(),
    openapi_extra=_needs("verify"),
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
    with _state(request).ledger() as ledger:
        seq, digest = ledger.head()
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
    responses=_responses(404),
    openapi_extra=_needs("read"),
    summary="A client's total loss over all epochs, with (ε, δ) views",
)
def lifetime(
    region: Region,
    request: Request,
    delta: Annotated[float | None, Query(gt=0, lt=1, allow_inf_nan=False)] = None,
) -> dict[str, Any]:
    """``region='*'``: the worst client, who may change region between epochs."""
    state = _state(request)
    _known_region(state, region)
    with state.ledger() as ledger:
        return ledger.lifetime(region, delta=delta).as_dict()


@router.get(
    "/policy",
    responses=_responses(),
    openapi_extra=_needs("read"),
    summary="The policy the service approves against, and its content hash",
)
def policy(request: Request) -> dict[str, Any]:
    """Public configuration: budgets, regions, metrics and their clip bounds."""
    p = _state(request).policy
    return {"content_hash": p.content_hash, "policy": p.model_dump(mode="json")}


@router.get(
    "/refusals",
    responses=_responses(),
    openapi_extra=_needs("read"),
    summary="Recent refusals (operator log, not the ledger): principal and failed checks",
)
def refusals(
    request: Request, limit: Annotated[int, Query(ge=1, le=500)] = 50
) -> dict[str, list[dict[str, object]]]:
    """Newest first; public request fields and the names of the failed checks only."""
    return {"refusals": [r.as_dict() for r in _state(request).store.refusals(limit)]}


# -- keys ------------------------------------------------------------------------------

KeyId = Annotated[str, Path(pattern=r"^[0-9a-f]{12}$", description="a key's id (not secret)")]


@router.get(
    "/whoami",
    responses=_responses(),
    openapi_extra=_needs(None),
    summary="The calling key: its id, principal and scopes",
)
def whoami(request: Request) -> dict[str, object]:
    """Any valid key may ask."""
    return caller(request).as_dict()


@router.get(
    "/keys",
    responses=_responses(),
    openapi_extra=_needs("admin"),
    summary="Every key (no secrets), revoked ones marked",
)
def keys(request: Request) -> dict[str, list[dict[str, object]]]:
    """Oldest first."""
    return {"keys": [k.as_dict() for k in _state(request).store.list_keys()]}


@router.post(
    "/keys/{key_id}/revoke",
    responses=_responses(404),
    openapi_extra=_needs("admin"),
    summary="Revoke a key now, for every replica",
)
def revoke(key_id: KeyId, request: Request) -> dict[str, object]:
    """Idempotent: revoking a revoked key keeps its first revocation time."""
    return _state(request).store.revoke(key_id).as_dict()


# -- health ----------------------------------------------------------------------------


@public.get(
    "/health",
    responses={503: {**_E, "description": _WHY[503]}},
    summary="Liveness: the service runs and reaches its ledger (no key needed)",
)
def health(request: Request) -> dict[str, str]:
    """Reads the chain head; says nothing about the ledger beyond ``ok``."""
    with _state(request).ledger() as ledger:
        ledger.head()
    return {"status": "ok"}

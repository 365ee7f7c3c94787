"""The versioned JSON API (``/v1/``): check, release, plan, keys, health, and the helpers
every route shares (the budget and audit views are in :mod:`dpledger.service.views`).

Each operation names the action its key needs in its OpenAPI entry (``x-dpledger-action``),
which the gate checks before the body is read. Endpoints are plain ``def``: FastAPI runs
them in its thread pool, each borrowing one ledger connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Depends, Header, Path, Request, Response, Security
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from pydantic import ValidationError

from dpledger._files import json_numbers, strict_json
from dpledger.approval import ReleaseRequest, refusal
from dpledger.errors import InvalidInput, NotPermitted
from dpledger.ledger import Ledger
from dpledger.planning import plan
from dpledger.service.app import ACTION_KEY, ANY_KEY, caller
from dpledger.service.keys import Action, ApiKey
from dpledger.service.models import (
    CheckBody,
    ErrorOut,
    PlanBody,
    ReleaseBody,
    ReleaseOut,
    VerdictOut,
    release_out,
    verdict_out,
)
from dpledger.service.state import ServiceState

__all__ = [
    "bearer",
    "error_responses",
    "needs",
    "public",
    "router",
    "scope_first",
    "service_state",
]


class _BodyRequest(Request):
    """A request whose JSON body reads an integer past Python's digit limit as ±inf (a
    number no double holds, refused by validation as not finite), so such a body reaches
    the scope check and validation instead of failing FastAPI's parse with a bare 400."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = json_numbers(await self.body())
        return self._json


class _BodyRoute(APIRoute):
    """A route that hands its handler a :class:`_BodyRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(_BodyRequest(request.scope, request.receive))

        return route


bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="`Authorization: Bearer dpl_<key id>_<secret>` (`dpledger keys create`)",
)
router = APIRouter(prefix="/v1", dependencies=[Security(bearer)], route_class=_BodyRoute)
public = APIRouter(prefix="/v1")

_E = {"model": ErrorOut}
_WHY = {
    400: "the body cannot be parsed (nested too deeply)",
    401: "no valid API key (missing, malformed, unknown, wrong or revoked)",
    403: "the key lacks the action, region or metric this request needs",
    404: "an unknown region, epoch or key",
    409: "refused: budget, allocation, cohort floor, epoch policy or a reused release id",
    413: "the body is larger than the service's limit",
    422: "invalid input: a field, an unknown metric or region, a malformed aggregate",
    503: "the ledger's database is unavailable or busy: retry",
}


_RETRY = {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error statuses an operation declares: 401, 403, 422, 503 and ``codes``."""
    out: dict[int | str, dict[str, Any]] = {}
    for code in (401, 403, 422, 503, *codes):  # a 413 is JSON too (BodyLimit), not text
        out[code] = {**_E, "description": _WHY[code]}
    out[503]["headers"] = _RETRY
    return out


def needs(action: Action | None) -> dict[str, Any]:
    """The operation's OpenAPI extension naming its action (None: any valid key)."""
    return {ACTION_KEY: action or ANY_KEY}


def service_state(request: Request) -> ServiceState:
    """The process's :class:`ServiceState` (its ledger connections and key store)."""
    state: ServiceState = request.app.state.service
    return state


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


_NAMED = ("region", "metric")


def scope_first(action: Action) -> Callable[[Request], Awaitable[None]]:
    """A dependency deciding the key's region and metric scopes before the body is validated.

    It reads only the request's public ``region`` and ``metric`` (as sent, each one that is
    a string), so an out-of-scope key gets 403, and a line in the refusal log, whatever
    else the body holds: the answer to "may this key spend there?" never waits on, or
    depends on, the aggregate. A body too broken to name either is left to validation.
    """

    async def check_scope(request: Request) -> None:
        key = caller(request)
        try:
            # numbers=True: an integer past Python's digit limit reads as ±inf (refused by
            # validation later), so the scope is decided for any digits (review s28, R4)
            data = strict_json(await request.body(), numbers=True)  # cached by Starlette
        except ValueError as e:
            if "appears twice" in str(e):  # JSON keeps the last silently: refused
                raise InvalidInput(f"request body: {e}; send each field once") from None
            return  # not JSON at all: left to validation
        except RecursionError:
            return  # nested too deeply: left to validation, which refuses it
        fields = data.get("request") if isinstance(data, dict) else None
        if not isinstance(fields, dict):
            return
        # each as sent when it is a string: a region out of scope is a 403 whatever the
        # metric holds (or lacks), and the other way round
        region, metric = (v if isinstance(v, str) else None for v in map(fields.get, _NAMED))
        if key.scopes.missing(action, region, metric) is None:
            return
        try:  # the refusal log keeps the request's public fields when they are valid
            req: ReleaseRequest | None = ReleaseRequest.model_validate(fields)
        except (ValidationError, InvalidInput):  # dpledger's models raise InvalidInput
            req = None
        request.scope.setdefault("state", {})["subject"] = (action, req)
        key.require(action, region, metric)

    return check_scope


async def unique_keys(request: Request) -> None:
    """A dependency refusing a body that names a key twice (JSON keeps the last silently),
    as :func:`scope_first` does for check and release; anything else is left to validation."""
    try:
        strict_json(await request.body(), numbers=True)
    except ValueError as e:
        if "appears twice" in str(e):
            raise InvalidInput(f"request body: {e}; send each field once") from None
    except RecursionError:
        pass


def _scoped(request: Request, action: Action, req: ReleaseRequest) -> ApiKey:
    key = caller(request)
    request.scope.setdefault("state", {})["subject"] = (action, req)  # for the refusal log
    key.require(action, req.region, req.metric)
    return key


def _opens(ledger: Ledger, key: ApiKey, action: Action, req: ReleaseRequest) -> None:
    """A key scoped to some regions or metrics releases in no epoch past the next one:
    an epoch's first release binds it, for every region and metric, to the policy version
    served then, so one narrow key releasing once in epoch 5000 decided that epoch's policy
    for every team (review 40). Opening an epoch further ahead takes a key with every
    region's and metric's scope; a ledger's first release, and any earlier epoch, are open
    to any key. The epochs opened are public (``GET /v1/epochs``); ``check`` decides as
    the release would."""
    if key.scopes.regions is None and key.scopes.metrics is None:
        return
    opened = ledger.epochs()
    if not opened or req.epoch <= opened[-1] + 1:
        return
    raise NotPermitted(
        f"key {key.key_id} ({key.name}) may not {action} in epoch {req.epoch}: a key scoped "
        f"to some regions or metrics releases up to the epoch after the newest opened "
        f"({opened[-1] + 1}); a first release in epoch {req.epoch} would bind it, for every "
        f"region and metric, to policy version {ledger.policy.version}. Release in an epoch "
        f"up to {opened[-1] + 1}, or ask a key with every region's and metric's scope to "
        "open it",
        key_id=key.key_id,
        action=action,
        missing=f"epoch {req.epoch} (opened up to {opened[-1]})",
    )


@router.post(
    "/check",
    response_model=VerdictOut,
    responses=error_responses(400, 409, 413),
    openapi_extra=needs("check"),
    dependencies=[Depends(scope_first("check"))],
    summary="Dry-run every approval check; nothing is spent",
)
def check(body: CheckBody, request: Request) -> VerdictOut:
    """The verdict a release would get now: 200 if approved, else the release's status
    (409 or 422) with the same verdict. Nothing is spent or recorded."""
    key = _scoped(request, "check", body.request)
    with service_state(request).ledger() as ledger:
        _opens(ledger, key, "check", body.request)
        aggregate = np.asarray(body.aggregate, dtype=np.float64)
        verdict = ledger.check(body.request, aggregate, principal=key.principal)
    if not verdict.approved:
        raise refusal(verdict)
    return verdict_out(verdict)


@router.post(
    "/releases",
    status_code=201,
    response_model=ReleaseOut,
    responses=error_responses(400, 409, 413),
    openapi_extra=needs("release"),
    dependencies=[Depends(scope_first("release"))],
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
    if len(request.headers.getlist("idempotency-key")) > 1:  # only the first would count
        raise InvalidInput(
            "the Idempotency-Key header is given more than once: give it once (a retry "
            "must name the same release id, whichever copy a proxy keeps)"
        )
    if idempotency_key is not None:
        if req.release_id not in (None, idempotency_key):
            raise InvalidInput(
                "the Idempotency-Key header and the request's release_id differ: send one, "
                "or the same value in both"
            )
        req = ReleaseRequest(**{**req.model_dump(), "release_id": idempotency_key})
    key = _scoped(request, "release", req)
    with service_state(request).ledger() as ledger:
        _opens(ledger, key, "release", req)
        done = ledger.release(
            req, np.asarray(body.aggregate, dtype=np.float64), principal=key.principal
        )
    return release_out(done.with_aggregate_error(body.aggregate_error), key.principal)


@router.post(
    "/plan",
    responses=error_responses(400, 413),
    openapi_extra=needs("read"),
    dependencies=[Depends(unique_keys)],
    summary="Plan an epoch's releases for given cohorts, against the ledger's spend",
)
def plan_epoch(body: PlanBody, request: Request) -> dict[str, Any]:
    """Per region × metric: cost, noise, error bar, cohort floor, what fits (public only)."""
    state = service_state(request)
    with state.ledger() as ledger:
        made = plan(state.policy, body.cohorts, body.rounds, ledger=ledger, epoch=body.epoch)
    result: dict[str, Any] = made.model_dump(mode="json")
    return result


# -- keys ------------------------------------------------------------------------------

KeyId = Annotated[str, Path(pattern=r"^[0-9a-f]{12}$", description="a key's id (not secret)")]


@router.get(
    "/whoami",
    responses=error_responses(),
    openapi_extra=needs(None),
    summary="The calling key: its id, principal and scopes",
)
def whoami(request: Request) -> dict[str, object]:
    """Any valid key may ask."""
    return caller(request).as_dict()


@router.get(
    "/keys",
    responses=error_responses(),
    openapi_extra=needs("admin"),
    summary="Every key (no secrets), revoked ones marked",
)
def keys(request: Request) -> dict[str, list[dict[str, object]]]:
    """Oldest first."""
    return {"keys": [k.as_dict() for k in service_state(request).store.list_keys()]}


@router.post(
    "/keys/{key_id}/revoke",
    responses=error_responses(404),
    openapi_extra=needs("admin"),
    summary="Revoke a key now, for every replica",
)
def revoke(key_id: KeyId, request: Request) -> dict[str, object]:
    """Idempotent: revoking a revoked key keeps its first revocation time."""
    return service_state(request).store.revoke(key_id).as_dict()


# -- health ----------------------------------------------------------------------------


@public.get(
    "/health",
    responses={503: {**_E, "description": _WHY[503], "headers": _RETRY}},
    summary="Liveness: the service runs and reaches its ledger (no key needed)",
)
def health(request: Request) -> dict[str, str]:
    """Reads the chain head; says nothing about the ledger beyond ``ok``."""
    with service_state(request).ledger() as ledger:
        ledger.head(checked=False)  # reachable and readable; /v1/verify judges the chain
    return {"status": "ok"}

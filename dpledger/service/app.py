"""The ASGI application: :func:`create_app`, its error mapping and its gate.

Order of what a request meets, outermost first:

1. :class:`BodyLimit`: a body over :attr:`Settings.max_body_bytes` is refused with 413
   before it is read (by its ``Content-Length``) or as soon as it crosses the limit (a
   chunked body);
2. :class:`Gate` (every ``/v1/`` path but ``/v1/health``): the bearer key is checked
   (401, one answer for every cause, and the cause logged without the key) and then the
   action the route needs (403), all *before* the body is parsed, so an unauthorised
   caller cannot make the service parse anything; it also adds security headers;
3. the route: the key's region and metric scopes (403, from the request's public
   ``region`` and ``metric`` as sent: :func:`~dpledger.service.routes.scope_first`),
   body validation (422), then the ledger.

Every error has one JSON shape (:class:`~dpledger.service.models.ErrorOut`). Refusals
map to 409 (budget, allocation, cohort floor, an epoch bound to another policy, a reused
release id) or 422 (invalid input: metric, region or version unknown, a malformed
aggregate); the status is decided by the first failed check, exactly as the library
chooses its error type. A 5xx body is generic; its detail goes to the operator's log:
:class:`Contain`, outermost, turns any unexpected exception into a generic 500 and one
log line (the traceback only at debug level).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dpledger._files import postgres_url
from dpledger.errors import (
    CommitUnknown,
    DpLedgerError,
    InternalError,
    InvalidInput,
    LedgerCorrupted,
    NotAuthenticated,
    NotPermitted,
    PolicyMismatch,
    ReleaseRefused,
    StoreError,
    UnknownResource,
    error_code,
)
from dpledger.service.keys import ACTIONS, ApiKey
from dpledger.service.models import UNAVAILABLE, ErrorOut, RefusedBudget, budget_out, verdict_out
from dpledger.service.state import ServiceState, Settings

__all__ = [
    "ACTION_KEY",
    "ANY_KEY",
    "CONFLICT_CHECKS",
    "BodyLimit",
    "Contain",
    "Gate",
    "caller",
    "create_app",
    "error_body",
    "openapi_schema",
    "status_for",
]

log = logging.getLogger("dpledger.service")

ACTION_KEY = "x-dpledger-action"
"""The OpenAPI extension on each operation naming the action its key needs."""
ANY_KEY = "any-key"
"""The :data:`ACTION_KEY` of an operation that every valid key may call (``whoami``)."""
CONFLICT_CHECKS = frozenset({"budget", "allocation", "cohort_floor", "epoch_policy", "release_id"})
"""Checks whose failure is a conflict with the ledger's state or policy (409), not bad input."""
_PUBLIC = frozenset({"/v1/health"})
_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
)


def status_for(exc: DpLedgerError) -> int:
    """The HTTP status of an error: decided by its type and first failed check only."""
    if isinstance(exc, NotAuthenticated):
        return 401
    if isinstance(exc, NotPermitted):
        return 403
    if isinstance(exc, UnknownResource):
        return 404
    if isinstance(exc, ReleaseRefused):
        if exc.verdict is None:
            return 409 if isinstance(exc, PolicyMismatch) else 422
        first = exc.verdict.failures[0].name if exc.verdict.failures else ""
        return 409 if first in CONFLICT_CHECKS else 422
    if isinstance(exc, StoreError):
        return 503
    if isinstance(exc, LedgerCorrupted | InternalError):
        return 500
    return 422  # InvalidInput, PolicyError: the request was wrong


def error_body(exc: DpLedgerError, status: int) -> dict[str, Any]:
    """The JSON of an error: never an aggregate, a key, or a 5xx's internal detail."""
    if status == 503:
        message = UNAVAILABLE[isinstance(exc, CommitUnknown)]
    elif status >= 500:
        message = "internal error: the operator's log has the details"
    else:
        message = str(exc)
    unavailable = status == 503 and not isinstance(exc, CommitUnknown)  # its own code
    body = ErrorOut(error="store_unavailable" if unavailable else error_code(exc), message=message)
    if isinstance(exc, ReleaseRefused) and exc.verdict is not None:
        body.verdict = verdict_out(exc.verdict)
        body.failed_checks = [c.name for c in exc.verdict.failures]
        binding = exc.verdict.allocation if body.failed_checks[:1] == ["allocation"] else None
        binding = binding or exc.verdict.budget
        if binding is not None and body.failed_checks[:1] in (["allocation"], ["budget"]):
            body.budget = RefusedBudget(
                requested=budget_out(binding.requested),
                spent=budget_out(binding.spent),
                remaining=budget_out(binding.remaining),
                scope=binding.scope,
            )
    elif isinstance(exc, NotPermitted):
        body.failed_checks = [f"scope: {exc.missing}"]
    dumped = {k: v for k, v in body.model_dump().items() if v is not None}  # top level only
    encoded: dict[str, Any] = jsonable_encoder(dumped)
    return encoded


class _AsciiJSON(JSONResponse):
    """JSON escaped to ASCII: a lone surrogate a body's ``\\ud800`` put in a message (a
    region a key lacks) is written as its escape, not a 500 at encoding (review 40)."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, allow_nan=False, separators=(",", ":")).encode("ascii")


_MAX_FIELD_ERRORS = 50
"""The most field errors a 422 lists: an aggregate of 100,000 wrong values would else
answer half a megabyte with ten (and seconds of CPU to build them; review 40)."""
_RETRY_AFTER_S = "1"
"""``Retry-After`` of every 503: the database was busy or unreachable, try again."""


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> JSONResponse:
    body = body if "failed_checks" in body else {**body, "failed_checks": []}  # one shape
    if status == 503:
        headers = {**(headers or {}), "Retry-After": _RETRY_AFTER_S}
    return _AsciiJSON(body, status_code=status, headers=headers)


class BodyLimit:
    """Pure ASGI middleware, outside the gate: no body over ``max_bytes`` bytes is read.

    A declared ``Content-Length`` over the limit is refused at once (nothing is read, no key
    is looked at); a body sent without one is counted as it arrives and refused when it
    crosses the limit. Both answer 413 in the one error shape. The limit is public (a
    setting), and :class:`~dpledger.service.state.Settings` refuses one that a valid
    aggregate's digits could cross, so a 413 never depends on the data.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _message(self) -> str:
        return f"the body is larger than the service's limit of {self.max_bytes} bytes"

    def _refusal(self) -> JSONResponse:
        headers = {k.decode(): v.decode() for k, v in _HEADERS}
        return _json(413, {"error": "http_413", "message": self._message()}, headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._refusal()(scope, receive, send)
                return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:  # FastAPI re-raises it; the handler maps it
                    raise StarletteHTTPException(413, self._message())
            return message

        await self.app(scope, counted, send)


class Gate:
    """Pure ASGI middleware: authenticate and check the action before anything else runs.

    The key is read from ``Authorization: Bearer …`` only (never a query string, which
    access logs record). The action comes from the matched route's :data:`ACTION_KEY`
    (:data:`ANY_KEY` for routes any valid key may call). It fails closed: a route that
    declares no action is refused to every key.
    """

    def __init__(self, app: ASGIApp, *, routes: Sequence[BaseRoute], state: ServiceState) -> None:
        self.app = app
        self._routes = [r for r in routes if isinstance(r, APIRoute)]
        self._state = state
        self._queries: dict[tuple[str, str], set[str]] | None = None

    def _route(self, scope: Scope) -> APIRoute | None:
        for route in self._routes:
            if route.matches(scope)[0] == Match.FULL:
                return route
        return None

    def _unknown_query(self, route: APIRoute, scope: Scope) -> list[str]:
        """Query parameters the route does not take (a typo must not be silently ignored)."""
        if self._queries is None:  # what each operation declares, from the schema
            self._queries = {
                (path, method.upper()): {
                    p["name"] for p in op.get("parameters", ()) if p.get("in") == "query"
                }
                for path, ops in openapi_schema()["paths"].items()
                for method, op in ops.items()
            }
        known = self._queries.get((route.path, scope["method"]), set())
        given = {k for k, _ in parse_qsl(scope.get("query_string", b"").decode("latin-1"), True)}
        return sorted(given - known)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for k, v in _HEADERS:
                    headers.setdefault(k.decode(), v.decode())
            await send(message)

        path = scope["path"]
        if not path.startswith("/v1/") or path in _PUBLIC:
            await self.app(scope, receive, secured)
            return
        token = _bearer(scope)
        try:
            if token is _TWICE:  # which copy a proxy keeps is anyone's guess (review 40)
                key, why = None, "the Authorization header given more than once"
            else:
                key, why = await run_in_threadpool(self._state.auth.authenticate, token)
        except DpLedgerError as e:
            status = status_for(e)
            log.error("key store failed while authenticating: %s", e)
            await _json(status, error_body(e, status))(scope, receive, secured)
            return
        del token  # keep the key out of any traceback's locals
        client = (scope.get("client") or ("-", 0))[0]
        if key is None:
            log.warning("authentication failed from %s: %s", client, why)
            denied = NotAuthenticated(
                "a valid API key is required: send `Authorization: Bearer dpl_<id>_<secret>`"
            )
            response = _json(401, error_body(denied, 401), {"WWW-Authenticate": "Bearer"})
            await response(scope, receive, secured)
            return
        scope.setdefault("state", {})["key"] = key
        route = self._route(scope)
        if route is None:  # 404 or 405: FastAPI answers
            await self.app(scope, receive, secured)
            return
        action = str((route.openapi_extra or {}).get(ACTION_KEY) or "")
        if action != ANY_KEY:
            try:
                if action not in ACTIONS:  # a route without an action: nobody may call it
                    log.error("route %s declares no action: refused", path)
                    raise NotPermitted(
                        f"{path} is not open to any key", key_id=key.key_id, action="?",
                        missing="a declared action",
                    )  # fmt: skip
                key.require(action)
            except NotPermitted as e:
                log.warning("%s refused: %s", key.principal, e)
                try:
                    await run_in_threadpool(self._state.log_refusal, key, action, None, e, 403)
                except DpLedgerError as lost:  # the refusal stands; only its log line is lost
                    log.error("could not log a refusal of %s: %s", key.principal, lost)
                await _json(403, error_body(e, 403))(scope, receive, secured)
                return
        unknown = self._unknown_query(route, scope)
        names = [k for k, _ in parse_qsl(scope.get("query_string", b"").decode("latin-1"), True)]
        twice = sorted({k for k in names if names.count(k) > 1})  # only the last would count
        if unknown or twice:
            shown = ", ".join(repr(u[:40]) for u in (unknown or twice)[:5])
            wrong = InvalidInput(
                f"unknown query parameter(s) {shown}: see /openapi.json"
                if unknown
                else f"query parameter(s) {shown} given more than once: give each once"
            )
            await _json(422, error_body(wrong, 422))(scope, receive, secured)
            return
        await self.app(scope, receive, secured)


class Contain:
    """Pure ASGI middleware, outermost: an unexpected exception (a bug) ends here.

    The caller gets a generic 500 (if no response has started), and the operator's log one
    line naming the request and the exception; the traceback only at ``--log-level
    debug``, as the CLI prints one only with ``--debug``. Nothing is re-raised, so the
    server adds no traceback of its own either.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as e:  # the last line of defence: typed, logged, contained
            log.error(
                "%s %s: internal error: %s: %s (this is a dpledger bug: --log-level debug "
                "logs its traceback)", scope.get("method"), scope.get("path"),
                type(e).__name__, e, exc_info=log.isEnabledFor(logging.DEBUG),
            )  # fmt: skip
            if not started:
                body = {"error": "internal_error", "message": "internal error: see the log"}
                response = _json(500, body, {k.decode(): v.decode() for k, v in _HEADERS})
                await response(scope, receive, send)


_TWICE = "\0twice"
"""What :func:`_bearer` returns for a request with two ``Authorization`` headers (no key)."""


def _bearer(scope: Scope) -> str | None:
    """The bearer token, None without one, :data:`_TWICE` when the header is given twice
    (HTTP allows one: taking the first, or the last, would pick a principal by accident)."""
    found = [v for n, v in scope.get("headers", ()) if n == b"authorization"]
    if len(found) > 1:
        return _TWICE
    if not found:
        return None
    scheme, _, token = found[0].decode("latin-1").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


def caller(request: Request) -> ApiKey:
    """The key :class:`Gate` authenticated for this request."""
    key = request.scope.get("state", {}).get("key")
    if not isinstance(key, ApiKey):
        raise NotAuthenticated("a valid API key is required")
    return key


def _handlers(app: FastAPI, state: ServiceState) -> None:
    async def dpledger_error(request: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, DpLedgerError):
            raise exc
        status = status_for(exc)
        if status >= 500:
            log.error("%s %s failed: %s: %s", request.method, request.url.path,
                      type(exc).__name__, exc)  # fmt: skip
        subject = request.scope.get("state", {}).get("subject")
        key = request.scope.get("state", {}).get("key")
        # the operator's log keeps refused releases and every scope refusal (a dry-run
        # check that says no is an answer, not an event)
        logged = status == 403 or (status in (409, 422) and subject and subject[0] == "release")
        if subject is not None and isinstance(key, ApiKey) and logged:
            action, req = subject
            try:
                await run_in_threadpool(state.log_refusal, key, action, req, exc, status)
            except DpLedgerError as e:  # the refusal stands; only its log line is lost
                log.error("could not log a refusal of %s: %s", key.principal, e)
        body = error_body(exc, status)
        # the server's absolute path, or its URL (with and without a password): a 4xx says
        # "the ledger" instead; a relative file name is never replaced (it may be a word)
        hidden = {state.location}
        if postgres_url(state.settings.ledger) is not None:
            hidden.add(state.settings.ledger)
        for where in hidden:
            body["message"] = body["message"].replace(where, "the ledger")
        return _json(status, body)  # a 503 gets its Retry-After

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, RequestValidationError):
            raise exc
        found = exc.errors()
        errors = [
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": e.get("type")}
            for e in found[:_MAX_FIELD_ERRORS]
        ]  # each error's "input" is dropped: no request data is echoed (and NaN breaks JSON)
        n = len(found)
        shown = "" if n <= _MAX_FIELD_ERRORS else f" (the first {_MAX_FIELD_ERRORS})"
        body = {
            "error": "invalid_input",
            "message": f"{n} invalid field{'s' if n != 1 else ''}: see errors{shown}",
            "failed_checks": [],
            "errors": jsonable_encoder(errors),
        }
        return _json(422, body)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        if not isinstance(exc, StarletteHTTPException):
            raise exc
        if exc.status_code == 400 and isinstance(exc.__cause__, UnicodeDecodeError):
            # FastAPI's 400 for any body its parser raised on: one that is not UTF-8 (nor
            # UTF-16/32) is invalid input, a 422 like a body that is not JSON
            wrong = InvalidInput("the request body is not UTF-8 text: send JSON in UTF-8")
            return _json(422, error_body(wrong, 422))
        body = {"error": f"http_{exc.status_code}", "message": str(exc.detail)}
        return _json(exc.status_code, body, dict(exc.headers or {}))

    app.add_exception_handler(DpLedgerError, dpledger_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, http_error)


def _fastapi(lifespan: Any = None) -> FastAPI:
    """The application and its routes, without state (what the schema is read from)."""
    from dpledger.service import page, routes, views

    app = FastAPI(
        title="dpledger",
        version="1",
        summary="Release approval for a shared privacy-budget ledger",
        lifespan=lifespan,
        docs_url=None,  # the interactive docs load scripts from a CDN: not on this service
        redoc_url=None,
        # no 307 from `/v1/x/` to an absolute `/v1/x` built from the Host header (a client
        # following it re-sends its key and aggregate there, over http behind a TLS proxy):
        # a path is matched as written, else 404 (review 40)
        redirect_slashes=False,
    )
    app.include_router(routes.public)
    app.include_router(routes.router)
    app.include_router(views.router)
    app.include_router(page.router)
    return app


def openapi_schema() -> dict[str, Any]:
    """The service's OpenAPI document, without opening a ledger (for docs and fuzzing)."""
    return _fastapi().openapi()


def create_app(settings: Settings) -> FastAPI:
    """The service for one ledger: opens it (it must exist) and its key store now.

    Errors opening either (a missing ledger, no key store) are raised here, typed, before
    any port is bound. The connections close when the app's lifespan ends, or with
    ``app.state.service.close()``.
    """
    from dpledger.service import routes, views

    state = ServiceState(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        log.info("serving ledger %s (policy %s %s)", state.location, state.policy.name,
                 state.policy.version)  # fmt: skip
        yield
        state.close()

    app = _fastapi(lifespan)
    app.state.service = state
    _handlers(app, state)
    app.add_middleware(Gate, routes=[*routes.router.routes, *views.router.routes], state=state)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)  # outside the gate
    app.add_middleware(Contain)  # added last: outermost, so it also contains the gate's bugs
    return app

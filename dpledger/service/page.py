"""The privacy team's page at ``/``: budgets, burn-down, releases, refusals, verify, head.

Server-rendered HTML with an inline SVG chart and no script at all (its
Content-Security-Policy forbids scripts), so there is nothing to build and nothing for an
injected string to run. Every value from the ledger or the key store is HTML-escaped.

A person signs in at ``/login`` with a key that has the ``read`` action; the browser
then keeps a signed session cookie, never the key (see :mod:`dpledger.service.auth`).
A ``Authorization: Bearer`` header works too (scripts, ``curl``).
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass
from itertools import chain
from typing import Annotated
from urllib.parse import parse_qs

from fastapi import APIRouter, Cookie, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from dpledger.errors import DpLedgerError
from dpledger.ledger import Entry
from dpledger.ledger.regions import epoch_regions, region_budgets
from dpledger.service.app import log
from dpledger.service.auth import SESSION_COOKIE
from dpledger.service.keys import ApiKey
from dpledger.service.state import ServiceState, Verified
from dpledger.service.store import Refusal
from dpledger.types import Budget

__all__ = ["CSP", "PageData", "render", "router"]

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
"""The page's Content-Security-Policy: no scripts, no outside resources, no framing."""
EPOCHS_SHOWN = 12
ROWS_SHOWN = 20
_PALETTE = ("#1b6ca8", "#e07b24", "#3a9a4f", "#c23b3b", "#7b5ea7", "#8c6d31", "#d45fa0", "#555")
_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem auto;max-width:60rem;color:#222}
h1{margin-bottom:.2rem} h2{margin-top:1.6rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.92rem} td,th{padding:.2rem .6rem;text-align:left}
tbody tr:nth-child(odd){background:#f6f6f6}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#17692c;font-weight:600} .failed{color:#b00020;font-weight:600}
code#chain-head{user-select:all;background:#f1f1f1;padding:.3rem .5rem;word-break:break-all}
header form{display:inline} .who{color:#555}
"""
router = APIRouter(include_in_schema=False)


@dataclass(frozen=True, slots=True)
class PageData:
    """Everything the page shows, read in one pass."""

    policy: str
    eval_budget: Budget
    regions: tuple[str, ...]
    budgets: tuple[tuple[int, str, Budget, Budget], ...]  # epoch, region, spent, remaining
    epoch_budgets: tuple[tuple[int, Budget], ...]  # each epoch's own (its bound policy's)
    releases: tuple[Entry, ...]  # newest first
    refusals: tuple[Refusal, ...]  # newest first
    head: tuple[int, str]
    verified: Verified
    viewer: str


def collect(state: ServiceState, viewer: ApiKey) -> PageData:
    """Read the page's data: the newest epochs, releases and refusals, and the audit."""
    verified = state.verified()  # borrows a connection of its own: before the next one
    with state.ledger() as ledger:
        head = ledger.head(checked=False)  # as recorded: the page's audit names any damage
        epochs = ledger.epochs()[-EPOCHS_SHOWN:]
        shown = {e: epoch_regions(ledger, e) for e in epochs}  # with its bound policy's
        names = list(dict.fromkeys([*state.policy.regions.names, *chain(*shown.values())]))
        budgets = tuple(  # one read of each epoch's spend; a region neither this policy
            (e, *row)  # nor e's has is left out
            for e in epochs
            for row in region_budgets(ledger, e, names)
        )
        bound = {e: ledger.epoch_policy(e) or state.policy for e in epochs}
        recent = ledger.entries(after=max(0, head[0] - ROWS_SHOWN))
    p = state.policy
    return PageData(
        policy=f"{p.name} {p.version}",
        eval_budget=Budget(p.eval_budget, p.unit),
        regions=tuple(names),
        budgets=budgets,
        epoch_budgets=tuple((e, Budget(b.eval_budget, b.unit)) for e, b in bound.items()),
        releases=tuple(reversed(recent)),
        refusals=tuple(state.store.refusals(ROWS_SHOWN)),
        head=head,
        verified=verified,
        viewer=viewer.principal,
    )


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _amount(b: Budget) -> str:
    return f"{float(b):.4g}"


CHART_LABEL = "share of each epoch's budget left, per region"
"""The burn-down chart's accessible name (escaped where used: it holds an apostrophe)."""


def _chart(d: PageData) -> str:
    """Grouped bars: per epoch, each region's remaining share of the epoch's budget."""
    epochs = sorted({e for e, *_ in d.budgets})
    if not epochs:
        return "<p id='no-releases'>No releases yet: every region has its whole budget.</p>"
    regions = d.regions
    left, top, plot_h, group_w = 48, 12, 160, max(24, 18 * len(regions) + 14)
    legend_w = sum(24 + 7 * len(r) for r in regions)
    width = max(left + group_w * len(epochs) + 10, left + legend_w, 540)
    bar_w = (group_w - 14) / max(1, len(regions))
    budget_of = dict(d.epoch_budgets)
    parts = [
        f"<svg id='burndown' role='img' width='{width}' height='{top + plot_h + 58}' "
        f"aria-label='{_e(CHART_LABEL)}'>",
        f"<text x='0' y='{top + 4}' font-size='10'>100%</text>",
        f"<text x='0' y='{top + plot_h}' font-size='10'>0%</text>",
        f"<line x1='{left - 4}' y1='{top + plot_h}' x2='{width}' y2='{top + plot_h}' "
        "stroke='#999'/>",
    ]
    left_of = {(e, r): rem for e, r, _, rem in d.budgets}
    for i, epoch in enumerate(epochs):
        x0 = left + i * group_w
        for j, region in enumerate(regions):
            rem = left_of.get((epoch, region))
            if rem is None:
                continue
            total = budget_of.get(epoch, d.eval_budget)
            frac = min(1.0, float(rem) / (float(total) or 1.0))
            h = plot_h * frac
            color = _PALETTE[j % len(_PALETTE)]
            parts.append(
                f"<rect class='bar' data-epoch='{epoch}' data-region='{_e(region)}' "
                f"x='{x0 + j * bar_w:.1f}' y='{top + plot_h - h:.1f}' width='{bar_w - 2:.1f}' "
                f"height='{h:.1f}' fill='{color}'><title>epoch {epoch}, {_e(region)}: "
                f"{_e(rem)} of {_e(total)} left</title></rect>"
            )
        parts.append(
            f"<text x='{x0 + (group_w - 14) / 2:.1f}' y='{top + plot_h + 14}' font-size='11' "
            f"text-anchor='middle'>{epoch}</text>"
        )
    parts.append(
        f"<text x='{left}' y='{top + plot_h + 30}' font-size='11'>epoch → ; each bar: the "
        "share of its epoch's budget a client of its region has left</text>"
    )
    x = left
    for j, region in enumerate(regions):
        color = _PALETTE[j % len(_PALETTE)]
        parts.append(
            f"<rect x='{x}' y='{top + plot_h + 38}' width='10' height='10' fill='{color}'/>"
            f"<text x='{x + 13}' y='{top + plot_h + 47}' font-size='11'>{_e(region)}</text>"
        )
        x += 24 + 7 * len(region)
    parts.append("</svg>")
    return "".join(parts)


def _budget_rows(d: PageData) -> str:
    rows = []
    budget_of = dict(d.epoch_budgets)  # an epoch bound to another version has its budget
    order = {r: i for i, r in enumerate(d.regions)}
    newest_first = sorted(d.budgets, key=lambda row: (-row[0], order.get(row[1], 0)))
    for epoch, region, spent, rem in newest_first:
        used = 100 * float(spent) / (float(budget_of.get(epoch, d.eval_budget)) or 1.0)
        rows.append(
            f"<tr data-epoch='{epoch}' data-region='{_e(region)}'><td class='num'>{epoch}</td>"
            f"<td>{_e(region)}</td><td class='num spent' title='{_e(spent.text)}'>"
            f"{_amount(spent)}</td><td class='num remaining' title='{_e(rem.text)}'>"
            f"{_amount(rem)}</td><td class='num'>{used:.0f}%</td></tr>"
        )
    return "".join(rows) or "<tr><td colspan='5'>no releases yet</td></tr>"


def _release_rows(d: PageData) -> str:
    rows = []
    for e in d.releases:
        x = e.draft
        rows.append(
            f"<tr data-entry='{e.entry_id}'><td class='num'>{e.entry_id}</td>"
            f"<td>{_e(e.created_at[:19])}</td><td class='num'>{x.epoch}</td><td>{_e(x.region)}</td>"
            f"<td>{_e(x.metric)}</td><td class='num'>{_amount(x.charge)}</td>"
            f"<td class='principal'>{_e(x.principal or '(library)')}</td>"
            f"<td>{_e(x.release_id or '')}</td></tr>"
        )
    return "".join(rows) or "<tr><td colspan='8'>none yet</td></tr>"


def _refusal_rows(d: PageData) -> str:
    rows = []
    for r in d.refusals:
        where = "" if r.epoch is None else f"{r.epoch}"
        rows.append(
            f"<tr><td>{_e(r.at[:19])}</td><td class='principal'>{_e(r.principal)}</td>"
            f"<td>{_e(r.action)}</td><td class='num'>{where}</td><td>{_e(r.region or '')}</td>"
            f"<td>{_e(r.metric or '')}</td><td class='num'>{r.status}</td>"
            f"<td>{_e(', '.join(r.failed) or r.error)}</td></tr>"
        )
    return "".join(rows) or "<tr><td colspan='8'>none</td></tr>"


def _verify_block(d: PageData) -> str:
    v = d.verified
    when = _e(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(v.at)))
    if v.report.ok:
        status = (
            f"<p id='verify-status' class='ok'>Verified: {v.report.entries_checked} entries, "
            f"chain and every charge sound (checked {when}).</p>"
        )
    else:
        items = "".join(f"<li>{_e(p)}</li>" for p in v.report.problems)
        status = (
            f"<p id='verify-status' class='failed'>Verification FAILED "
            f"({len(v.report.problems)} problems, checked {when}):</p><ul>{items}</ul>"
        )
    return status + "".join(f"<p class='notice'>{_e(n)}</p>" for n in v.report.notices)


def render(d: PageData) -> str:
    """The page's HTML."""
    seq, digest = d.head
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>dpledger: {_e(d.policy)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_STYLE}</style></head>
<body><header><h1>Privacy budget ledger</h1>
<p>Policy <b id="policy">{_e(d.policy)}</b>: {_e(d.eval_budget)} per client per epoch.
<span class="who">Signed in as <b id="viewer">{_e(d.viewer)}</b>.</span>
<form method="post" action="/logout"><button type="submit">Sign out</button></form></p></header>
<section><h2>Verification</h2>{_verify_block(d)}</section>
<section><h2>Chain head</h2><p>Keep this anchor outside the database; check it later with
<code>dpledger ledger verify --expected-head ANCHOR</code>.</p>
<p><code id="chain-head">{seq}:{_e(digest)}</code></p></section>
<section><h2>Budget per region and epoch</h2>{_chart(d)}
<table id="budget-table"><thead><tr><th>Epoch</th><th>Region</th><th>Spent</th>
<th>Remaining</th><th>Used</th></tr></thead><tbody>{_budget_rows(d)}</tbody></table></section>
<section><h2>Recent releases</h2><table id="releases-table"><thead><tr><th>Entry</th>
<th>Time (UTC)</th><th>Epoch</th><th>Region</th><th>Metric</th><th>Charge</th><th>Principal</th>
<th>Release id</th></tr></thead><tbody>{_release_rows(d)}</tbody></table></section>
<section><h2>Recent refusals</h2><p>From the service's operator log (not the ledger): public
request fields and the failed checks, never an aggregate.</p><table id="refusals-table"><thead>
<tr><th>Time (UTC)</th><th>Principal</th><th>Action</th><th>Epoch</th><th>Region</th>
<th>Metric</th><th>Status</th><th>Failed checks</th></tr></thead><tbody>{_refusal_rows(d)}
</tbody></table></section></body></html>"""


def _login_page(message: str = "") -> str:
    note = f"<p id='login-error' class='failed'>{_e(message)}</p>" if message else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>dpledger: sign in</title>
<style>{_STYLE}</style></head><body><h1>Privacy budget ledger</h1>{note}
<form method="post" action="/login"><p><label for="key">API key (with the read action)</label><br>
<input type="password" id="key" name="key" autocomplete="off" size="64" required></p>
<p><button type="submit">Sign in</button></p></form>
<p>The key is checked once; the browser then keeps a signed session, never the key.</p>
</body></html>"""


_MAX_SESSION = 200
"""The longest session cookie read (the ones issued are far shorter)."""


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers={"Content-Security-Policy": CSP})


def _viewer(request: Request, session: str | None) -> ApiKey | None:
    state: ServiceState = request.app.state.service
    given = request.headers.getlist("authorization")
    if len(given) > 1:  # one key or none: never the first of two (review 40)
        log.warning("page: authentication failed: the Authorization header given twice")
        return None
    scheme, _, token = (given or [""])[0].partition(" ")
    if scheme.lower() == "bearer" and token:
        key, why = state.auth.authenticate(token.strip())
        if key is None:
            log.warning("page: authentication failed: %s", why)
        return key
    return state.auth.from_session(_bounded(session))


def _bounded(session: str | None) -> str | None:
    """The cookie, or None if longer than any session this service issues: an invalid
    session like any other (sign in again), never a 422 the browser cannot get past."""
    return session if session is None or len(session) <= _MAX_SESSION else None


@router.get("/")
def index(request: Request, dpl_session: Annotated[str | None, Cookie()] = None) -> Response:
    """The page, for a signed-in key with ``read``; anyone else is sent to sign in."""
    key = _viewer(request, dpl_session)
    if key is None:
        return RedirectResponse("/login", status_code=303)
    if not key.scopes.allows("read"):
        return _html(_login_page(f"key {key.key_id} lacks the read action"), 403)
    try:
        return _html(render(collect(request.app.state.service, key)))
    except DpLedgerError as e:
        log.error("page failed: %s", e)
        text = "<!doctype html><title>dpledger</title><p>The ledger is unavailable."
        unavailable = _html(text, 503)
        unavailable.headers["Retry-After"] = "1"  # as every 503 of the API (review 40)
        return unavailable


@router.get("/login")
def login_form() -> Response:
    """The sign-in form."""
    return _html(_login_page())


@router.post("/login")
async def login(request: Request) -> Response:
    """Check the pasted key (once); on success set the session cookie and go to ``/``."""
    state: ServiceState = request.app.state.service
    raw = await request.body()
    try:
        fields = parse_qs(raw.decode("ascii"), max_num_fields=4)
    except (UnicodeDecodeError, ValueError):
        fields = {}
    token = (fields.get("key") or [""])[0].strip()
    key, why = await run_in_threadpool(state.auth.authenticate, token)
    del token, fields, raw
    if key is None:
        log.warning("page sign-in failed from %s: %s", (request.client or ("-",))[0], why)
        return _html(_login_page("That key is not valid (or was revoked)."), 401)
    if not key.scopes.allows("read"):
        return _html(_login_page(f"Key {key.key_id} lacks the read action."), 403)
    session = await run_in_threadpool(state.auth.session_for, key)  # reads the store
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        session,
        max_age=state.auth.session_ttl_s,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    log.info("page: %s signed in", key.principal)
    return response


@router.post("/logout")
def logout(request: Request, dpl_session: Annotated[str | None, Cookie()] = None) -> Response:
    """End the session in the store (its cookie no longer signs in anywhere), forget it."""
    state: ServiceState = request.app.state.service
    key = state.auth.end_session(_bounded(dpl_session))
    if key is not None:
        log.info("page: %s signed out", key.principal)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response

"""The HTTP API through httpx's ASGI transport: releases, refusals, views, page, logs.

Every request goes through the whole application (the gate, the body limit, FastAPI's
validation, the routes and the real SQLite ledger) in this process, without a socket.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from _service import Site, body, call, request, snapshot

from dpledger.errors import InvalidInput, LedgerCorrupted, StoreError
from dpledger.ledger import Ledger
from dpledger.service import create_app
from dpledger.service.app import error_body, status_for
from dpledger.service.auth import SESSION_COOKIE
from dpledger.service.state import body_bytes_needed
from dpledger.service.store import ServiceStore, default_location

DISTINCT = 777.123456789  # an aggregate whose text must never come back


def release(app: Any, site: Site, role: str, payload: dict[str, Any], **headers: str) -> Any:
    return call(app, "POST", "/v1/releases", json=payload, headers={**site.auth(role), **headers})


def cookie_header(session: str) -> dict[str, str]:
    return {"Cookie": f"{SESSION_COOKIE}={session}"}


def ledger(site: Site) -> Ledger:
    return Ledger.open(site.ledger, site.policy, mode="read")


# -- releases and retries ------------------------------------------------------------


def test_a_release_records_the_callers_principal_inside_the_chain(app: Any, site: Site) -> None:
    r = release(app, site, "north", body(), **{"Idempotency-Key": "round-1/north/loss"})
    assert r.status_code == 201, r.text
    out = r.json()
    assert out["principal"] == site.principals["north"]
    assert out["release_id"] == "round-1/north/loss"
    assert out["charge"] == "1/10"
    with ledger(site) as led:
        (entry,) = led.entries()
        assert entry.draft.principal == site.principals["north"]
        assert entry.hash == out["entry_hash"]
        assert led.verify().ok


def test_a_retry_with_the_same_idempotency_key_returns_the_recorded_release(
    app: Any, site: Site
) -> None:
    first = release(app, site, "north", body(), **{"Idempotency-Key": "r-1"})
    again = release(app, site, "north", body(), **{"Idempotency-Key": "r-1"})
    assert first.status_code == again.status_code == 201
    # same noisy value, same entry: no new noise; the retry says it charged nothing
    assert (first.json().pop("retried"), again.json().pop("retried")) == (False, True)
    assert {**again.json(), "retried": False} == first.json()
    with ledger(site) as led:
        assert len(led) == 1
        assert led.spent(0, "north").text == "1/10"


def test_a_release_id_belongs_to_its_principal(app: Any, site: Site) -> None:
    assert release(app, site, "north", body(), **{"Idempotency-Key": "r-1"}).status_code == 201
    before = snapshot(site.ledger)
    other = release(app, site, "admin", body(), **{"Idempotency-Key": "r-1"})
    assert other.status_code == 409
    assert other.json()["error"] == "release_id_conflict"
    assert other.json()["failed_checks"] == ["release_id"]
    assert snapshot(site.ledger) == before


def test_the_header_and_the_body_must_name_the_same_release_id(app: Any, site: Site) -> None:
    payload = body()
    payload["request"]["release_id"] = "from-body"
    r = release(app, site, "north", payload, **{"Idempotency-Key": "from-header"})
    assert r.status_code == 422
    assert r.json()["error"] == "invalid_input"
    assert release(app, site, "north", payload).json()["release_id"] == "from-body"


# -- refusals ----------------------------------------------------------------------


def test_a_spent_budget_is_a_409_naming_the_check_never_the_aggregate(app: Any, site: Site) -> None:
    for _ in range(10):  # ε 0.1 each: the epoch's ε_eval = 1
        assert release(app, site, "north", body(aggregate=800.0)).status_code == 201
    before = snapshot(site.ledger)
    r = release(app, site, "north", body(aggregate=DISTINCT))
    assert r.status_code == 409
    out = r.json()
    assert out["error"] == "budget_exceeded"
    assert out["failed_checks"] == ["budget"]
    assert out["budget"]["remaining"]["amount"] == "0"
    assert out["verdict"]["request"]["region"] == "north"
    assert "777.12" not in r.text
    assert snapshot(site.ledger) == before
    with ServiceStore.open(default_location(site.ledger)) as store:
        (logged,) = store.refusals()
    assert logged.principal == site.principals["north"]
    assert (logged.action, logged.status, logged.failed) == ("release", 409, ("budget",))
    assert "777.12" not in repr(logged)  # the aggregate; a random key id may hold "777"


@pytest.mark.parametrize(
    ("aggregate", "check"),
    [
        ([1.0, 2.0, 3.0], "aggregate_shape"),  # a vector for a scalar metric
        (5000.0, "clipping_bounds"),  # more than clip.high × cohort: clipping failed
    ],
)
def test_a_malformed_aggregate_is_a_422_naming_the_check(
    app: Any, site: Site, aggregate: Any, check: str
) -> None:
    r = release(app, site, "north", body(aggregate=aggregate))
    assert r.status_code == 422
    assert r.json()["error"] == "invalid_aggregate"
    assert r.json()["failed_checks"] == [check]
    assert "5000" not in r.text


@pytest.mark.parametrize(
    "raw",
    [
        b'{"request": REQ, "aggregate": NaN}',
        b'{"request": REQ, "aggregate": [1, Infinity]}',
        b'{"request": REQ, "aggregate": 1e999}',
        b'{"request": REQ, "aggregate": "800"}',
        b'{"request": REQ, "aggregate": [[1.0]]}',
        b'{"request": REQ, "aggregate": true}',
        b'{"request": REQ, "aggregate": 800, "extra": 1}',
    ],
)
def test_json_that_is_not_a_finite_array_of_numbers_is_a_422(
    app: Any, site: Site, raw: bytes
) -> None:
    req = b'{"epoch": 0, "metric": "loss", "region": "north", "cohort": 1000}'
    r = call(
        app,
        "POST",
        "/v1/releases",
        content=raw.replace(b"REQ", req),
        headers={**site.auth("north"), "content-type": "application/json"},
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "invalid_input"
    assert all("input" not in e for e in r.json()["errors"])  # nothing is echoed


@pytest.mark.parametrize(
    ("raw", "status"),
    [(b"[" * 5000 + b"]" * 5000, 400), (b'{"aggregate": ' + b"9" * 5000 + b"}", 422),
     (b'{"request": {"epoch": 0, "metric": "loss", "region": "north", "cohort": 1000}, '
      b'"aggregate": ' + b"9" * 5000 + b"}", 422),
     (b"\xff\xfe{}", 422), (b"{not json", 422), ('{"x": "n\xf6rth"}'.encode("latin-1"), 422)],
    ids=["nested too deeply", "a 5000-digit integer", "a 5000-digit aggregate", "not UTF-8",
         "not JSON", "Latin-1"],
)  # fmt: skip
def test_a_body_json_cannot_read_is_a_typed_400_or_422_as_documented(
    app: Any, site: Site, raw: bytes, status: int
) -> None:
    headers = {**site.auth("admin"), "content-type": "application/json"}
    r = call(app, "POST", "/v1/releases", content=raw, headers=headers)
    assert r.status_code == status, r.text
    assert r.json()["error"] == ("http_400" if status == 400 else "invalid_input")
    if raw.startswith(b'{"request"'):  # read as ±inf and refused so, named (review s28 R4)
        (first, *_) = r.json()["errors"]
        assert (first["loc"][:2], first["type"]) == (["body", "aggregate"], "finite_number")


def test_a_strict_request_refuses_coercion(app: Any, site: Site) -> None:
    payload = body()
    payload["request"]["cohort"] = "1000"
    r = release(app, site, "north", payload)
    assert r.status_code == 422
    (error,) = r.json()["errors"]
    assert error["loc"][:2] == ["body", "request"]
    assert "cohort" in error["msg"]


def test_an_unknown_region_in_a_body_is_a_422_and_a_small_cohort_a_409(
    app: Any, site: Site
) -> None:
    r = release(app, site, "admin", body("west"))
    assert (r.status_code, r.json()["failed_checks"]) == (422, ["region_known"])
    small = {"request": {**request(metric="floored"), "cohort": 10}, "aggregate": 5.0}
    r = release(app, site, "admin", small)
    assert (r.status_code, r.json()["error"]) == (409, "cohort_too_small")


def test_check_is_a_dry_run_answered_with_the_release_status(app: Any, site: Site) -> None:
    r = call(app, "POST", "/v1/check", json=body(), headers=site.auth("north"))
    assert r.status_code == 200
    assert r.json()["approved"] is True
    with ledger(site) as led:
        assert len(led) == 0
    for _ in range(10):
        release(app, site, "north", body())
    r = call(app, "POST", "/v1/check", json=body(), headers=site.auth("north"))
    assert (r.status_code, r.json()["failed_checks"]) == (409, ["budget"])


def test_a_body_over_the_limit_is_refused_before_anything_reads_it(site: Site) -> None:
    limit = body_bytes_needed(site.policy)  # the smallest limit the service accepts
    small = create_app(site.settings(max_body_bytes=limit))
    try:
        payload = body(aggregate=[1.0] * limit)  # more numbers than any metric releases
        for headers in ({}, site.auth("north")):
            r = call(small, "POST", "/v1/releases", json=payload, headers=headers)
            assert r.status_code == 413
        # the largest aggregate, in the longest digits, always fits: a 413 never depends
        # on the values of an aggregate of the right shape
        longest = [2.2250738585072014e-300] * 20
        hist = {"request": {**request(metric="hist20"), "edges_version": "h20/v1"},
                "aggregate": longest}  # fmt: skip
        r = call(small, "POST", "/v1/releases", json=hist, headers=site.auth("admin"))
        assert r.status_code == 201, r.text
    finally:
        small.state.service.close()


def test_a_body_without_a_length_is_cut_off_at_the_limit(site: Site) -> None:
    """A chunked body (no Content-Length) is counted as it arrives: 413 past the limit."""
    limit = body_bytes_needed(site.policy)
    small = create_app(site.settings(max_body_bytes=limit))
    data = json.dumps(body(aggregate=[1.0] * limit)).encode()

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(data), 4096):
            yield data[i : i + 4096]

    try:
        before = snapshot(site.ledger)
        headers = {**site.auth("north"), "content-type": "application/json"}
        r = call(small, "POST", "/v1/releases", content=chunks(), headers=headers)
        assert r.status_code == 413
        assert r.json() == {
            "error": "http_413",
            "message": f"the body is larger than the service's limit of {limit} bytes",
            "failed_checks": [],  # the one error shape (review 40)
        }
        assert snapshot(site.ledger) == before
    finally:
        small.state.service.close()


def test_a_body_limit_below_the_largest_aggregate_is_refused_at_start(site: Site) -> None:
    with pytest.raises(InvalidInput, match="max-body-bytes"):
        site.settings(max_body_bytes=body_bytes_needed(site.policy) - 1)


# -- views -------------------------------------------------------------------------


def test_budget_views_answer_any_epoch_and_404_an_unknown_region(app: Any, site: Site) -> None:
    release(app, site, "north", body())
    r = call(app, "GET", "/v1/budget/0", headers=site.auth("reader"))
    rows = {row["region"]: row for row in r.json()["regions"]}
    assert rows["north"]["spent"]["amount"] == "1/10"
    assert rows["south"]["remaining"]["amount"] == "1"
    assert rows["*"]["spent"]["amount"] == "1/10"
    detail = call(app, "GET", "/v1/budget/0/north", headers=site.auth("reader")).json()
    assert {m["metric"]: m["spent"]["amount"] for m in detail["metrics"]}["loss"] == "1/10"
    fresh = call(app, "GET", "/v1/budget/7", headers=site.auth("reader")).json()
    assert fresh["opened"] is False
    r = call(app, "GET", "/v1/budget/0/west", headers=site.auth("reader"))
    assert (r.status_code, r.json()["error"]) == (404, "unknown_resource")


def test_epochs_list_opened_epochs_and_404_an_unopened_one(app: Any, site: Site) -> None:
    release(app, site, "north", body(epoch=3))
    assert call(app, "GET", "/v1/epochs", headers=site.auth("reader")).json() == {"epochs": [3]}
    record = call(app, "GET", "/v1/epochs/3", headers=site.auth("reader")).json()
    assert record["spent_by_region"]["north"]["amount"] == "1/10"
    assert call(app, "GET", "/v1/epochs/2", headers=site.auth("reader")).status_code == 404


def test_entries_are_paged_and_filtered(app: Any, site: Site) -> None:
    for region in ("north", "south", "north"):
        assert release(app, site, "admin", body(region)).status_code == 201
    page = call(app, "GET", "/v1/entries?limit=2", headers=site.auth("reader")).json()
    assert [e["entry_id"] for e in page["entries"]] == [1, 2]
    rest = call(
        app, "GET", f"/v1/entries?after={page['next_after']}", headers=site.auth("reader")
    ).json()
    assert [e["entry_id"] for e in rest["entries"]] == [3]
    assert rest["next_after"] is None
    typo = call(app, "GET", "/v1/entries?limt=2", headers=site.auth("reader"))
    assert (typo.status_code, typo.json()["error"]) == (422, "invalid_input")
    assert "limt" in typo.json()["message"]
    north = call(app, "GET", "/v1/entries?region=north", headers=site.auth("reader")).json()
    assert [e["entry_id"] for e in north["entries"]] == [1, 3]
    assert {e["principal"] for e in north["entries"]} == {site.principals["admin"]}


def test_verify_checks_against_the_head_a_reader_can_anchor(app: Any, site: Site) -> None:
    release(app, site, "north", body())
    head = call(app, "GET", "/v1/head", headers=site.auth("reader")).json()
    r = call(app, "GET", f"/v1/verify?expected_head={head['anchor']}", headers=site.auth("auditor"))
    assert r.status_code == 200
    assert r.json()["ok"] is True
    wrong = head["anchor"][:-1] + ("0" if head["anchor"][-1] != "0" else "1")
    r = call(app, "GET", f"/v1/verify?expected_head={wrong}", headers=site.auth("auditor"))
    assert r.json()["ok"] is False
    assert call(app, "GET", "/v1/verify", headers=site.auth("reader")).status_code == 403


def test_plan_lifetime_and_policy_are_read_views(app: Any, site: Site) -> None:
    release(app, site, "north", body())
    plan = call(
        app, "POST", "/v1/plan", json={"cohorts": {"north": 1000}}, headers=site.auth("reader")
    )
    assert plan.status_code == 200
    (north,) = plan.json()["regions"]
    assert north["spent"]["amount"] == "1/10"
    bad = call(app, "POST", "/v1/plan", json={"cohorts": {"west": 10}}, headers=site.auth("reader"))
    assert bad.status_code == 422
    life = call(app, "GET", "/v1/lifetime/north", headers=site.auth("reader")).json()
    assert life["releases"] == 1
    assert call(app, "GET", "/v1/lifetime/west", headers=site.auth("reader")).status_code == 404
    pol = call(app, "GET", "/v1/policy", headers=site.auth("reader")).json()
    assert pol["content_hash"] == site.policy.content_hash


def test_health_and_the_schema_need_no_key_and_every_operation_names_its_action(
    app: Any,
) -> None:
    assert call(app, "GET", "/v1/health").json() == {"status": "ok"}
    schema = call(app, "GET", "/openapi.json").json()
    assert schema["components"]["securitySchemes"]["ApiKey"]["scheme"] == "bearer"
    actions = {
        (path, method): op.get("x-dpledger-action")
        for path, ops in schema["paths"].items()
        for method, op in ops.items()
    }
    assert actions[("/v1/releases", "post")] == "release"
    assert actions[("/v1/check", "post")] == "check"
    assert actions[("/v1/verify", "get")] == "verify"
    assert actions[("/v1/keys", "get")] == "admin"
    assert actions[("/v1/whoami", "get")] == "any-key"
    undeclared = [op for op, action in actions.items() if action is None]
    assert undeclared == [("/v1/health", "get")]  # the gate refuses any other to every key
    assert set(schema["paths"]["/v1/releases"]["post"]["responses"]) >= {
        "201", "400", "401", "403", "409", "413", "422", "503",
    }  # fmt: skip
    life = schema["paths"]["/v1/lifetime/{region}"]["get"]  # it answers a person's on records
    assert "person" in life["summary"]
    assert "privacy_unit" in life["description"]


def test_errors_share_one_shape_and_a_path_under_v1_needs_a_key(app: Any, site: Site) -> None:
    assert call(app, "GET", "/v1/no-such-thing").status_code == 401  # no probing without a key
    r = call(app, "GET", "/v1/no-such-thing", headers=site.auth("reader"))
    assert (r.status_code, r.json()["error"]) == (404, "http_404")
    r = call(app, "DELETE", "/v1/releases", headers=site.auth("admin"))
    assert r.status_code == 405
    assert "POST" in r.headers["allow"]
    for header in ("x-content-type-options", "cache-control", "x-frame-options"):
        assert header in r.headers


def test_server_errors_say_nothing_of_their_cause() -> None:
    assert status_for(StoreError("postgresql://u@db/x: password rejected")) == 503
    assert "postgresql" not in error_body(StoreError("postgresql://u@db/x"), 503)["message"]
    assert status_for(LedgerCorrupted("chain broken at /srv/l.db")) == 500
    assert "/srv" not in error_body(LedgerCorrupted("chain broken at /srv/l.db"), 500)["message"]
    assert status_for(InvalidInput("bad")) == 422


@pytest.mark.parametrize("where", ["route", "gate"])
def test_a_bug_is_a_generic_500_and_one_log_line_without_a_traceback(
    app: Any,
    site: Site,
    where: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def bug(*args: object, **kw: object) -> Any:
        raise RuntimeError("a bug at /srv/secret-path")

    state = app.state.service
    monkeypatch.setattr(
        *((state, "ledger", bug) if where == "route" else (state.auth, "authenticate", bug))
    )
    with caplog.at_level(logging.INFO, logger="dpledger.service"):
        r = release(app, site, "admin", body())  # raised out of the app, this would fail
    assert r.status_code == 500
    assert r.json() == {
        "error": "internal_error",
        "message": "internal error: see the log",
        "failed_checks": [],  # the one error shape (review 40)
    }
    assert r.headers["cache-control"] == "no-store"
    (line,) = [rec for rec in caplog.records if "RuntimeError" in rec.getMessage()]
    assert "POST /v1/releases" in line.getMessage()
    assert not line.exc_info  # the traceback only at debug level
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="dpledger.service"):
        assert release(app, site, "admin", body()).status_code == 500
    assert any(rec.exc_info for rec in caplog.records)


# -- keys over the API -------------------------------------------------------------


def test_an_admin_lists_keys_without_secrets_and_revokes_at_once(app: Any, site: Site) -> None:
    listed = call(app, "GET", "/v1/keys", headers=site.auth("admin"))
    assert listed.status_code == 200
    assert {k["name"] for k in listed.json()["keys"]} >= {"north", "reader"}
    for token in site.keys.values():
        assert token.split("_", 2)[2] not in listed.text
    north_id = site.principals["north"].split("/")[1]
    assert call(app, "GET", "/v1/keys", headers=site.auth("north")).status_code == 403
    done = call(app, "POST", f"/v1/keys/{north_id}/revoke", headers=site.auth("admin"))
    assert done.json()["revoked_at"]
    assert release(app, site, "north", body()).status_code == 401
    whoami = call(app, "GET", "/v1/whoami", headers=site.auth("reader")).json()
    assert whoami["actions"] == ["read"]


# -- the page, without a browser (the browser test is test_service_page.py) ----------


def test_the_page_signs_in_with_a_key_and_keeps_only_a_session(app: Any, site: Site) -> None:
    release(app, site, "north", body())
    r = call(app, "GET", "/")
    assert (r.status_code, r.headers["location"]) == (303, "/login")
    key = site.keys["reader"]
    wrong = key[:-1] + ("A" if key[-1] != "A" else "B")  # never the key itself
    r = call(app, "POST", "/login", data={"key": wrong})
    assert r.status_code == 401
    assert call(app, "POST", "/login", data={"key": site.keys["auditor"]}).status_code == 403
    r = call(app, "POST", "/login", data={"key": site.keys["reader"]})
    assert r.status_code == 303
    cookie = r.headers["set-cookie"]
    assert "httponly" in cookie.lower()
    assert "samesite=strict" in cookie.lower()
    session = r.cookies[SESSION_COOKIE]
    assert site.keys["reader"].split("_", 2)[2] not in session  # the key stays with its owner
    page = call(app, "GET", "/", headers=cookie_header(session))
    assert page.status_code == 200
    assert site.principals["north"] in page.text
    assert "script-src" not in page.headers["content-security-policy"]
    assert "default-src 'none'" in page.headers["content-security-policy"]
    forged = session[:-1] + ("0" if session[-1] != "0" else "1")
    assert (
        call(app, "GET", "/", headers={"Cookie": f"{SESSION_COOKIE}={forged}"}).status_code == 303
    )
    reader_id = site.principals["reader"].split("/")[1]
    call(app, "POST", f"/v1/keys/{reader_id}/revoke", headers=site.auth("admin"))
    assert (
        call(app, "GET", "/", headers={"Cookie": f"{SESSION_COOKIE}={session}"}).status_code == 303
    )


def test_no_key_is_ever_logged(
    app: Any, site: Site, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = site.keys["north"][:-2] + "xx"
    for token in (site.keys["north"], wrong, site.keys["revoked"], "dpl_short"):
        call(app, "POST", "/v1/releases", json=body(), headers={"Authorization": f"Bearer {token}"})
    call(app, "POST", "/login", data={"key": site.keys["reader"]})
    call(app, "POST", "/login", data={"key": wrong})
    logged = caplog.text + "".join(capfd.readouterr())
    assert "authentication failed" in logged
    for token in (*site.keys.values(), wrong):
        assert token.split("_", 2)[2] not in logged


@pytest.mark.parametrize(
    "raw",
    [b'{"request": {"epoch": 0, "metric": "loss", "region": "north", "cohort": 1000, '
     b'"cohort": 10}, "aggregate": 800}',
     b'{"request": {"epoch": 0, "metric": "loss", "region": "north", "cohort": 1000}, '
     b'"aggregate": 800, "aggregate": 900}'],
    ids=["in the request", "at the top"],
)  # fmt: skip
def test_a_body_naming_a_key_twice_is_a_422_not_the_last_value(
    app: Any, site: Site, raw: bytes
) -> None:
    """JSON parsers keep the last of two equal keys silently; a release must not."""
    headers = {**site.auth("north"), "content-type": "application/json"}
    before = snapshot(site.ledger)
    for path in ("/v1/releases", "/v1/check"):
        r = call(app, "POST", path, content=raw, headers=headers)
        assert r.status_code == 422, r.text
        assert r.json()["error"] == "invalid_input"
        assert "appears twice" in r.json()["message"]
    assert snapshot(site.ledger) == before


def test_budget_views_read_the_budget_of_the_policy_an_epoch_is_bound_to(
    site: Site, tmp_path: Path
) -> None:
    """Served with a v2 whose ε_eval is 10×, epoch 0 (bound to v1) showed v2's budget
    left (audit 2, finding 3)."""
    from dpledger.approval import ReleaseRequest
    from dpledger.policy import Policy
    from dpledger.service.state import Settings

    with Ledger.open(site.ledger, site.policy) as led:
        led.release(ReleaseRequest(**request()), 800.0)  # epoch 0 opened under v1 (ε_eval 1)
    text = site.policy_path.read_text().replace('version = "1"', 'version = "2"')
    v2 = Policy.from_toml(text.replace('epoch_epsilon = "4"', 'epoch_epsilon = "40"'), source="v2")
    assert v2.eval_budget == 10 * site.policy.eval_budget
    served = create_app(Settings(ledger=site.ledger, policy=v2))
    try:
        epoch0 = call(served, "GET", "/v1/budget/0", headers=site.auth("reader")).json()
        assert epoch0["eval_budget"]["amount"] == "1"
        rows = {row["region"]: row for row in epoch0["regions"]}
        assert rows["north"]["remaining"]["amount"] == "9/10"
        epoch1 = call(served, "GET", "/v1/budget/1", headers=site.auth("reader")).json()
        assert epoch1["eval_budget"]["amount"] == "10"  # not opened: the served policy's
    finally:
        served.state.service.close()


def test_a_tampered_chain_head_is_reported_by_verify_and_the_page_not_a_500(
    app: Any, site: Site
) -> None:
    """Review s32 C1: with the meta table's head edited, writes and /v1/head refuse
    (LedgerCorrupted), but /v1/verify and the page still answer with the audit that names
    the damage, and /v1/health says the ledger is reachable (its documented meaning)."""
    import sqlite3

    assert release(app, site, "north", body()).status_code == 201
    conn = sqlite3.connect(site.ledger, isolation_level=None)
    conn.execute("UPDATE dpl_meta SET value = '999' WHERE key = 'head_seq'")
    conn.close()
    r = call(app, "GET", "/v1/verify", headers=site.auth("auditor"))
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["ok"] is False
    assert any("chain head is entry 999" in p for p in report["problems"])
    assert call(app, "GET", "/v1/health").status_code == 200
    assert call(app, "GET", "/v1/head", headers=site.auth("reader")).status_code == 500
    assert release(app, site, "north", body()).status_code == 500
    session = call(app, "POST", "/login", data={"key": site.keys["reader"]}).cookies[SESSION_COOKIE]
    page = call(app, "GET", "/", headers=cookie_header(session))
    assert page.status_code == 200
    assert "chain head is entry 999" in page.text

"""Review 39 (service): a refusal the gate decides (a key without the route's action) stays
a 403 when the refusal log cannot be written, as one decided in a route does.

The gate's 403 wrote its refusal-log line unguarded, so a key store that failed at that
moment (busy past its timeout, disk full, a dropped PostgreSQL session inside the write)
turned the 403 into a generic 500 "internal error", logged as "a dpledger bug", while
the same failure behind a region-scope 403 (logged by the route's handler) kept its 403.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from _service import Site, body, call, snapshot

from dpledger.errors import StoreError


def _failing_log(*args: object, **kwargs: object) -> None:
    raise StoreError("key store ledger.keys.db: OperationalError")


@pytest.mark.parametrize(
    ("role", "method", "path"),
    [
        ("reader", "POST", "/v1/releases"),
        ("north", "GET", "/v1/keys"),
        ("auditor", "GET", "/v1/head"),
    ],
)
def test_an_action_refusal_stays_403_when_its_log_line_cannot_be_written(
    app: Any,
    site: Site,
    role: str,
    method: str,
    path: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(app.state.service.store, "log_refusal", _failing_log)
    before = snapshot(site.ledger)
    with caplog.at_level(logging.WARNING, logger="dpledger.service"):
        r = call(app, method, path, json=body(), headers=site.auth(role))
    assert r.status_code == 403, r.text
    assert r.json()["error"] == "not_permitted"
    assert r.json()["failed_checks"][0].startswith("scope: action")
    assert snapshot(site.ledger) == before
    assert "dpledger bug" not in caplog.text
    assert "could not log a refusal" in caplog.text


def test_a_region_refusal_stays_403_too(
    app: Any, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app.state.service.store, "log_refusal", _failing_log)
    r = call(app, "POST", "/v1/releases", json=body("south"), headers=site.auth("north"))
    assert r.status_code == 403, r.text

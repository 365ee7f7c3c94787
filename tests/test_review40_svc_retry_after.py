"""Review 40 (service): every 503 carries ``Retry-After``, and every error the one JSON shape.

A 503 from a route had ``Retry-After: 1``, but the same 503 from the gate (the key store
unavailable while authenticating) and the page's "ledger unavailable" had none, so a
client honouring it could not tell a retryable 503 from the rest. The 413, 404 and 405
bodies lacked ``failed_checks`` (the documented shape), and the OpenAPI document
declared the 413 as ``text/plain`` while it is JSON.
"""

from __future__ import annotations

from typing import Any

import pytest
from _service import Site, call

from dpledger.errors import StoreError


def _down(*_: object, **__: object) -> Any:
    raise StoreError("the database is down")


def test_the_gate_s_503_says_when_to_retry(
    app: Any, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app.state.service.store, "lookup", _down)
    r = call(app, "GET", "/v1/whoami", headers=site.auth("reader"))
    assert r.status_code == 503
    assert r.headers["retry-after"] == "1"
    assert r.json()["error"] == "store_unavailable"


def test_the_page_s_503_says_when_to_retry(
    app: Any, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dpledger.service.page as page

    monkeypatch.setattr(page, "collect", _down)
    r = call(app, "GET", "/", headers=site.auth("reader"))
    assert r.status_code == 503
    assert r.headers["retry-after"] == "1"


def test_a_route_s_503_still_says_it(app: Any, site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app.state.service.store, "refusals", _down)
    r = call(app, "GET", "/v1/refusals", headers=site.auth("reader"))
    assert (r.status_code, r.headers["retry-after"]) == (503, "1")


def test_413_404_and_405_have_the_one_error_shape(app: Any, site: Site) -> None:
    big = b"[" + b"1," * 600_000 + b"1]"
    r = call(app, "POST", "/v1/check", content=big, headers=site.auth("north"))
    assert r.status_code == 413
    assert set(r.json()) == {"error", "message", "failed_checks"}
    r = call(app, "GET", "/v1/nothing", headers=site.auth("reader"))
    assert (r.status_code, r.json()["failed_checks"]) == (404, [])
    r = call(app, "DELETE", "/v1/releases", headers=site.auth("admin"))
    assert (r.status_code, r.json()["failed_checks"]) == (405, [])


def test_the_schema_declares_the_413_as_json(app: Any) -> None:
    schema = call(app, "GET", "/openapi.json").json()
    declared = schema["paths"]["/v1/releases"]["post"]["responses"]["413"]["content"]
    assert list(declared) == ["application/json"]
    assert declared["application/json"]["schema"]["$ref"].endswith("/ErrorOut")


def test_the_schema_declares_retry_after_on_every_503(app: Any) -> None:
    schema = call(app, "GET", "/openapi.json").json()
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            if "503" in op["responses"]:
                assert "Retry-After" in op["responses"]["503"].get("headers", {}), (path, method)

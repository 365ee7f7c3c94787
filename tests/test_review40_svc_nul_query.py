"""Review 40 (service): a NUL in a read's query or path is a 422 or 404, not a 503.

PostgreSQL cannot take a NUL in a text parameter; ``GET /v1/entries?region=a%00b`` sent
it to the database, whose error became a 503 "the ledger's database is unavailable or
busy: retry" — a retry that can never succeed, and an operator's log line blaming the
database. SQLite answers the same read with no entries; both now answer alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _service import call, make_site

from dpledger.service import create_app


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    ledger = (
        str(tmp_path / "ledger.db")
        if request.param == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    site = make_site(ledger, tmp_path)
    app = create_app(site.settings(connections=1))
    yield app, site
    app.state.service.close()


@pytest.mark.parametrize(
    "url",
    ["/v1/entries?region=a%00b", "/v1/entries?metric=a%00b", "/v1/lifetime/a%00b",
     "/v1/budget/0/a%00b"],
)  # fmt: skip
def test_a_nul_in_a_read_is_not_a_database_outage(served: Any, url: str) -> None:
    app, site = served
    r = call(app, "GET", url, headers=site.auth("reader"))
    assert r.status_code in (200, 404, 422), r.text


@pytest.mark.parametrize(
    "field", ["region", "metric", "edges_version", "policy_version"]
)  # fmt: skip
@pytest.mark.parametrize("path", ["/v1/check", "/v1/releases"])
def test_a_nul_in_a_request_field_is_refused_as_input(served: Any, field: str, path: str) -> None:
    app, site = served
    fields = {"epoch": 0, "metric": "hist5", "region": "north", "cohort": 1000,
              "edges_version": "h5/v1", field: "a\u0000b"}  # fmt: skip
    body = {"request": fields, "aggregate": [1.0, 0.0, 0.0, 0.0, 0.0]}
    r = call(app, "POST", path, json=body, headers=site.auth("admin"))
    assert r.status_code == 422, r.text

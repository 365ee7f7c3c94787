"""Review 40 (service): a NUL in a region or metric cannot erase a refusal from the log.

The refusal log keeps each refused release and each scope refusal with the request's
public fields. ``ReleaseRequest`` admits any string of 1-64 characters for a region, NUL
included, and PostgreSQL's TEXT cannot hold NUL: the insert failed, and the refusal was
missing from ``GET /v1/refusals`` and the page (only the operator's log said a line was
lost). A key holder probing regions it lacks could so keep its attempts out of the log
the privacy team reads. A field that cannot be stored is now logged escaped.
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


@pytest.mark.parametrize("role", ["north", "admin"])
def test_a_refusal_naming_a_nul_region_is_logged(served: Any, role: str) -> None:
    app, site = served
    text = (
        '{"request": {"epoch": 0, "metric": "loss", "region": "no\\u0000rth", "cohort": 1000},'
        ' "aggregate": 800.0}'
    )
    headers = {**site.auth(role), "content-type": "application/json"}
    r = call(app, "POST", "/v1/releases", content=text.encode(), headers=headers)
    assert r.status_code in (403, 422), r.text
    logged = call(app, "GET", "/v1/refusals", headers=site.auth("reader")).json()["refusals"]
    assert len(logged) == 1, logged
    assert logged[0]["principal"] == site.principals[role]
    assert logged[0]["status"] == r.status_code

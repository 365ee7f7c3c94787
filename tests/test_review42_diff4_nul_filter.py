"""Review 42 diff 4: c438317 refuses an entries filter naming a region or metric no policy
of the ledger had (422), not an empty page — but ``GET /v1/entries?region=a%00b`` kept
review 40's shortcut, 200 with no entries ("nothing released there"), and the library's
``entries(region='a\\0b')`` on PostgreSQL sent the NUL to the database (a StoreError, "retry").
A name with a NUL is no policy's: refused as input everywhere, never sent to a database."""

from __future__ import annotations

from pathlib import Path

import pytest
from _service import call, make_site

import dpledger as dl
from dpledger.service import create_app


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "ledger.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.mark.parametrize("query", ["region=a%00b", "metric=a%00b", "region=nrth"])
def test_an_impossible_filter_is_refused_as_input(target: str, tmp_path: Path, query: str) -> None:
    site = make_site(target, tmp_path)
    app = create_app(site.settings(connections=1))
    try:
        r = call(app, "GET", f"/v1/entries?{query}", headers=site.auth("reader"))
    finally:
        app.state.service.close()
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "invalid_input"


def test_the_library_refuses_a_nul_name_without_the_database(target: str, tmp_path: Path) -> None:
    site = make_site(target, tmp_path)
    with dl.Ledger.open(target, site.policy, mode="read") as ledger:
        for kw in ({"region": "a\0b"}, {"metric": "a\0b"}):
            with pytest.raises(dl.InvalidInput, match="unknown"):
                ledger.entries(**kw)
        assert ledger.entries(region="north") == []

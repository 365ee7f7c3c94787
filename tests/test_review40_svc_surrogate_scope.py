"""Review 40 (service): a region or metric a key lacks is named safely in its 403.

The scope check reads ``region`` and ``metric`` as sent, before validation, and the 403
named them verbatim. A JSON escape ``"\\ud800"`` (a lone surrogate, which Python's JSON
reader accepts) made the error body unencodable: a 500 "internal error" and a traceback
line in the operator's log instead of the 403. A name holding a newline was written as
is into the log line of the refusal, where it could forge a second line. A name that
cannot be a scope's (not 1-64 printable ASCII characters) is now quoted, escaped and cut.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from _service import Site, call, snapshot

REQ = (
    '{"request": {"epoch": 0, "metric": "loss", "region": "north", "cohort": 1000}, "aggregate": 1}'
)


def _post(app: Any, site: Site, path: str, text: str) -> Any:
    headers = {**site.auth("north"), "content-type": "application/json"}
    return call(app, "POST", path, content=text.encode(), headers=headers)


@pytest.mark.parametrize("path", ["/v1/check", "/v1/releases"])
@pytest.mark.parametrize("field", ['"region": "north"', '"metric": "loss"'])
def test_a_lone_surrogate_out_of_scope_is_a_403_not_a_500(
    app: Any, site: Site, path: str, field: str
) -> None:
    name = field.split(":")[0]
    text = REQ.replace(field, f'{name}: "\\ud800x"')
    before = snapshot(site.ledger)
    r = _post(app, site, path, text)
    assert r.status_code == 403, r.text
    assert r.json()["error"] == "not_permitted"
    assert "\\ud800x" in r.json()["message"]  # escaped, readable
    assert snapshot(site.ledger) == before


def test_a_newline_in_a_region_forges_no_log_line(
    app: Any, site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    forged = "x\\n2026-01-01 00:00:00 CRITICAL dpledger.service: forged"
    text = REQ.replace('"region": "north"', f'"region": "{forged}"')
    with caplog.at_level(logging.WARNING, logger="dpledger.service"):
        r = _post(app, site, "/v1/releases", text)
    assert r.status_code == 403, r.text
    assert not any("\n" in rec.getMessage() for rec in caplog.records)
    refusal = call(app, "GET", "/v1/refusals", headers=site.auth("reader")).json()
    assert "\n" not in refusal["refusals"][0]["failed_checks"][0]


def test_a_long_region_is_cut_in_the_403(app: Any, site: Site) -> None:
    text = REQ.replace('"region": "north"', f'"region": "{"é" * 5000}"')
    r = _post(app, site, "/v1/check", text)
    assert r.status_code == 403, r.text
    assert len(r.text) < 1000


def test_a_valid_name_is_still_named_as_sent(app: Any, site: Site) -> None:
    r = _post(app, site, "/v1/check", REQ.replace('"region": "north"', '"region": "south"'))
    assert r.status_code == 403
    assert r.json()["failed_checks"] == ["scope: region south"]

"""Review 39 (service): an out-of-scope key gets its 403 (and a refusal-log line) even
when the request's other public fields are invalid.

``scope_first`` decides region and metric scopes before the body is validated, and builds
the refusal log's public fields with ``ReleaseRequest.model_validate``, catching pydantic's
``ValidationError`` for a request too broken to record. But dpledger's models raise their
own ``InvalidInput`` instead, so that error escaped the scope check: a key scoped to
``north`` asking for ``south`` with, say, ``"cohort": "1000"`` got a 422 and no refusal-log
line, instead of the documented 403 "whatever its aggregate" and the log line that shows
the operator who tried to spend outside its scopes.
"""

from __future__ import annotations

from typing import Any

import pytest
from _service import Site, call, snapshot

BROKEN = {
    "cohort as text": {"cohort": "1000"},
    "cohort zero": {"cohort": 0},
    "an extra field": {"cohort": 1000, "shard": 3},
    "no cohort": {},
}
NAMES = {  # the region is out of scope; the metric is broken or missing
    "metric a number": {"region": "south", "metric": 5, "cohort": 1000},
    "no metric": {"region": "south", "cohort": 1000},
}


@pytest.mark.parametrize("path", ["/v1/check", "/v1/releases"])
@pytest.mark.parametrize("case", list(BROKEN))
def test_out_of_scope_is_403_and_logged_whatever_else_the_request_holds(
    app: Any, site: Site, path: str, case: str
) -> None:
    request = {"epoch": 0, "metric": "loss", "region": "south", **BROKEN[case]}
    before = snapshot(site.ledger)
    r = call(
        app, "POST", path, json={"request": request, "aggregate": 800.0}, headers=site.auth("north")
    )
    assert r.status_code == 403, r.text
    assert r.json()["failed_checks"] == ["scope: region south"]
    assert snapshot(site.ledger) == before
    logged = call(app, "GET", "/v1/refusals", headers=site.auth("admin")).json()["refusals"]
    assert len(logged) == 1
    assert logged[0]["principal"] == site.principals["north"]
    assert logged[0]["status"] == 403
    assert logged[0]["failed_checks"] == ["scope: region south"]
    assert logged[0]["region"] is None  # an invalid request's fields are not recorded


def test_in_scope_the_same_request_is_still_a_422(app: Any, site: Site) -> None:
    request = {"epoch": 0, "metric": "loss", "region": "north", "cohort": "1000"}
    r = call(app, "POST", "/v1/releases", json={"request": request, "aggregate": 800.0},
             headers=site.auth("north"))  # fmt: skip
    assert r.status_code == 422, r.text


@pytest.mark.parametrize("case", list(NAMES))
def test_a_region_out_of_scope_is_403_whatever_the_metric(app: Any, site: Site, case: str) -> None:
    request = {"epoch": 0, **NAMES[case]}
    before = snapshot(site.ledger)
    r = call(app, "POST", "/v1/releases", json={"request": request, "aggregate": 800.0},
             headers=site.auth("north"))  # fmt: skip
    assert r.status_code == 403, r.text
    assert r.json()["failed_checks"] == ["scope: region south"]
    assert snapshot(site.ledger) == before


def test_a_metric_out_of_scope_is_403_whatever_the_region(app: Any, site: Site) -> None:
    request = {"epoch": 0, "metric": "loss_b", "region": ["north"], "cohort": 1000}
    r = call(app, "POST", "/v1/check", json={"request": request, "aggregate": 800.0},
             headers=site.auth("north"))  # fmt: skip
    assert r.status_code == 403, r.text
    assert r.json()["failed_checks"] == ["scope: metric loss_b"]

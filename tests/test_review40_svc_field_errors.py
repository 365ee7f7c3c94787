"""Review 40 (service): a 422 lists at most 50 field errors, not one per wrong value.

An aggregate of 100,000 ``null``s (a half-megabyte body, within the limit) was answered
with 100,001 field errors: a 10-megabyte body, and seconds of CPU to build it, for any
key that may check; a plan body of 60,000 unknown fields did the same for a read-only
key. The count is still given; the list is cut to the first 50.
"""

from __future__ import annotations

from typing import Any

from _service import Site, call

REQUEST = '{"epoch": 0, "metric": "loss", "region": "north", "cohort": 1000}'


def test_a_wrong_aggregate_of_many_values_gets_a_short_answer(app: Any, site: Site) -> None:
    text = '{"request": ' + REQUEST + ', "aggregate": [' + ",".join(["null"] * 100_000) + "]}"
    headers = {**site.auth("north"), "content-type": "application/json"}
    r = call(app, "POST", "/v1/check", content=text.encode(), headers=headers)
    assert r.status_code == 422
    assert len(r.content) < 20_000
    assert r.json()["message"] == "100001 invalid fields: see errors (the first 50)"
    assert len(r.json()["errors"]) == 50


def test_a_plan_of_many_unknown_fields_gets_a_short_answer(app: Any, site: Site) -> None:
    extra = ",".join(f'"x{i}": 1' for i in range(60_000))
    text = '{"cohorts": {"north": 1}, ' + extra + "}"
    headers = {**site.auth("reader"), "content-type": "application/json"}
    r = call(app, "POST", "/v1/plan", content=text.encode(), headers=headers)
    assert r.status_code == 422
    assert len(r.json()["errors"]) == 50
    assert len(r.content) < 20_000


def test_a_few_errors_are_all_listed(app: Any, site: Site) -> None:
    text = '{"request": ' + REQUEST + ', "aggregate": "x"}'
    headers = {**site.auth("north"), "content-type": "application/json"}
    r = call(app, "POST", "/v1/check", content=text.encode(), headers=headers)
    assert r.status_code == 422
    assert r.json()["message"] == "2 invalid fields: see errors"
    assert len(r.json()["errors"]) == 2

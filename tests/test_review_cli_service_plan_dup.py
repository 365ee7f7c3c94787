"""``POST /v1/plan`` refuses a body naming a key twice, as check and release do: JSON
keeps the last of two equal keys silently, so ``{"north": 5, "north": 6}`` was planned
for 6 clients while the caller may have meant 5 (a 200 for an ambiguous body)."""

from __future__ import annotations

from typing import Any

import pytest
from _service import Site, call

pytest.importorskip("fastapi")


@pytest.mark.parametrize(
    "raw",
    [
        b'{"cohorts": {"north": 5, "north": 6}, "epoch": 0}',
        b'{"cohorts": {"north": 5}, "epoch": 0, "epoch": 1}',
    ],
)
def test_a_plan_body_naming_a_key_twice_is_refused(raw: bytes, app: Any, site: Site) -> None:
    headers = {**site.auth("reader"), "content-type": "application/json"}
    r = call(app, "POST", "/v1/plan", content=raw, headers=headers)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "invalid_input"
    assert "appears twice" in r.json()["message"]


def test_a_plan_body_with_each_key_once_still_plans(app: Any, site: Site) -> None:
    headers = {**site.auth("reader"), "content-type": "application/json"}
    raw = b'{"cohorts": {"north": 5, "south": 6}, "epoch": 0}'
    assert call(app, "POST", "/v1/plan", content=raw, headers=headers).status_code == 200

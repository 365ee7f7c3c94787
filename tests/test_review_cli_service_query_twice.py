"""A query parameter given twice is refused (422), as an unknown one is and as a body key
given twice is: ``/v1/verify?expected_head=A&expected_head=B`` checked only B (the last),
and ``/v1/entries?epoch=1&epoch=2`` listed epoch 2, each a 200 for an ambiguous query."""

from __future__ import annotations

from typing import Any

import pytest
from _service import Site, call

pytest.importorskip("fastapi")

HEAD0 = "0:" + "0" * 64


@pytest.mark.parametrize(
    ("role", "url"),
    [
        ("reader", "/v1/entries?epoch=1&epoch=2"),
        ("auditor", f"/v1/verify?expected_head={HEAD0}&expected_head=1:{'f' * 64}"),
        ("reader", "/v1/refusals?limit=1&limit=2"),
    ],
)
def test_a_query_parameter_given_twice_is_refused(
    role: str, url: str, app: Any, site: Site
) -> None:
    r = call(app, "GET", url, headers=site.auth(role))
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "invalid_input"
    assert "more than once" in r.json()["message"]


def test_each_parameter_once_still_answers(app: Any, site: Site) -> None:
    r = call(app, "GET", "/v1/entries?epoch=1&limit=5", headers=site.auth("reader"))
    assert r.status_code == 200, r.text

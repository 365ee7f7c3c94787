"""Review 40 (service): an ``expected_head`` past the largest entry id says so.

The query pattern admits 19 digits, up to 9,999,999,999,999,999,999, past the largest
entry id (2⁶³ − 1). Such an anchor was refused with "expected_head must be an
(entry_id, 64-hex entry_hash) pair" — which it is — leaving the caller to guess; it is a
422 naming the entry id and where a valid anchor comes from.
"""

from __future__ import annotations

from typing import Any

from _service import Site, call


def test_an_anchor_past_the_largest_entry_id_is_named(app: Any, site: Site) -> None:
    url = "/v1/verify?expected_head=9999999999999999999:" + "a" * 64
    r = call(app, "GET", url, headers=site.auth("auditor"))
    assert r.status_code == 422
    assert "9999999999999999999" in r.json()["message"]
    assert "/v1/head" in r.json()["message"]


def test_the_largest_entry_id_is_still_an_anchor(app: Any, site: Site) -> None:
    url = f"/v1/verify?expected_head={2**63 - 1}:" + "a" * 64
    r = call(app, "GET", url, headers=site.auth("auditor"))
    assert r.status_code == 200, r.text
    assert not r.json()["ok"]

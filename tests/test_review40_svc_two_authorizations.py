"""Review 40 (service): two ``Authorization`` headers are a 401, not the first key's call.

The gate read the first ``Authorization`` header and ignored the rest, so a request
carrying two keys (a proxy adding its own, a client library merging defaults) ran as
whichever came first, while a proxy or framework in front may honour the other: the
principal recorded in the chain was chosen by header order. Two ``Idempotency-Key``
headers and a query parameter given twice are refused for the same reason; so are two
keys (401, the one answer, the cause logged), and the page signs in with neither.
"""

from __future__ import annotations

import json
from typing import Any

from _service import Site, body, call, snapshot


def test_two_keys_are_refused(app: Any, site: Site) -> None:
    headers = [
        ("Authorization", f"Bearer {site.keys['reader']}"),
        ("Authorization", f"Bearer {site.keys['admin']}"),
    ]
    r = call(app, "GET", "/v1/whoami", headers=headers)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"


def test_the_same_key_twice_is_refused_and_nothing_is_spent(app: Any, site: Site) -> None:
    headers = [
        ("Authorization", f"Bearer {site.keys['north']}"),
        ("Authorization", f"Bearer {site.keys['north']}"),
        ("Content-Type", "application/json"),
    ]
    before = snapshot(site.ledger)
    r = call(app, "POST", "/v1/releases", content=json.dumps(body()).encode(), headers=headers)
    assert r.status_code == 401
    assert snapshot(site.ledger) == before


def test_the_page_takes_neither_of_two_keys(app: Any, site: Site) -> None:
    headers = [
        ("Authorization", f"Bearer {site.keys['reader']}"),
        ("Authorization", f"Bearer {site.keys['admin']}"),
    ]
    r = call(app, "GET", "/", headers=headers)
    assert r.status_code == 303
    assert r.headers["location"] == "/login"


def test_one_key_in_any_case_still_works(app: Any, site: Site) -> None:
    r = call(app, "GET", "/v1/whoami", headers={"authorization": f"bearer {site.keys['reader']}"})
    assert r.status_code == 200

"""Review 39 (service): an ``Idempotency-Key`` header given twice is refused, not read as
its first copy.

The release id is what makes a retry safe. With two ``Idempotency-Key`` headers the
service silently took the first, while a proxy or a retrying client layer may keep,
replace or reorder either: two attempts of one release could then carry different ids
and be charged twice. The service refuses a query parameter given twice and a body
naming a key twice for the same reason ("only the last would count"); the header is
refused the same way (422, nothing spent).
"""

from __future__ import annotations

import json
from typing import Any

from _service import Site, body, call, snapshot


def test_two_idempotency_keys_are_a_422_and_nothing_is_spent(app: Any, site: Site) -> None:
    headers = [
        ("Authorization", f"Bearer {site.keys['north']}"),
        ("Idempotency-Key", "round-1/north/loss"),
        ("Idempotency-Key", "round-1/north/loss-again"),
        ("Content-Type", "application/json"),
    ]
    before = snapshot(site.ledger)
    r = call(app, "POST", "/v1/releases", content=json.dumps(body()).encode(), headers=headers)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "invalid_input"
    assert "Idempotency-Key" in r.json()["message"]
    assert snapshot(site.ledger) == before


def test_one_idempotency_key_still_releases(app: Any, site: Site) -> None:
    headers = {**site.auth("north"), "Idempotency-Key": "round-1/north/loss"}
    r = call(app, "POST", "/v1/releases", json=body(), headers=headers)
    assert r.status_code == 201, r.text
    assert r.json()["release_id"] == "round-1/north/loss"

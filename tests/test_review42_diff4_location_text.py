"""Review 42 diff 4: a 4xx message replaced every occurrence of the ledger's location
text with "the ledger" (025881f), so a ledger served by a relative name that is also a
word of the message (``--ledger ledger``) garbled it: "the ledger's policies' regions"
became "the the ledger's policies' regions"."""

from __future__ import annotations

from pathlib import Path

import pytest
from _service import call, make_site

from dpledger.service.app import create_app


def test_a_relative_ledger_name_leaves_the_message_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    site = make_site("ledger", tmp_path)
    app = create_app(site.settings())
    r = call(app, "GET", "/v1/entries?region=nrth", headers=site.auth("admin"))
    assert r.status_code == 422
    assert "the the ledger" not in r.json()["message"]
    assert "the ledger's policies' regions" in r.json()["message"]

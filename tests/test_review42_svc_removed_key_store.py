"""Review 42 (service): a key store restored over (``mv``) or removed under a running
``dpledger serve`` must not go on authenticating from the file it replaced.

Before the fix the service kept using its unlinked key store: a revocation over the API
answered 200 into a file that vanished with the process, so the key was alive again once
the service restarted on the file at the name (``keys revoke`` on that file is refused
while the service holds the previous one). The store now refuses once its file has no
name left (503: restart the service).
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import httpx2
import pytest
from _service import Served, make_site

from dpledger.service.store import ServiceStore, default_location

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="an unlinked file is seen through /proc"
)


def test_a_revocation_into_a_replaced_key_store_is_refused(tmp_path: Path) -> None:
    site = make_site(str(tmp_path / "ledger.db"), tmp_path)
    keys = Path(default_location(site.ledger))
    copy = tmp_path / "keys-backup.db"
    north = site.principals["north"].split("/")[1]
    with (
        Served(site, log=tmp_path / "serve.log") as server,
        httpx2.Client(base_url=server.url, headers=site.auth("admin"), timeout=60) as http,
    ):
        assert http.get("/v1/whoami").status_code == 200
        with sqlite3.connect(keys) as src, sqlite3.connect(copy) as dst:
            src.backup(dst)
        os.replace(copy, keys)  # a restore over the live name, as the docs forbid
        revoked = http.post(f"/v1/keys/{north}/revoke")
        whoami = http.get("/v1/whoami")
    # it was 200: revoked in a file no name reached, so alive again after a restart
    assert revoked.status_code == 503, revoked.text
    assert whoami.status_code == 503, whoami.text
    with ServiceStore.open(str(keys), ledger=site.ledger) as store:
        key = store.key(north)
        assert key is not None
        assert key.active  # what the store at the name says, and the service said so

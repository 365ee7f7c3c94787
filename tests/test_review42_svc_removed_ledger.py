"""Review 42 (service): a SQLite ledger removed (or restored over by ``mv``) under a
running ``dpledger serve`` must not take more releases.

Before the fix the service kept its connections to the unlinked file and went on
answering 201 — charging ε, returning noisy values — into a file no name reached: every
such release vanished when the service stopped, and the budget it spent could be spent
again from the file now at the ledger's name (a re-created ledger, or a restored backup).
A writer now refuses (503, nothing recorded) once the file it holds has no name left.
A ledger merely renamed while in use keeps taking releases (its file keeps them).
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import httpx2
import pytest
from _service import Served, body, make_site

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="an unlinked file is seen through /proc"
)


def _release(url: str, auth: dict[str, str], rid: str) -> httpx2.Response:
    with httpx2.Client(base_url=url, headers=auth, timeout=60) as http:
        return http.post("/v1/releases", json=body(), headers={"Idempotency-Key": rid})


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def test_a_removed_ledger_takes_no_more_releases(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    site = make_site(str(path), tmp_path)
    with Served(site, log=tmp_path / "serve.log") as server:
        assert _release(server.url, site.auth("admin"), "first").status_code == 201
        _remove(path)
        r = _release(server.url, site.auth("admin"), "second")
        assert r.status_code == 503, r.text
        assert r.json()["error"] == "store_unavailable"
        assert "value" not in r.json()
    assert not path.exists()  # nothing re-created the ledger either
    assert "removed" in (tmp_path / "serve.log").read_text()


def test_a_backup_moved_over_a_served_ledger_is_not_written_past(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    site = make_site(str(path), tmp_path)
    backup = tmp_path / "backup.db"
    with Served(site, log=tmp_path / "serve.log") as server:
        assert _release(server.url, site.auth("admin"), "first").status_code == 201
        with sqlite3.connect(path) as src, sqlite3.connect(backup) as dst:
            src.backup(dst)
        assert _release(server.url, site.auth("admin"), "second").status_code == 201
        os.replace(backup, path)  # a restore over the live name, as the docs forbid
        r = _release(server.url, site.auth("admin"), "third")
        assert r.status_code == 503, r.text
    with sqlite3.connect(path) as conn:  # the restored file: the backup's one entry
        assert conn.execute("SELECT count(*) FROM dpl_entries WHERE seq > 0").fetchone() == (1,)


def test_a_renamed_served_ledger_still_takes_releases(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    site = make_site(str(path), tmp_path)
    with Served(site, log=tmp_path / "serve.log") as server:
        assert _release(server.url, site.auth("admin"), "first").status_code == 201
        os.rename(path, tmp_path / "moved.db")
        assert _release(server.url, site.auth("admin"), "second").status_code == 201

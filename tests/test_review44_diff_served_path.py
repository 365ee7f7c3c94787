"""Review 44 diff: ``serve`` opened its SQLite ledger at ``os.path.abspath(--ledger)``
(0080c10), which normalises ``..`` lexically. Through a symlinked directory the OS
resolves ``link/../ledger.db`` to the ledger beside the link's *target*, where its key
store and the CLI (``_ledger_exists``, ``ledger show``) find it; ``abspath`` named a
different file beside the link, and the service refused to start (LedgerNotFound, naming
that other path) in front of a ledger that exists. ``abspath`` also dropped what the
path checks refuse: a final separator (``ledger.db/`` served the file ``ledger.db``) and
leading padding (`` ledger.db`` was looked for as ``/cwd/ ledger.db``, not refused).
Deterministic (no statistics)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _service import body, call, make_site

from dpledger.errors import InvalidInput
from dpledger.ledger import Ledger
from dpledger.service.app import create_app


def test_a_path_through_a_symlink_serves_the_ledger_the_os_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "real"
    (real / "sub").mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    (work / "link").symlink_to(real / "sub", target_is_directory=True)
    site = make_site(str(real / "ledger.db"), real)
    monkeypatch.chdir(work)
    site.ledger = os.path.join("link", "..", "ledger.db")  # the OS: real/ledger.db
    assert Path(site.ledger).resolve() == (real / "ledger.db").resolve()
    app = create_app(site.settings())
    try:
        r = call(app, "POST", "/v1/releases", json=body(), headers=site.auth("admin"))
        assert r.status_code == 201, r.text
    finally:
        app.state.service.close()
    assert not (work / "ledger.db").exists(), "a second ledger was created"
    with Ledger.open(str(real / "ledger.db"), site.policy, mode="read") as ledger:
        assert len(ledger.entries()) == 1  # the release was charged to the real ledger


def test_a_path_ending_in_a_separator_is_still_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = make_site(str(tmp_path / "ledger.db"), tmp_path)
    monkeypatch.chdir(tmp_path)
    site.ledger = "ledger.db" + os.sep  # names a directory; the key store is found anyway
    with pytest.raises(InvalidInput, match="directory"):
        create_app(site.settings(keys=str(tmp_path / "ledger.keys.db")))


def test_a_padded_path_is_still_refused_as_padded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = make_site(str(tmp_path / "ledger.db"), tmp_path)
    monkeypatch.chdir(tmp_path)
    site.ledger = " ledger.db"  # another file than ledger.db: refused, never looked for
    with pytest.raises(InvalidInput, match="whitespace"):
        create_app(site.settings(keys=str(tmp_path / "ledger.keys.db")))

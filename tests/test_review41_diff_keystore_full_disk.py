"""Opening an existing key store on a full disk (review 41, diff review).

Review 41 named a full disk when a ledger is opened there (SQLite cannot grow the
``-shm``: SQLITE_IOERR_SHMSIZE, "disk I/O error"), and kept SQLite's "database or disk is
full" when a key store is created there. One step to the side, ``keys create`` or ``keys
revoke`` on a key store that exists said only "cannot open the key store L.keys.db: disk
I/O error": nothing about what to check. It now says, as the ledger does, to check the
file system's free space and retry.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _mounts import cli as _cli
from _mounts import small_tmpfs
from factories import SPATIAL

from dpledger.errors import StoreError
from dpledger.service import store_files


def test_an_io_error_opening_the_key_store_says_what_to_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "L.db"
    assert _cli("ledger", "init", "--policy", str(SPATIAL), "--ledger", str(ledger)).returncode == 0
    made = _cli("keys", "create", "--ledger", str(ledger), "--name", "a", "--action", "read")
    assert made.returncode == 0, made.stderr

    def full(*_: Any, **__: Any) -> sqlite3.Connection:
        e = sqlite3.OperationalError("disk I/O error")
        e.sqlite_errorcode = 4874  # type: ignore[attr-defined]  # SQLITE_IOERR_SHMSIZE
        raise e

    monkeypatch.setattr(store_files.sqlite_files, "connect", full)
    with pytest.raises(StoreError, match="free space") as e:
        store_files.connect(tmp_path / "L.keys.db", read_only=False)
    assert isinstance(e.value.__cause__, sqlite3.Error)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs (root and ``mount`` only; else skipped)."""
    yield from small_tmpfs(tmp_path)


def test_keys_create_with_an_existing_store_on_a_full_disk(small_fs: Path) -> None:
    ledger = small_fs / "L.db"
    assert _cli("ledger", "init", "--policy", str(SPATIAL), "--ledger", str(ledger)).returncode == 0
    create = ["keys", "create", "--ledger", str(ledger), "--action", "read", "--name"]
    assert _cli(*create, "a").returncode == 0
    st = os.statvfs(small_fs)
    filler = small_fs / "filler"
    filler.write_bytes(b"\0" * max(0, st.f_bavail * st.f_frsize - 4096))
    r = _cli(*create, "b")
    assert r.returncode == 2, r.stderr
    assert "free space" in r.stderr, r.stderr
    filler.unlink()
    listed = _cli("keys", "list", "--ledger", str(ledger))
    assert " b " not in listed.stdout

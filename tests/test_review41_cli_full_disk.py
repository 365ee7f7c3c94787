"""A release on a full disk (review 41).

With the ledger's file system full, ``dpledger release`` failed opening the ledger: SQLite
could not grow its ``-shm`` (SQLITE_IOERR_SHMSIZE), and the error read "L.db is not a
readable SQLite database: disk I/O error" (a LedgerCorrupted): an operator is sent to
restore a ledger that is fine. Now it names the disk, exit 2; the ledger is unchanged,
nothing is spent, and the same release after space is freed is charged once.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from _mounts import cli as _cli
from _mounts import small_tmpfs
from factories import SPATIAL

from dpledger.ledger.sqlite_errors import out_of_reach

RELEASE = ["--metric", "clipped_mean_loss", "--region", "eu-west", "--cohort", "2400"]


def test_an_io_error_opening_is_not_damage() -> None:
    e = sqlite3.OperationalError("disk I/O error")
    e.sqlite_errorcode = 4874  # type: ignore[attr-defined]  # SQLITE_IOERR_SHMSIZE
    assert "free space" in out_of_reach(e)
    e.sqlite_errorcode = 11  # type: ignore[attr-defined]  # SQLITE_CORRUPT: damage, not reach
    assert out_of_reach(e) == ""


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs (root and ``mount`` only; else skipped)."""
    yield from small_tmpfs(tmp_path)


def _fill(where: Path, leave: int) -> Path:
    """A file taking all but ``leave`` bytes of ``where``'s file system."""
    st = os.statvfs(where)
    filler = where / "filler"
    with filler.open("wb") as f:
        f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))
    return filler


def test_a_full_disk_is_named_and_spends_nothing(small_fs: Path, tmp_path: Path) -> None:
    ledger, agg = small_fs / "L.db", tmp_path / "a.json"
    agg.write_text("1234.5")
    at = ["--policy", str(SPATIAL), "--ledger", str(ledger)]
    assert _cli("ledger", "init", *at).returncode == 0
    before = ledger.read_bytes()
    filler = _fill(small_fs, 8192)  # too little for SQLite's 32 KiB -shm
    release = ["release", *at, "--epoch", "0", *RELEASE, "--aggregate", str(agg)]
    r = _cli(*release)
    assert r.returncode == 2, r.stderr
    assert "not a readable" not in r.stderr, r.stderr
    assert "free space" in r.stderr, r.stderr
    assert ledger.read_bytes() == before
    filler.unlink()
    assert _cli(*release).returncode == 0  # retried once space is back: charged once
    shown = _cli("ledger", "show", *at, "--json")
    assert json.loads(shown.stdout)["entries"] == 1


def test_a_key_store_on_a_full_disk_says_so(small_fs: Path, tmp_path: Path) -> None:
    """``keys create`` said only "…creating: OperationalError" (SQLite's message dropped)."""
    ledger = small_fs / "L.db"
    assert _cli("ledger", "init", "--policy", str(SPATIAL), "--ledger", str(ledger)).returncode == 0
    filler = _fill(small_fs, 4096)
    r = _cli("keys", "create", "--ledger", str(ledger), "--name", "ci", "--action", "read")
    assert r.returncode == 2, r.stderr
    assert "disk is full" in r.stderr, r.stderr  # (the tmp_path name holds "full")
    assert sorted(p.name for p in small_fs.iterdir()) == ["L.db", "filler"]
    filler.unlink()

"""Review 41 (pg): an SQLite write that fails says that nothing was recorded and what to do.

The PostgreSQL store says it ("another writer held the ledger lock for over 60 s;
nothing was recorded, retry the release"; "nothing was recorded by this statement").
The SQLite store passed SQLite's words on alone: a round that met a full disk was
"SQLite ledger L.db: database or disk is full", a writer that waited out the write lock
"SQLite ledger L.db: database is locked" — no word of whether the round was recorded
(it was not: the transaction is rolled back) nor of what to do.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dpledger.approval import ReleaseRequest
from dpledger.errors import StoreError
from dpledger.ledger import Ledger
from dpledger.ledger.sqlite import SqliteStore

try:
    from ._stores import CONTRACT
except ImportError:  # pytest's rootdir-relative import mode
    from _stores import CONTRACT


def _round(n: int) -> list[tuple[ReleaseRequest, object]]:
    return [
        (ReleaseRequest(epoch=e, metric="loss", region="a", cohort=1000, release_id=f"r{e}"), 30.0)
        for e in range(n)
    ]


def _ledger(tmp_path: Path) -> str:
    path = str(tmp_path / "L.db")
    with Ledger.open(path, CONTRACT, mode="create") as ledger:
        ledger.release_round(_round(1))
    return path


def test_a_round_that_meets_a_full_disk_says_nothing_was_recorded(tmp_path: Path) -> None:
    path = _ledger(tmp_path)
    with Ledger.open(path, CONTRACT) as ledger:
        conn: Any = ledger._store._conn  # type: ignore[attr-defined]
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        conn.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full from here on
        with pytest.raises(StoreError, match="full") as failed:
            ledger.release_round(_round(300))
        assert "nothing was recorded" in str(failed.value)
        assert len(ledger) == 1
        conn.execute("PRAGMA max_page_count = 1073741823")
        assert len(ledger.release_round(_round(300)).releases) == 300  # once there is room
        assert ledger.verify().ok


def test_a_writer_that_waits_out_the_write_lock_says_nothing_was_recorded(
    tmp_path: Path,
) -> None:
    path = _ledger(tmp_path)
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with Ledger(SqliteStore(path, "write", timeout_s=0.1), CONTRACT) as ledger:
            with pytest.raises(StoreError) as failed:
                ledger.release_round(_round(2))
            text = str(failed.value)
            assert "nothing was recorded" in text
            assert "retry" in text
            holder.rollback()
            assert ledger.release_round(_round(2)).charged.amount * 10 == 1
            assert ledger.verify().ok
    finally:
        holder.close()

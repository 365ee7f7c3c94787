"""Reading a ledger whose sidecars a crash or a copy left behind (review 39).

1. An ``X-shm`` without its ``X-wal`` (a copy taken with the index but not the log; no
   WAL connection has it open: one creates its ``-wal`` before its ``-shm`` and removes
   it after): a read opened it ``mode=ro`` and SQLite created a 0-byte ``X-wal`` beside
   the ledger, and rewrote the ``-shm`` on every read — "a read never creates or changes
   a ledger" broken.
2. A hot rollback journal (a writer of a journal-mode ledger killed mid-transaction, its
   pages spilled into the file): a read opened the torn file ``immutable`` (SQLite then
   ignores the journal) and reported the sound ledger "damaged ... restore it from a
   backup" (``verify`` exit 1, ``show`` exit 2). A writer rolls the journal back; the read
   now does so in a private copy, and sees the committed ledger, changing nothing.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from factories import SPATIAL, spatial

from dpledger import Ledger, ReleaseRequest
from dpledger.cli.main import main

REQ = ReleaseRequest(epoch=0, metric="clipped_mean_loss", region="eu-west", cohort=2400)
READS = (["ledger", "show"], ["ledger", "verify"], ["ledger", "export"], ["ledger", "lifetime"])


def _ledger(path: Path) -> None:
    with Ledger.open(path, spatial(), mode="create") as ledger:
        ledger.release(REQ, np.float64(1234.5))


def _files(d: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(d.iterdir())}


def _at(path: Path) -> list[str]:
    return ["--policy", str(SPATIAL), "--ledger", str(path)]


def test_a_shm_without_its_wal_is_read_without_creating_or_changing_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "L.db"
    _ledger(base)
    conn = sqlite3.connect(base)  # a WAL connection: its -wal and -shm exist while open
    conn.execute("SELECT count(*) FROM dpl_entries").fetchall()
    shutil.copyfile(f"{base}-shm", tmp_path / "kept-shm")
    conn.close()  # removes both
    (tmp_path / "kept-shm").rename(f"{base}-shm")  # a copy with the index, not the log
    before = _files(tmp_path)
    with Ledger.open(base, spatial(), mode="read") as ledger:
        assert len(ledger) == 1
        assert ledger.verify().ok
    assert _files(tmp_path) == before
    for cmd in READS:
        assert main([*cmd, *_at(base)]) == 0, capsys.readouterr().err
        assert _files(tmp_path) == before, cmd


_HOT_JOURNAL = """
import os, signal, sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA cache_size=1")
c.execute("BEGIN IMMEDIATE")
for i in range(200):
    c.execute("INSERT INTO dpl_meta (key, value) VALUES (?, ?)", (f"junk{i}", "x" * 3000))
c.execute("DROP TRIGGER dpl_spend_no_delete")  # then rewrites pages the ledger uses
c.execute("DELETE FROM dpl_spend")
c.execute("UPDATE dpl_meta SET value = '999' WHERE key = 'head_seq'")
os.kill(os.getpid(), signal.SIGKILL)  # pages spilled into the file, the journal is hot
"""


def test_a_hot_rollback_journal_is_rolled_back_in_a_private_copy_by_a_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "L.db"
    _ledger(base)
    conn = sqlite3.connect(base)
    conn.execute("PRAGMA journal_mode=DELETE")  # a ledger someone switched to a journal
    conn.close()
    subprocess.run([sys.executable, "-c", _HOT_JOURNAL, str(base)], check=False)
    assert Path(f"{base}-journal").stat().st_size > 0
    before = _files(tmp_path)
    with Ledger.open(base, spatial(), mode="read") as ledger:
        assert len(ledger) == 1
        report = ledger.verify()
        assert report.ok, report.problems
        assert not any(k.startswith("junk") for k in ledger._store.meta())
    assert _files(tmp_path) == before  # nothing rolled back in place, nothing created
    for cmd in READS:
        assert main([*cmd, *_at(base)]) == 0, capsys.readouterr().err
        assert _files(tmp_path) == before, cmd
    with Ledger.open(base, spatial(), mode="write") as ledger:  # a writer rolls it back
        assert len(ledger) == 1
        assert ledger.verify().ok
    assert not Path(f"{base}-journal").exists()


def test_a_key_store_with_a_shm_without_its_wal_is_read_without_creating_a_file(
    tmp_path: Path,
) -> None:
    from dpledger.service.keys import Scopes
    from dpledger.service.store import ServiceStore

    keys = tmp_path / "L.keys.db"
    with ServiceStore.open(str(keys), create=True) as store:
        store.create_key("team", Scopes(("read",), None, None))
    conn = sqlite3.connect(keys)
    conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
    shutil.copyfile(f"{keys}-shm", tmp_path / "kept-shm")
    conn.close()
    (tmp_path / "kept-shm").rename(f"{keys}-shm")
    before = _files(tmp_path)
    with ServiceStore.open(str(keys), read_only=True) as store:
        assert [k.name for k in store.list_keys()] == ["team"]
    assert _files(tmp_path) == before

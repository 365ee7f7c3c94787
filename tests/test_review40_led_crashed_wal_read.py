"""Reading a ledger whose writer was killed with its log uncheckpointed (review 40).

A writer killed (SIGKILL) after committing leaves ``L.db-wal`` and ``L.db-shm``, and
nobody has them open. A read (``ledger show``/``verify``/``export``/``lifetime``)
opened it ``mode=ro``; SQLite, the first to open the index, took it over: it
truncated and rebuilt ``L.db-shm`` on the first read and rewrote it on every later
one — a read changed a file beside the ledger. Such a ledger is now read from a
private copy (as one with a ``-wal`` and no ``-shm`` already was), and a long-lived read
handle still sees commits another writer appends to that log afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from factories import SPATIAL, spatial

from dpledger import Ledger
from dpledger.cli.main import main

_KILLED = """
import os, signal, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from dpledger import Ledger, Policy, ReleaseRequest
policy = Policy.load(sys.argv[3])
with Ledger.open(sys.argv[2], policy, mode="create") as ledger:
    for epoch in range(int(sys.argv[4]), int(sys.argv[5])):
        request = ReleaseRequest(epoch=epoch, metric="clipped_mean_loss", region="na",
                                 cohort=3000)
        ledger.release(request, np.float64(1000.0))
    os.kill(os.getpid(), signal.SIGKILL)  # its commits are in L.db-wal only
"""
REPO = Path(__file__).resolve().parents[1]


def _killed_writer(ledger: Path, first: int, last: int) -> None:
    argv = [sys.executable, "-c", _KILLED, str(REPO), str(ledger), str(SPATIAL)]
    done = subprocess.run([*argv, str(first), str(last)], check=False, timeout=120)
    assert done.returncode == -9


def _files(d: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(d.iterdir())}


@pytest.mark.skipif(sys.platform != "linux", reason="the lock probe is Linux's")
def test_reading_a_crashed_writers_log_changes_no_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "L.db"
    _killed_writer(ledger, 0, 3)
    assert os.path.getsize(f"{ledger}-wal") > 0
    before = _files(tmp_path)
    at = ["--policy", str(SPATIAL), "--ledger", str(ledger)]
    for cmd in (["ledger", "show"], ["ledger", "verify"], ["ledger", "export"],
                ["ledger", "lifetime"], ["ledger", "show"]):  # fmt: skip
        assert main([*cmd, *at]) == 0, capsys.readouterr().err
        assert _files(tmp_path) == before, cmd
    assert capsys.readouterr().out.count('"epoch": ') == 3  # export saw every commit
    with Ledger.open(ledger, spatial(), mode="read") as handle:
        assert len(handle) == 3
        assert handle.verify().ok
        assert _files(tmp_path) == before
        _killed_writer(ledger, 3, 4)  # appends to the same log, killed again
        assert len(handle) == 4  # the long-lived handle sees it
        assert handle.verify().ok


_HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1])
conn.execute("SELECT count(*) FROM dpl_entries").fetchall()  # opens the log and its index
print("ready", flush=True)
time.sleep(30)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the lock probe is Linux's")
def test_a_copy_raced_by_a_new_connection_is_dropped_for_a_read_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock probe is asked again after the copy (diff review): a process that opened
    the crashed ledger while it was copied may have checkpointed and restarted the log
    within the file times' resolution; the copy is then dropped and the ledger read in
    place."""
    import shutil

    from dpledger.ledger import sqlite_copy

    ledger = tmp_path / "L.db"
    _killed_writer(ledger, 0, 2)
    holders: list[subprocess.Popen[str]] = []
    copy = shutil.copyfile

    def copy_while_someone_opens(src: str, dst: str) -> str:
        if not holders:
            holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(ledger)],
                                      stdout=subprocess.PIPE, text=True)  # fmt: skip
            holders.append(holder)
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "ready"
        return copy(src, dst)

    monkeypatch.setattr(sqlite_copy.shutil, "copyfile", copy_while_someone_opens)
    try:
        name = str(ledger.resolve())
        assert sqlite_copy.private_copy(ledger, name, "-wal", crashed=True) is None
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()

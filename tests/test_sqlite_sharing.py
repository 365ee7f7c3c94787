"""A ledger's files as other processes and users share them (audit 4).

SQLite names a ledger's ``-wal`` and ``-shm`` after the path, creates them as whoever
opens the ledger, and applies whatever log it finds beside a name to whatever file is at
that name. Each test here has a real second process (or user) and checks that the ledger
and its sidecars are left as they were, or that no entry is lost.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from factories import SPATIAL
from test_sqlite_locks import coverage_entries, other_process_releases

import dpledger as dl


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "l.db"
    with dl.Ledger.open(p, dl.Policy.load(SPATIAL), mode="create") as ledger:
        ledger.init()
    return p


KILLED = """
import os, signal, sys, warnings
warnings.simplefilter("ignore")
import dpledger as dl
ledger = dl.Ledger.open(sys.argv[2], dl.Policy.load(sys.argv[1]))
def release(epoch):
    ledger.release(dl.ReleaseRequest(epoch=epoch, metric="coverage", region="na",
                   cohort=2400, edges_version="coverage-cells/v1"), [1.0] * 6)
release(0)
print("holding", flush=True)
sys.stdin.readline()
release(1)
print("committed", flush=True)
sys.stdin.readline()
os.kill(os.getpid(), signal.SIGKILL)  # no close: nothing runs after the commit
"""


def test_a_writer_killed_after_its_ledger_moved_leaves_nothing_to_replay(path: Path) -> None:
    """F-G: A holds the ledger, it is renamed, A commits and is killed; B releases through
    the new name; moved back, SQLite replayed A's frames from the old name's log over the
    file and B's two releases vanished (verify ok). Each commit now empties that log."""
    holder = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(SPATIAL), str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    moved = path.with_name("moved.db")
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "holding"
        os.rename(path, moved)
        holder.stdin.write("\n")  # type: ignore[union-attr]
        holder.stdin.flush()  # type: ignore[union-attr]
        assert holder.stdout.readline().strip() == "committed"
        assert Path(f"{path}-wal").stat().st_size == 0  # the commit is in moved.db alone
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == -signal.SIGKILL
    for epoch in (2, 3):
        assert other_process_releases(moved, epoch) == "released"
    os.rename(moved, path)
    assert coverage_entries(path) == 4

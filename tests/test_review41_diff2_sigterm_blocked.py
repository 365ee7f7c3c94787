"""SIGTERM while the command waits in C (an SQLite lock wait) (review 41, diff 2).

The console script's SIGTERM handler raises :class:`~dpledger.cli.Terminated` at the next
bytecode, and no bytecode runs while SQLite waits for a lock (the ledger's busy timeout,
60 s, in C). ``timeout 30 dpledger release`` on a ledger another writer holds ended at
30 s before (the default handler killed it at once); now it went on waiting, up to a
minute more, and a service manager's stop waited with it. A SIGTERM the command cannot
take within a short grace ends it as before (exit 143), saying what to check.

The child's lock wait is made an hour long, and the test holds the lock until the child
has ended: without the grace, the child would end only by the guard's kill.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from _signals import sigterm_child
from factories import SPATIAL

from dpledger.cli.main import main

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs Linux /proc")

CHILD = """
import sys
import dpledger.ledger.sqlite as s
real = s.SqliteStore.__init__
def init(self, *a, **k):
    k["timeout_s"] = 3600.0  # a lock wait far longer than the guard below
    real(self, *a, **k)
s.SqliteStore.__init__ = init
print("waiting", file=sys.stderr, flush=True)
from dpledger.cli import run
sys.exit(run(sys.argv[1:]))
"""


def test_sigterm_during_a_lock_wait_ends_the_command(tmp_path: Path) -> None:
    db = tmp_path / "L.db"
    at = ["--policy", str(SPATIAL), "--ledger", str(db)]
    assert main(["ledger", "init", *at]) == 0
    agg = tmp_path / "a.json"
    agg.write_text("1234.5")
    release = ["release", *at, "--epoch", "0", "--metric", "clipped_mean_loss"]
    release += ["--region", "eu-west", "--cohort", "2400", "--aggregate", str(agg)]
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the ledger
    try:  # the child's imports done, the handler in place: wait until it sleeps in
        # SQLite's busy handler with the ledger open (no other sleep follows opening it)
        code, err = sigterm_child(CHILD, release, "waiting", _waiting)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 143, err
    assert "terminated" in err, err
    assert "Traceback" not in err, err
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT count(*) FROM dpl_entries").fetchone() == (0,)


def _waiting(pid: int) -> bool:
    """Whether ``pid`` sleeps in the kernel with an ``L.db`` open (Linux /proc)."""
    try:
        names = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        with open(f"/proc/{pid}/wchan") as f:
            sleeping = "nanosleep" in f.read()
    except OSError:
        return False
    return sleeping and any(n.endswith("L.db") for n in names)

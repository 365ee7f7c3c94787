"""SIGTERM taken, then the unwinding waits in C (review 41, diff 3).

The console script's watcher ends a command that has not *taken* a SIGTERM within
:data:`~dpledger.cli.GRACE_S`. But a command that takes it at once can still wait in C
while it unwinds: ``demo`` builds its fleet on a thread pool, and the ``with`` block's
exit joins the workers, each in a NumPy call of seconds (SIGTERM after 3 s of
``demo --clients 2000000`` took 6 to 14 s to end; the handler had run in microseconds).
A keys command's revocation after a SIGTERM may wait for SQLite's lock as well. The
watcher saw the handler run and let the process go on. The child here takes the SIGTERM
in Python and then joins a worker that sleeps for an hour (as make_fleet's pool does).
"""

from __future__ import annotations

from pathlib import Path

from _signals import sigterm_child

CHILD = """
import sys, time
from concurrent.futures import ThreadPoolExecutor
import dpledger.cli.main as m
def main(argv=None):
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(time.sleep, 3600.0)  # a worker in C (a NumPy call in make_fleet)
        print("working", file=sys.stderr, flush=True)
        time.sleep(3600.0)  # Python: the SIGTERM is taken here, at once
    return 0
m.main = main
from dpledger.cli import run
import os
rc = run(sys.argv[1:])
os._exit(rc)  # the worker is not joined at exit: only run is measured
"""


def test_sigterm_taken_but_unwinding_in_c_still_ends(tmp_path: Path) -> None:
    code, err = sigterm_child(CHILD, ["demo"], "working")
    assert code == 143, err
    assert "terminated" in err, err
    assert "Traceback" not in err, err

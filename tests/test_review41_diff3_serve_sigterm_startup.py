"""``dpledger serve`` stopped by SIGTERM while it starts (review 41, diff 3).

Diff 2 made a SIGTERM end ``serve`` by the signal after uvicorn's graceful shutdown, since
``exit(143)`` is a failed unit to systemd. A ``systemctl stop`` (or a Kubernetes rollout)
that reaches the service while it still starts, before uvicorn took SIGTERM (opening the
ledger and key store: a PostgreSQL connect, a schema check), still ended with
``dpledger: terminated`` and exit 143: the unit is left failed after a stop of a service
that had not finished starting. The child here waits in Python inside ``create_app``.
The console script leaves SIGTERM to ``serve`` from its start (stop 41): it ends by it.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from _signals import sigterm_child
from factories import SPATIAL

from dpledger.cli.main import main

pytest.importorskip("uvicorn")

CHILD = """
import sys, time
import dpledger.service.app as a
def create_app(settings):
    print("starting", file=sys.stderr, flush=True)
    time.sleep(3600.0)  # opening the ledger: the SIGTERM is taken here
a.create_app = create_app
from dpledger.cli import run
sys.exit(run(sys.argv[1:]))
"""


def test_sigterm_while_serve_starts_ends_by_the_signal(tmp_path: Path) -> None:
    ledger = str(tmp_path / "L.db")
    assert main(["ledger", "init", "--policy", str(SPATIAL), "--ledger", ledger]) == 0
    argv = ["serve", "--policy", str(SPATIAL), "--ledger", ledger, "--port", "0"]
    code, err = sigterm_child(CHILD, argv, "starting")
    assert code == -signal.SIGTERM, (code, err)
    assert "terminated" not in err, err

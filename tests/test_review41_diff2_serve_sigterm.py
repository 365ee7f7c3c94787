"""``dpledger serve`` stopped by SIGTERM (review 41, diff 2).

SIGTERM is how a service manager stops a service (``systemctl stop``, ``docker stop``,
Kubernetes). uvicorn takes it, shuts down gracefully, restores the handler it found and
raises the signal again "to trigger the expected behaviour". Before the console script
took SIGTERM as a Ctrl-C, that handler was the default one: the process ended by the
signal, which systemd counts as a clean stop. With :class:`~dpledger.cli.Terminated`
the re-raised signal became ``dpledger: terminated`` and ``exit(143)``, an exit status
systemd counts as a failure (the unit is left "failed" after every ``systemctl stop``)
unless the unit says ``SuccessExitStatus=143``. A service's graceful stop ends by the
signal again, after the store is closed.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from factories import SPATIAL

from dpledger.cli.main import main
from dpledger.service.testing import ServedProcess

pytest.importorskip("uvicorn")


def test_sigterm_stops_serve_by_the_signal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = str(tmp_path / "L.db")
    at = ["--policy", str(SPATIAL), "--ledger", ledger]
    assert main(["ledger", "init", *at]) == 0
    assert main(["keys", "create", "--ledger", ledger, "--name", "t", "--action", "read"]) == 0
    capsys.readouterr()
    log = tmp_path / "serve.log"
    with ServedProcess(ledger, SPATIAL, "--log-level", "warning", log=log) as s:
        proc = s._proc
    assert proc is not None
    text = log.read_text(errors="replace")
    assert proc.returncode == -signal.SIGTERM, (proc.returncode, text)
    assert "terminated" not in text, text  # a service's normal stop is no error

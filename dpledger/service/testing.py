"""Run a real ``dpledger serve`` in a child process: for integration tests and benchmarks.

:class:`ServedProcess` starts the command on 127.0.0.1 and a free port, reads the URL it
announces, waits until ``/v1/health`` answers, and stops it by its own pid (SIGTERM, then
SIGKILL if it does not stop in time). Standard library only.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

__all__ = ["ServedProcess"]

_URL = re.compile(r"at (http://127\.0\.0\.1:\d+)/")


class ServedProcess:
    """``with ServedProcess(ledger, policy, log=path) as s: s.url`` → ``http://127.0.0.1:PORT``.

    ``extra`` arguments go to ``dpledger serve`` (e.g. ``"--connections", "8"``); its
    output goes to ``log``, which a failure to start quotes.
    """

    def __init__(
        self,
        ledger: str,
        policy: str | Path,
        *extra: str,
        log: Path,
        timeout_s: float = 60.0,
    ) -> None:
        self.args = [
            sys.executable, "-m", "dpledger.cli", "serve", "--ledger", ledger, "--policy",
            str(policy), "--host", "127.0.0.1", "--port", "0", *extra,
        ]  # fmt: skip
        self.log = Path(log)
        self.timeout_s = timeout_s
        self.url = ""
        self._proc: subprocess.Popen[bytes] | None = None

    def _output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/v1/health", timeout=5) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def __enter__(self) -> ServedProcess:
        with self.log.open("wb") as out:
            self._proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.timeout_s
        try:
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    raise RuntimeError(f"dpledger serve exited: {self._output()}")
                found = _URL.search(self._output())
                if found:
                    self.url = found.group(1)
                    if self._healthy():  # the port is bound before the app has started
                        return self
                time.sleep(0.05)
            raise RuntimeError(f"dpledger serve did not start in time: {self._output()}")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the child (its pid only): SIGTERM, then SIGKILL after 30 s."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def __exit__(
        self,
        et: type[BaseException] | None,
        ev: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

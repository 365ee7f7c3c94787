"""A child ``dpledger`` run under test code, stopped by SIGTERM (review 41's tests of the
console script's SIGTERM handling)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["sigterm_child"]

REPO = Path(__file__).resolve().parents[1]
GUARD_S = 60.0
"""Not a timing assertion: a child the fixed code ends in seconds is killed after this."""


def sigterm_child(
    code: str, argv: list[str], ready: str, until: Callable[[int], bool] | None = None
) -> tuple[int, str]:
    """Run ``python -c code argv`` from this checkout; once it writes the line ``ready`` on
    standard error (and ``until(pid)`` holds, if given), send it SIGTERM. Its exit code
    (negative: ended by that signal) and the rest of its standard error."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *argv],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().strip() == ready
        while until is not None and proc.poll() is None and not until(proc.pid):
            pass
        os.kill(proc.pid, signal.SIGTERM)
        try:
            exit_code = proc.wait(timeout=GUARD_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"SIGTERM did not end the child in {GUARD_S:g} s") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return exit_code, proc.stderr.read()

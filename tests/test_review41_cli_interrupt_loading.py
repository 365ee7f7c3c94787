"""Ctrl-C while the command loads (review 41).

Importing :mod:`dpledger.cli.main` (numpy, OpenDP, pydantic, the ledger) and its
subcommand modules is most of a short command's run (0.8 s of ``dpledger ledger show``'s
1 s here): a Ctrl-C then came before ``main``'s handler and Python printed its traceback
(exit by SIGINT), where the CLI promises none. The console script and ``python -m
dpledger.cli`` now load the command inside :func:`dpledger.cli.run`'s guard: "dpledger:
interrupted", exit 130. The interrupt is simulated by an import hook raising
KeyboardInterrupt as the module loads (deterministic, unlike a timed signal).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_HOOK = """
import sys
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == {name!r}:
            raise KeyboardInterrupt
        return None
sys.meta_path.insert(0, Interrupt())
import runpy
runpy.run_module("dpledger.cli", run_name="__main__", alter_sys=True)
"""


def _interrupted_while_importing(name: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code = _HOOK.format(name=name)
    cmd = [sys.executable, "-c", code, "ledger", "show", "--ledger", "x.db"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, timeout=120)


def test_interrupt_while_loading_the_command_prints_no_traceback() -> None:
    r = _interrupted_while_importing("dpledger.cli.main")
    assert r.returncode == 130, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    assert "interrupted" in r.stderr


def test_interrupt_while_loading_a_subcommand_prints_no_traceback() -> None:
    r = _interrupted_while_importing("dpledger.cli.demo")  # imported as the parser is built
    assert r.returncode == 130, r.stderr
    assert "Traceback" not in r.stderr, r.stderr


def test_the_console_script_is_the_guarded_entry() -> None:
    meta = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert meta["project"]["scripts"]["dpledger"] == "dpledger.cli:run"

"""The console script and an ignored SIGTERM (review 41, diff 2).

``run`` installs a SIGTERM handler that raises :class:`~dpledger.cli.Terminated`. A
SIGTERM a parent set to be ignored (``trap '' TERM`` in a deploy script, so that a
release it runs cannot be cut off) is inherited across exec and was honoured before:
the handler replaced it, and such a SIGTERM stopped the command. A disposition of
"ignore" is kept.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence

import pytest

import dpledger.cli.main as cli_main
from dpledger.cli import run


def test_an_ignored_sigterm_stays_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []

    def command(argv: Sequence[str] | None = None) -> int:
        seen.append(signal.getsignal(signal.SIGTERM))
        return 0

    monkeypatch.setattr(cli_main, "main", command)
    before = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        assert run(["--version"]) == 0
        assert seen == [signal.SIG_IGN]
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, before)

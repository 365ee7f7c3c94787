"""Ctrl-C during ``dpledger demo`` after some releases were committed (review 41, diff
review).

Review 41 made an interrupted ``release`` say what it may have spent, and the README says
of exit 130 "after a release was committed, stderr says what it spent and how to read its
value back". A Ctrl-C part way through ``demo`` — with releases already committed to its
ledger — still printed only "dpledger: interrupted"; the rerun then failed ("holds a
previous demo ledger"). Now it names the ledger, how to read what was committed, and
that a rerun needs --fresh.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import dpledger.cli.demo as cli_demo
from dpledger.cli.main import build_parser, main


def test_interrupted_demo_names_its_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    build_parser()  # loads the subcommand modules before the patch

    def interrupted(*_: Any, **__: Any) -> Any:
        raise KeyboardInterrupt  # as after some of the demo's releases

    monkeypatch.setattr(cli_demo, "run_demo", interrupted)
    ledger = tmp_path / "d.db"
    assert main(["demo", "--ledger", str(ledger), "--quiet", "--clients", "500"]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err, err
    assert str(ledger) in err, err
    assert "ledger export" in err, err
    assert "--fresh" in err, err

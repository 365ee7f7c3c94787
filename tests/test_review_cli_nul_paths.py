"""A NUL byte in ``ledger export --out`` or ``demo --plots`` was an internal error (exit
3, ``ValueError: embedded null byte``). A shell cannot pass one, but ``main(argv)`` can:
every other path option already refuses it as bad input (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import SPATIAL

from dpledger.cli.main import main

POLICY = str(SPATIAL)


def test_export_out_with_a_nul_byte_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "l.db"
    assert main(["ledger", "init", "--policy", POLICY, "--ledger", str(ledger)]) == 0
    capsys.readouterr()
    code = main(["ledger", "export", "--policy", POLICY, "--ledger", str(ledger),
                 "--out", str(tmp_path / "a\x00b")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert "NUL" in err


def test_demo_plots_with_a_nul_byte_is_bad_input_before_any_spend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    ledger = tmp_path / "demo.db"
    capsys.readouterr()
    code = main(["demo", "--clients", "2000", "--quiet", "--ledger", str(ledger),
                 "--plots", str(tmp_path / "p\x00q")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert not ledger.exists()

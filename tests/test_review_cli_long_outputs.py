"""Output paths whose names are too long for the file system were internal errors (exit
3): ``ledger export --out`` with a name that fits but whose ``.NAME.PID.partial``
temporary does not (the clean-up of the temporary raised again), and ``demo --ledger``
with a name past the limit (its existence check raised). Both are bad input (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import SPATIAL

from dpledger.cli.main import main

POLICY = str(SPATIAL)


def test_export_to_a_name_without_room_for_its_temporary_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "l.db"
    assert main(["ledger", "init", "--policy", POLICY, "--ledger", str(ledger)]) == 0
    out = tmp_path / ("c" * 252)
    capsys.readouterr()
    code = main(["ledger", "export", "--policy", POLICY, "--ledger", str(ledger),
                 "--out", str(out)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert "cannot write --out" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.db"]


def test_demo_with_a_ledger_name_past_the_limit_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    code = main(["demo", "--clients", "2000", "--quiet",
                 "--ledger", str(tmp_path / ("c" * 300 + ".db"))])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert "internal error" not in err
    assert list(tmp_path.iterdir()) == []

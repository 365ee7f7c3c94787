"""A new ledger or key store whose name fits the file system but leaves no room for the
files kept beside it (SQLite's ``-wal``/``-journal``; the ``.NAME.PID.SPACE.RAND.creating``
temporary it is built in, 43 bytes longer) was an internal error (exit 3, ``OSError: File
name too long``). It is bad input (exit 2), refused before anything is created."""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import SPATIAL

from dpledger.cli.main import main

POLICY = str(SPATIAL)


@pytest.mark.parametrize("length", [215, 240, 250])
def test_a_ledger_name_without_room_for_its_files_is_bad_input(
    length: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / ("b" * length + ".db")
    capsys.readouterr()
    code = main(["ledger", "init", "--policy", POLICY, "--ledger", str(ledger)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "too long" in err
    assert "internal error" not in err
    assert list(tmp_path.iterdir()) == []


def test_a_key_store_name_without_room_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "l.db"
    assert main(["ledger", "init", "--policy", POLICY, "--ledger", str(ledger)]) == 0
    keys = tmp_path / ("k" * 240 + ".db")
    capsys.readouterr()
    code = main(["keys", "create", "--ledger", str(ledger), "--keys", str(keys),
                 "--name", "a", "--action", "read"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert "too long" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.db"]


def test_a_name_with_room_is_still_created(tmp_path: Path) -> None:
    ledger = tmp_path / ("b" * 150 + ".db")
    assert main(["ledger", "init", "--policy", POLICY, "--ledger", str(ledger)]) == 0
    assert ledger.is_file()

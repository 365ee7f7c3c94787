"""Paths the CLI cannot use are input errors (exit 2), never a silent default or a bug exit.

Review s32 B: a ledger or key store whose parent is a regular file exited 3 ("a dpledger
bug": the temporary file's clean-up raised NotADirectoryError over the real error); an
empty ``--out``, ``--plot``, ``--plots``, ``--expected-head``, ``--request`` or TLS file
was read as "not given" (stdout, no chart, a verify with no anchor, plain HTTP).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from factories import SPATIAL, spatial

from dpledger import Ledger
from dpledger.cli.main import main
from dpledger.errors import StoreError


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ok.db"
    with Ledger.open(path, spatial(), mode="create") as led:
        led.init()
    return path


def _digest(d: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())}


def test_a_ledger_under_a_regular_file_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "c1.db").write_bytes(b"")
    with pytest.raises(StoreError, match="cannot create the SQLite ledger"):
        Ledger.open(tmp_path / "c1.db" / "x.db", spatial(), mode="create").init()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c1.db"]


@pytest.mark.parametrize("what", ["ledger init", "key store"])
def test_the_cli_exits_2_for_a_path_under_a_regular_file(
    tmp_path: Path, ledger: Path, capsys: pytest.CaptureFixture[str], what: str
) -> None:
    (tmp_path / "c1.db").write_bytes(b"")
    before = _digest(tmp_path)
    if what == "ledger init":
        argv = [
            "ledger",
            "init",
            "--policy",
            str(SPATIAL),
            "--ledger",
            str(tmp_path / "c1.db/x.db"),
        ]
    else:
        argv = ["keys", "create", "--ledger", str(ledger), "--keys", str(tmp_path / "c1.db/k.db"),
                "--name", "t", "--action", "read"]  # fmt: skip
    code, err = _run(capsys, *argv)
    assert code == 2, err
    assert "cannot create" in err
    assert "bug" not in err
    assert _digest(tmp_path) == before


@pytest.mark.parametrize(
    ("flag", "said"),
    [("--out", "--out needs a file name"),
     ("--expected-head", "--expected-head takes ENTRY_ID:HASH")],
)  # fmt: skip
def test_an_empty_value_for_a_ledger_flag_is_refused(
    ledger: Path, capsys: pytest.CaptureFixture[str], flag: str, said: str
) -> None:
    command = "export" if flag == "--out" else "verify"
    code, err = _run(capsys, "ledger", command, "--policy", str(SPATIAL), "--ledger",
                     str(ledger), flag, "")  # fmt: skip
    assert code == 2, err
    assert said in err


def test_an_empty_plot_plots_request_or_tls_file_is_refused(
    tmp_path: Path, ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _digest(tmp_path)
    held = tmp_path / "held.csv"
    held.write_text("loss\n1.0\n2.0\n")
    cases = [
        (["calibrate", "--held-out", str(held), "--epsilon", "1", "--cohort", "1000",
          "--plot", ""], "--plot needs a file name"),
        (["demo", "--quiet", "--plots", "", "--ledger", str(tmp_path / "d.db")],
         "--plots needs a directory name"),
        (["release", "--policy", str(SPATIAL), "--ledger", str(ledger), "--request", "",
          "--aggregate", str(held)], "--request needs a file name"),
        (["serve", "--policy", str(SPATIAL), "--ledger", str(ledger), "--tls-cert", "",
          "--tls-key", ""], "need file names"),
    ]  # fmt: skip
    for argv, said in cases:
        code, err = _run(capsys, *argv)
        assert code == 2, (argv, err)
        assert said in err, (argv, err)
    held.unlink()
    assert _digest(tmp_path) == before


def test_a_dangling_symlink_ledger_is_named_as_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review s32 B, minor: it was 'No such file or directory' for a path that exists."""
    (tmp_path / "sd").mkdir()
    (tmp_path / "dl.db").symlink_to(tmp_path / "sd" / "missing.db")
    for command in (["ledger", "init"], ["ledger", "show"]):
        code, err = _run(capsys, *command, "--policy", str(SPATIAL), "--ledger",
                         str(tmp_path / "dl.db"))  # fmt: skip
        assert code == 2, err
        assert "is a dangling symbolic link" in err
    assert not any((tmp_path / "sd").iterdir())

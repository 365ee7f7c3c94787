"""With ``--json``, an error is JSON too: standard output carries one object naming the
error and its message (standard error keeps the one-line text), so a caller piping
``--json`` into a JSON reader gets valid JSON whatever the outcome. Before, standard
output was empty on every error (exit 2 or 3), which no JSON reader accepts."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from factories import SPATIAL

from dpledger.cli.main import main

POLICY = str(SPATIAL)
SILO = str(Path(__file__).resolve().parents[1] / "policies" / "cross-silo.toml")


def _cases(tmp: Path) -> dict[str, list[str]]:
    ledger = tmp / "l.db"
    agg = tmp / "sum.json"
    agg.write_text("1000.5")
    (tmp / "empty.db").write_bytes(b"")
    scalar = [
        "--epoch",
        "0",
        "--metric",
        "clipped_mean_loss",
        "--region",
        "eu-west",
        "--cohort",
        "2000",
    ]
    return {
        "missing aggregate": [
            "check",
            "--policy",
            POLICY,
            "--ledger",
            str(ledger),
            *scalar,
            "--aggregate",
            str(tmp / "none.json"),
        ],
        "missing ledger": ["ledger", "show", "--policy", POLICY, "--ledger", str(tmp / "no.db")],
        "empty ledger file": [
            "ledger",
            "lifetime",
            "--policy",
            POLICY,
            "--ledger",
            str(tmp / "empty.db"),
        ],
        "another policy": [
            "release",
            "--policy",
            SILO,
            "--ledger",
            str(ledger),
            *scalar,
            "--aggregate",
            str(agg),
        ],
        "unknown region in plan": ["plan", POLICY, "--cohort", "mars=10"],
        "no ledger": ["ledger", "verify", "--policy", POLICY, "--ledger", ""],
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing aggregate",
        "missing ledger",
        "empty ledger file",
        "another policy",
        "unknown region in plan",
        "no ledger",
    ],
)
def test_an_error_under_json_is_a_json_object_on_stdout(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "l.db"
    assert main(["ledger", "init", "--policy", POLICY, "--ledger", str(ledger)]) == 0
    before = ledger.read_bytes()
    argv = _cases(tmp_path)[case]
    capsys.readouterr()
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("dpledger: error: ")
    data = json.loads(out)  # empty before: not JSON
    assert isinstance(data, dict)
    assert data["exit_code"] == 2
    assert data["error"]
    assert data["message"] in err
    assert ledger.read_bytes() == before


def test_a_refused_migration_under_json_is_a_json_object_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.db"
    shutil.copyfile(Path(__file__).parent / "data" / "ledger-v1.db", broken)
    with sqlite3.connect(broken) as conn:
        conn.execute("UPDATE dpl_meta SET value = '6' WHERE key = 'head_seq'")
    conn.close()
    before = broken.read_bytes()
    capsys.readouterr()
    assert main(["ledger", "migrate", "--ledger", str(broken), "--json"]) == 1
    out, err = capsys.readouterr()
    assert "migration refused" in err
    data = json.loads(out)  # empty before
    assert data["error"] == "migration_refused"
    assert data["exit_code"] == 1
    assert broken.read_bytes() == before


@pytest.mark.parametrize(
    "argv",
    [
        ["ledger", "verify", "--bogus"],  # the top parser's "unrecognized arguments"
        ["plan"],  # a subcommand's missing positional
        ["release", "--epoch", "x"],  # a bad option value
        ["ledger"],  # no action
    ],
)
def test_a_usage_error_under_json_is_a_json_object_too(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse's usage errors wrote usage text to standard error and nothing to
    standard output, even with --json (and raised SystemExit out of ``main``)."""
    assert main([*argv, "--json"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("usage: dpledger")
    data = json.loads(out)
    assert data["error"] == "invalid_input"
    assert data["exit_code"] == 2
    assert data["message"].startswith("dpledger")
    assert data["message"] in err
    assert main(argv) == 2  # without --json: the text only
    out, err = capsys.readouterr()
    assert out == ""
    assert ": error: " in err


def test_a_usage_error_under_an_abbreviated_json_flag_is_json_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """argparse accepts ``--js`` for ``--json``; the usage-error path looked for the
    literal ``--json`` only (review h38)."""
    assert main(["check", "--js", "--cohort", "x"]) == 2
    out, _ = capsys.readouterr()
    assert json.loads(out)["error"] == "invalid_input"

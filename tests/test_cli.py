"""The ``dpledger`` CLI as a CI gate: exit 0 ok, 1 refused, 2 usage/input error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from factories import SPATIAL

from dpledger.cli.main import main


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "hist.json").write_text(json.dumps([100.0] * 7))
    np.save(tmp_path / "hist.npy", np.full(7, 100.0))
    (tmp_path / "nan.json").write_text("[1.0, NaN, 1, 1, 1, 1, 1]")
    (tmp_path / "req.json").write_text(
        json.dumps(
            {
                "epoch": 0,
                "metric": "error_histogram",
                "region": "na",
                "cohort": 3000,
                "edges_version": "abs-error-m/v1",
            }
        )
    )
    return {"db": str(tmp_path / "l.db"), "dir": str(tmp_path)}


def base(env: dict[str, str]) -> list[str]:
    return ["--policy", str(SPATIAL), "--ledger", env["db"]]


def test_check_passes_then_release_records_and_json_parses(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    d = env["dir"]
    check = ["check", *base(env), "--request", f"{d}/req.json", "--aggregate", f"{d}/hist.json"]
    assert main(check) == 2  # a read: no ledger yet, and none is created
    assert "no ledger at" in capsys.readouterr().err
    assert not Path(env["db"]).exists()
    assert main(["ledger", "init", *base(env)]) == 0
    assert "created ledger" in capsys.readouterr().out
    assert main(check) == 0
    assert "approved" in capsys.readouterr().out
    code = main(
        [
            "release",
            *base(env),
            "--request",
            f"{d}/req.json",
            "--aggregate",
            f"{d}/hist.npy",
            "--json",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["entry_id"] == 1
    assert out["charge"] == "1/5"
    assert len(out["value"]) == 7
    assert main(["ledger", "verify", *base(env), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    assert main(["ledger", "export", *base(env)]) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()
    assert json.loads(line)["metric"] == "error_histogram"
    assert main(["ledger", "show", *base(env), "--json"]) == 0
    regions = json.loads(capsys.readouterr().out)["regions"]
    assert {"epoch": 0, "region": "na", "spent": "1/5", "remaining": "4/5"} in regions
    assert main(["ledger", "lifetime", *base(env), "--region", "na", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["releases"] == 1


def test_refusal_exits_1_and_lists_the_failed_check(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    d = env["dir"]
    args = ["--request", f"{d}/req.json", "--aggregate", f"{d}/nan.json"]
    assert main(["ledger", "init", *base(env)]) == 0
    assert main(["check", *base(env), *args]) == 1
    assert "FAIL    aggregate_finite" in capsys.readouterr().out
    assert main(["release", *base(env), *args, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["approved"] is False
    small = ["--request", f"{d}/req.json", "--cohort", "10", "--aggregate", f"{d}/hist.json"]
    assert main(["release", *base(env), *small]) == 1
    assert "cohort_floor" in capsys.readouterr().out


def test_input_errors_exit_2_with_a_message(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    d = env["dir"]
    assert (
        main(
            ["check", *base(env), "--request", f"{d}/req.json", "--aggregate", f"{d}/missing.json"]
        )
        == 2
    )
    assert "cannot read aggregate" in capsys.readouterr().err
    bad_policy = ["--policy", f"{d}/nope.toml", "--ledger", env["db"]]
    assert main(["ledger", "show", *bad_policy]) == 2
    assert "nope.toml" in capsys.readouterr().err
    assert main(["check", *base(env), "--metric", "x", "--aggregate", f"{d}/hist.json"]) == 2
    assert "invalid release request" in capsys.readouterr().err


def test_verify_exits_1_when_the_ledger_was_tampered_with(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    d = env["dir"]
    main(["release", *base(env), "--request", f"{d}/req.json", "--aggregate", f"{d}/hist.json"])
    con = sqlite3.connect(env["db"])
    con.execute("DROP TRIGGER dpl_entries_no_update")
    con.execute("UPDATE dpl_entries SET output = '[0,0,0,0,0,0,0]' WHERE seq = 1")
    con.commit()
    con.close()
    capsys.readouterr()
    assert main(["ledger", "verify", *base(env)]) == 1
    assert "entry 1" in capsys.readouterr().out


def test_console_script_runs_as_a_module(env: dict[str, str]) -> None:
    assert main(["ledger", "init", *base(env)]) == 0
    proc = subprocess.run(
        [sys.executable, "-m", "dpledger.cli", "ledger", "show", *base(env)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "0 entries" in proc.stdout
    usage = subprocess.run(
        [sys.executable, "-m", "dpledger.cli", "release"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert usage.returncode == 2


def test_a_request_or_aggregate_file_naming_a_key_twice_exits_2(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """JSON keeps the last of two equal keys silently: a cohort stated twice is refused."""
    d = Path(env["dir"])
    text = (d / "req.json").read_text()
    (d / "twice.json").write_text(text[:-1] + ', "cohort": 10}')
    args = ["--request", str(d / "twice.json"), "--aggregate", str(d / "hist.json")]
    assert main(["ledger", "init", *base(env)]) == 0
    before = Path(env["db"]).read_bytes()
    capsys.readouterr()
    for command in ("check", "release"):
        assert main([command, *base(env), *args]) == 2
        assert "'cohort' appears twice" in capsys.readouterr().err
    assert Path(env["db"]).read_bytes() == before

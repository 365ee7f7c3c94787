"""A committed result that cannot be written to standard output (closed, full, reader gone).

A release spends ε before its value is printed: if the value cannot be written, the
command must say on standard error what was committed (entry, metric, region, epoch,
charge, value and bar) and how to read it back, and exit 1 ("could not be delivered"),
never 3 (a bug) nor 0. A key shown once and never delivered is revoked at once.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from factories import SPATIAL, spatial

from dpledger import Ledger
from dpledger.cli.main import main

RELEASE = ["--metric", "clipped_mean_loss", "--region", "eu-west", "--cohort", "2400"]


@pytest.fixture
def agg(tmp_path: Path) -> str:
    path = tmp_path / "a.json"
    path.write_text("1234.5")
    return str(path)


def release_args(db: Path, agg: str, epoch: int, *extra: str) -> list[str]:
    at = ["--policy", str(SPATIAL), "--ledger", str(db)]
    return ["release", *at, "--epoch", str(epoch), *RELEASE, "--aggregate", agg, *extra]


def _close_stdout() -> None:
    os.close(1)


@pytest.fixture
def broken_pipe() -> Iterator[int]:
    """The write end of a pipe whose reader is already gone."""
    r, w = os.pipe()
    os.close(r)
    yield w
    os.close(w)


def run(
    args: list[str], stdout: str, broken: int | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI with standard output ``full`` (/dev/full), ``closed`` or ``broken``."""
    cmd = [sys.executable, "-m", "dpledger.cli", *args]
    if stdout == "full":
        with open("/dev/full", "w") as full:
            return subprocess.run(cmd, stdout=full, stderr=subprocess.PIPE, text=True, check=False)
    if stdout == "closed":
        return subprocess.run(
            cmd, stderr=subprocess.PIPE, text=True, check=False, preexec_fn=_close_stdout
        )
    return subprocess.run(cmd, stdout=broken, stderr=subprocess.PIPE, text=True, check=False)


def entries(db: Path) -> list[dict[str, object]]:
    with Ledger.open(db, spatial(), mode="read") as ledger:
        return [e.as_dict() for e in ledger.entries()]


@pytest.mark.parametrize("stdout", ["full", "closed", "broken"])
@pytest.mark.parametrize("as_json", [False, True])
def test_a_committed_release_that_cannot_be_printed_is_reported_on_stderr_with_exit_1(
    tmp_path: Path, agg: str, stdout: str, as_json: bool, broken_pipe: int
) -> None:
    db = tmp_path / "l.db"
    extra = ["--json"] if as_json else []
    proc = run(release_args(db, agg, 0, "--release-id", "r-1", *extra), stdout, broken_pipe)
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr
    assert "Traceback" not in err
    assert "internal error" not in err
    assert "committed a release (ε charged)" in err
    assert "entry 1: clipped_mean_loss (epoch 0, region eu-west, n=2400, release id r-1)" in err
    assert "charged   epsilon = 1/5" in err
    assert "± ci95" in err
    assert f"dpledger ledger export --policy {SPATIAL} --ledger {db}" in err
    assert "--release-id r-1 returns the same value" in err
    (entry,) = entries(db)  # committed once, and the value shown is the recorded one
    value = re.search(r"value\s+(\S+)", err)
    assert value is not None
    noisy_sum = entry["output"][0]  # type: ignore[index]
    assert float(value.group(1)) == pytest.approx(noisy_sum / 2400, rel=1e-5)
    # the recovery instruction says how the exported "output" becomes the printed value
    assert (
        'its "output" is [the noisy sum]: the value is output[0] / cohort = output[0] / 2400'
        in (err)
    )


def test_stdout_and_stderr_both_unwritable_still_exit_1_without_a_crash(
    tmp_path: Path, agg: str
) -> None:
    db = tmp_path / "l.db"
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "dpledger.cli", *release_args(db, agg, 0)],
            stdout=full, stderr=full, check=False,
        )  # fmt: skip
    assert proc.returncode == 1
    assert len(entries(db)) == 1


def test_stdout_none_in_process_is_undelivered_not_success(
    tmp_path: Path, agg: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "l.db"
    monkeypatch.setattr(sys, "stdout", None)  # what Python gives a process started with >&-
    assert main(release_args(db, agg, 0)) == 1
    err = capsys.readouterr().err
    assert "committed a release" in err
    assert "standard output is closed" in err


def test_a_refused_release_that_cannot_be_printed_is_exit_1_and_spends_nothing(
    tmp_path: Path, agg: str
) -> None:
    db = tmp_path / "l.db"
    assert main(release_args(db, agg, 0)) == 0
    proc = run(release_args(db, agg, 0), "full")  # the allocation is spent: refused
    assert proc.returncode == 1, proc.stderr
    assert "committed" not in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(entries(db)) == 1


@pytest.mark.parametrize("stdout", ["full", "closed"])
def test_a_key_that_cannot_be_shown_is_revoked_and_never_written_to_stderr(
    tmp_path: Path, agg: str, stdout: str
) -> None:
    db = tmp_path / "l.db"
    assert main(release_args(db, agg, 0)) == 0
    create = ["keys", "create", "--ledger", str(db), "--name", "team", "--action", "read"]
    proc = run([*create, *(["--json"] if stdout == "full" else [])], stdout)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "dpl_" not in proc.stderr  # the secret itself never goes to stderr
    assert "it was revoked at once" in proc.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "dpledger.cli", "keys", "list", "--ledger", str(db), "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    (key,) = json.loads(listed.stdout)
    assert key["revoked_at"]
    assert key["key_id"] in proc.stderr


def test_ledger_init_that_cannot_be_confirmed_says_the_ledger_exists(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    proc = run(["ledger", "init", "--policy", str(SPATIAL), "--ledger", str(db)], "full")
    assert proc.returncode == 1, proc.stderr
    assert "committed a new ledger" in proc.stderr
    assert db.exists()
    proc = run(["ledger", "init", "--policy", str(SPATIAL), "--ledger", str(db)], "full")
    assert proc.returncode == 1  # nothing new committed: only the output was lost
    assert "committed" not in proc.stderr
    assert "the result could not be written" in proc.stderr


def test_the_demo_says_what_it_released_when_its_report_cannot_be_written(
    tmp_path: Path,
) -> None:
    db = tmp_path / "demo.db"
    proc = run(["demo", "--clients", "2000", "--quiet", "--ledger", str(db)], "full")
    assert proc.returncode == 1, proc.stderr
    assert "committed the demo's" in proc.stderr
    assert "entry 1: " in proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"--ledger {db}" in proc.stderr


@pytest.mark.parametrize("stdout", ["full", "closed"])
@pytest.mark.parametrize("action", ["show", "export", "verify"])
def test_a_read_that_cannot_be_printed_is_exit_1_not_a_bug_nor_success(
    tmp_path: Path, agg: str, stdout: str, action: str
) -> None:
    db = tmp_path / "l.db"
    assert main(release_args(db, agg, 0)) == 0
    proc = run(["ledger", action, "--policy", str(SPATIAL), "--ledger", str(db)], stdout)
    assert proc.returncode == 1, proc.stderr
    assert "the result could not be written" in proc.stderr
    assert "internal error" not in proc.stderr


def test_a_read_whose_reader_went_away_stops_quietly(
    tmp_path: Path, agg: str, broken_pipe: int
) -> None:
    db = tmp_path / "l.db"
    assert main(release_args(db, agg, 0)) == 0
    proc = run(["ledger", "export", "--policy", str(SPATIAL), "--ledger", str(db)], "", broken_pipe)
    assert proc.returncode == 0
    assert proc.stderr == ""

"""``dpledger plan`` under a record-level policy, ``--compare-units``, and ``ledger lifetime``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dpledger import ALL, Ledger, Policy, ReleaseRequest

ROOT = Path(__file__).resolve().parent.parent
CROSS_SILO = ROOT / "policies" / "cross-silo.toml"
SILOS = [f"--silo=hospital-{i:02d}={90 + 10 * i}" for i in range(1, 21)]


def dpledger(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dpledger.cli", *argv], capture_output=True, text=True, timeout=120
    )


def test_plan_speaks_records_under_a_record_level_policy() -> None:
    done = dpledger("plan", str(CROSS_SILO), "--cohort", "hospital-01=900")
    assert done.returncode == 0, done.stderr
    assert "privacy unit record (≤ 1 per person): n, floors and bars count records" in done.stdout
    assert "n records" in done.stdout
    assert "budget per person" in done.stdout
    assert "cohort 900 < floor 1798 records" in done.stdout
    data = json.loads(dpledger("plan", str(CROSS_SILO), "--cohort", "hospital-01=900", "--json")
                      .stdout)  # fmt: skip
    assert (data["privacy_unit"], data["counted"], data["max_records_per_person"]) == (
        "record", "records", 1,
    )  # fmt: skip


def test_compare_units_shows_both_bars_and_what_each_protects() -> None:
    done = dpledger("plan", str(CROSS_SILO), "--compare-units", *SILOS)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "one release over 20 silos, 3900 records (largest silo 290)" in out
    assert "client-level: one client's whole contribution" in out
    assert "record-level: one person's records (at most 1 per person" in out
    assert "a silo's aggregate statistics are not" in out
    rows = json.loads(dpledger("plan", str(CROSS_SILO), "--compare-units", *SILOS, "--json").stdout)
    assert {r["metric"] for r in rows} == {
        "digits_confusion",
        "diabetes_regression",
        "length_of_stay",
    }
    assert all(r["ratio"] == pytest.approx(290.0) for r in rows)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--compare-units"], "--silo NAME=RECORDS"),
        (["--compare-units", "--silo", "a=0"], "--silo 'a=0': expected NAME=N"),
        (["--silo", "a=3", "--cohort", "hospital-01=3"], "goes with --compare-units"),
    ],
)
def test_compare_units_refuses_bad_input_with_exit_2(argv: list[str], message: str) -> None:
    done = dpledger("plan", str(CROSS_SILO), *argv)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_compare_units_needs_a_record_level_policy() -> None:
    done = dpledger("plan", str(ROOT / "policies" / "spatial-eval.toml"), "--compare-units",
                    "--silo", "a=3")  # fmt: skip
    assert done.returncode == 2
    assert "record-level policy" in done.stderr


def test_lifetime_names_whose_loss_it_is(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    policy = Policy.load(CROSS_SILO)
    with Ledger.open(path, policy, mode="create") as ledger:
        ledger.release(
            ReleaseRequest(epoch=0, metric="length_of_stay", region=ALL, cohort=4000), 20000.0
        )
    args = ["ledger", "lifetime", "--policy", str(CROSS_SILO), "--ledger", str(path)]
    done = dpledger(*args, "--region", "hospital-03")
    assert done.returncode == 0, done.stderr
    assert "lifetime loss of one person's records of region hospital-03 over 1 releases" in (
        done.stdout
    )
    data = json.loads(dpledger(*args, "--json").stdout)
    assert data["privacy_unit"] == "record"


def test_compare_units_refuses_an_unknown_silo_naming_the_regions() -> None:
    done = dpledger("plan", str(CROSS_SILO), "--compare-units", "--silo", "mars=100")
    assert done.returncode == 2
    assert "unknown silo 'mars'" in done.stderr
    assert "hospital-01" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--cohort", "hospital-02=5"], "--cohort"),
        (["--compare-definitions"], "--compare-definitions"),
        (["--rounds", "2"], "--rounds"),
        (["--epoch", "3"], "--epoch"),
    ],
)
def test_compare_units_refuses_options_it_would_ignore(extra: list[str], flag: str) -> None:
    silo = ["--silo", "hospital-01=100"]
    done = dpledger("plan", str(CROSS_SILO), "--compare-units", *silo, *extra)
    assert done.returncode == 2
    assert flag in done.stderr
    assert "--compare-units takes only --silo" in done.stderr


def test_compare_units_library_call_refuses_an_unknown_silo() -> None:
    from dpledger.errors import InvalidInput
    from dpledger.planning.units import compare_units

    policy = Policy.load(CROSS_SILO)
    with pytest.raises(InvalidInput, match="unknown silo 'mars'"):
        compare_units(policy, {"hospital-01": 100, "mars": 5})
    assert compare_units(policy, {"hospital-01": 100})

"""The ``plan`` and ``calibrate`` subcommands: output, JSON, plots and exit codes."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from dpledger.approval import ReleaseRequest
from dpledger.cli.plan import register
from dpledger.errors import DpLedgerError, ReleaseRefused
from dpledger.ledger import Ledger
from dpledger.planning.forward import plan
from dpledger.policy import Policy

ROOT = Path(__file__).resolve().parent.parent
POLICY = ROOT / "policies" / "spatial-eval.toml"


def seed_held_out(n: int = 2000) -> npt.NDArray[np.float64]:
    """Per-client losses whose p50, p90, p95, p99, max are 0.4, 1.2, 1.6, 3.4, 48."""
    return np.interp(np.linspace(0, 100, n), (0, 50, 90, 95, 99, 100), (0, 0.4, 1.2, 1.6, 3.4, 48))


def main(argv: Sequence[str]) -> int:
    """The exit-code contract of ``dpledger.cli.main``: 0 ok, 1 refused, 2 input error."""
    parser = argparse.ArgumentParser(prog="dpledger")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except ReleaseRefused as e:
        print(e, file=sys.stderr)
        return 1
    except DpLedgerError as e:
        print(f"dpledger: error: {e}", file=sys.stderr)
        return 2
    return code


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def held_out(tmp_path: Path) -> Path:
    path = tmp_path / "fleet-a.npy"
    np.save(path, seed_held_out())
    return path


# -- plan -----------------------------------------------------------------------------------


def test_plan_prints_an_aligned_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "plan", str(POLICY), "--cohort", "eu-west=2400", "--cohort", "apac=900"
    )
    assert code == 0
    assert "plan for spatial-eval 1.0.0" in out
    rows = [ln for ln in out.splitlines() if ln.startswith(("eu-west ", "apac "))]
    assert len(rows) == 2 * 5 + 2  # metric rows, then one budget row per region
    assert "no: cohort 900 < floor" in out


def test_plan_json_is_the_plan_model(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "plan", str(POLICY), "--cohort", "eu-west=2400", "--rounds", "2", "--json"
    )
    assert code == 0
    expected = plan(Policy.load(POLICY), {"eu-west": 2400}, rounds_per_epoch=2)
    assert json.loads(out) == json.loads(expected.model_dump_json())
    assert json.loads(out)["rounds_per_epoch"] == 2


def test_plan_reads_spend_from_an_existing_ledger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = Policy.load(POLICY)
    db = tmp_path / "ledger.db"
    with Ledger.open(db, policy, mode="create") as ledger:
        ledger.release(
            ReleaseRequest(epoch=0, metric="clipped_mean_loss", region="apac", cohort=900),
            np.asarray(900.0),
        )
    code, out, _ = run(
        capsys, "plan", str(POLICY), "--cohort", "apac=900", "--ledger", str(db), "--json"
    )
    assert code == 0
    region = json.loads(out)["regions"][0]
    assert Fraction(region["spent"]["amount"]) == Fraction(1, 5)
    assert json.loads(out)["ledger"] == str(db)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--cohort", "eu-west"], "REGION=N"),
        (["--cohort", "eu-west=lots"], "REGION=N"),
        (["--cohort", "eu-west=0"], "REGION=N"),
        (["--cohort", "mars=100"], "unknown region 'mars'"),
        (["--cohort", "apac=1", "--cohort", "apac=2"], "twice"),
        ([], "--cohort REGION=N"),
        (["--cohort", "apac=100", "--rounds", "0"], "rounds_per_epoch"),
        (["--cohort", "apac=100", "--ledger", "/nonexistent/ledger.db"], "no ledger at"),
    ],
)
def test_plan_input_errors_exit_2_with_the_reason(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "plan", str(POLICY), *extra)
    assert code == 2
    assert message in err
    assert out == ""


def test_plan_of_a_missing_policy_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "plan", str(tmp_path / "none.toml"), "--cohort", "apac=100")
    assert code == 2
    assert "cannot read the policy file" in err


# -- calibrate ------------------------------------------------------------------------------


def test_calibrate_prints_the_seed_table_and_the_clip_source(
    held_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys, "calibrate", "--held-out", str(held_out), "--epsilon", "1", "--cohort", "2000"
    )
    assert code == 0
    noise = {
        ln.split()[0]: ln.split()[3] for ln in out.splitlines() if ln[:2] in ("p1", "p5", "p9")
    }
    assert noise == {"p50": "0.2", "p90": "0.6", "p95": "0.8", "p99": "1.7", "p100": "24.0"}
    assert 'clip.source = "held-out fleet-a.npy (n=2000 clients), p' in out


def test_calibrate_json_has_rows_recommendation_and_provenance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "held.csv"
    csv.write_text("client,loss\n" + "".join(f"c{i},{v}\n" for i, v in enumerate(seed_held_out())))
    code, out, _ = run(
        capsys, "calibrate", "--held-out", str(csv), "--column", "loss", "--epsilon", "1",
        "--cohort", "2000", "--percentiles", "50,99", "--json",
    )  # fmt: skip
    assert code == 0
    data = json.loads(out)
    assert [r["percentile"] for r in data["rows"]] == [50.0, 99.0]
    assert data["recommended"]["percentile"] == 99.0
    assert data["recommended_source"].startswith("held-out held.csv[loss] (n=2000 clients), p99")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--percentiles", "50,x"], "--percentiles"),
        (["--percentiles", "50,101"], "[0, 100]"),
        (["--epsilon", "0"], "epsilon must be"),
        (["--cohort", "0"], "cohort n must be"),
        (["--column", "loss"], "CSV only"),
    ],
)
def test_calibrate_input_errors_exit_2_with_the_reason(
    held_out: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["calibrate", "--held-out", str(held_out), "--epsilon", "1", "--cohort", "2000"]
    code, _, err = run(capsys, *base, *extra)
    assert code == 2
    assert message in err


def test_calibrate_of_all_nan_data_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nan.npy"
    np.save(path, np.full(4, np.nan))
    code, _, err = run(
        capsys, "calibrate", "--held-out", str(path), "--epsilon", "1", "--cohort", "9"
    )
    assert code == 2
    assert "4 NaN dropped" in err


def test_calibrate_plot_writes_the_chart(
    held_out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "clip.png"
    code, out, _ = run(
        capsys, "calibrate", "--held-out", str(held_out), "--epsilon", "1", "--cohort", "2000",
        "--plot", str(png),
    )  # fmt: skip
    assert code == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert f"chart written to {png}" in out


def test_calibrate_plot_without_matplotlib_names_the_extra_and_exits_2(
    held_out: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    png = tmp_path / "clip.png"
    code, out, err = run(
        capsys, "calibrate", "--held-out", str(held_out), "--epsilon", "1", "--cohort", "2000",
        "--plot", str(png),
    )  # fmt: skip
    assert code == 2
    assert "pip install 'dpledger[plot]'" in err
    assert out == ""
    assert not png.exists()


def test_the_installed_cli_runs_plan_end_to_end() -> None:
    from dpledger.cli.main import build_parser

    assert "plan" in build_parser().format_help()
    done = subprocess.run(
        [sys.executable, "-m", "dpledger.cli", "plan", str(POLICY), "--cohort", "na=5", "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "can never publish" in " ".join(json.loads(done.stdout)["warnings"])

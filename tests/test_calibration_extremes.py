"""Calibration and budget_for_scale at the edges of a double (audit 2, finding 7).

ε outside a policy's budget range, held-out values below the smallest normal double, and
noise scales near the largest double gave a ZeroDivisionError (exit 3), an RMSE of inf,
"nan× higher" and bare ``Infinity`` in JSON; budget_for_scale raised an OverflowError.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from dpledger.cli.main import main
from dpledger.errors import InvalidInput
from dpledger.planning.clip import ClipCalibration, calibrate_clip
from dpledger.planning.inverse import budget_for_scale

VALUES = np.interp(np.linspace(0, 100, 2000), (0, 50, 90, 99, 100), (0, 0.4, 1.2, 3.4, 48))


def _finite_everywhere(res: ClipCalibration) -> None:
    data = res.model_dump(mode="json")
    json.dumps(data, allow_nan=False)  # strict JSON: raises on NaN or inf
    assert "inf" not in res.table()
    assert "nan" not in res.table()
    assert "inf" not in res.note
    assert "nan" not in res.note


@pytest.mark.parametrize("epsilon", [1e300, 1e10, 2e-308, 5e-324])
def test_an_epsilon_outside_the_policy_range_is_refused_naming_it(epsilon: float) -> None:
    with pytest.raises(InvalidInput, match=r"between 2\.2e-308 and 1e9"):
        calibrate_clip(VALUES, epsilon=epsilon, cohort=2000)


@pytest.mark.parametrize("epsilon", [1e9, 1e-300])
def test_an_epsilon_at_the_ends_of_the_range_gives_finite_numbers(epsilon: float) -> None:
    res = calibrate_clip(VALUES, epsilon=epsilon, cohort=2000)
    _finite_everywhere(res)
    assert all(r.rmse > 0 for r in res.rows)


def test_a_tiny_epsilon_shows_exponents_not_inf() -> None:
    res = calibrate_clip(VALUES, epsilon=1e-300, cohort=2000)
    usual = res.row(99)
    assert math.isfinite(usual.rmse)
    assert usual.rmse > 1e296
    assert "e300" in res.table()  # ×1000 of a scale near 1e297, written as an exponent
    assert "× higher" in res.note
    assert "nan" not in res.note


def test_a_noise_scale_beyond_a_double_is_refused() -> None:
    with pytest.raises(InvalidInput, match="beyond the range of a double"):
        calibrate_clip(VALUES, epsilon=2.3e-308, cohort=2000)


def test_held_out_values_below_the_smallest_normal_double_are_refused() -> None:
    with pytest.raises(InvalidInput, match=r"below 2\.2e-308"):
        calibrate_clip(np.linspace(1e-310, 1e-309, 100), epsilon=1.0, cohort=2000)
    with pytest.raises(InvalidInput, match=r"low must be 0 or at least 2\.2e-308"):
        calibrate_clip(VALUES, epsilon=1.0, cohort=2000, low=-1e-310)


def test_bounds_far_below_the_grid_have_the_grids_noise_not_zero() -> None:
    # bounds are normal doubles and Δ/(ε·n) underflows to 0, but a release is calibrated
    # on OpenDP's 2**-40 grid, whose rounding it charges: its noise is never below
    # 2**-40/(ε·n) (review 40: this table said "no noise", divided by nothing)
    values = np.linspace(2.3e-308, 3e-308, 101)
    res = calibrate_clip(values, epsilon=1e9, cohort=10**9, percentiles=(99, 100))
    for row in res.rows:
        assert row.noise_scale >= 2.0**-40 / 1e9 / 10**9
        assert row.rmse > 0
    assert res.row(99).noise_scale == res.row(100).noise_scale  # the grid's, not Δ's
    _finite_everywhere(res)


def test_equal_rmse_of_p99_and_the_best_is_a_tie() -> None:
    res = calibrate_clip(np.zeros(10) + 1.0, epsilon=1.0, cohort=10)
    assert res.recommended.percentile == 50
    assert "the usual default p99 has the same RMSE" in res.note


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--epsilon", "1e300"], "between 2.2e-308 and 1e9"),
        (["--epsilon", "2.3e-308"], "beyond the range of a double"),
    ],
)
def test_cli_calibrate_refuses_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    held = tmp_path / "h.npy"
    np.save(held, VALUES)
    code = main(["calibrate", "--held-out", str(held), "--cohort", "2000", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert says in err
    assert "Traceback" not in err


def test_cli_calibrate_of_tiny_values_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    held = tmp_path / "tiny.csv"
    held.write_text("loss\n" + "".join(f"{i}e-310\n" for i in range(1, 101)))
    code = main(["calibrate", "--held-out", str(held), "--epsilon", "1", "--cohort", "2000"])
    assert code == 2
    assert "below 2.2e-308" in capsys.readouterr().err


def test_cli_calibrate_json_at_a_tiny_epsilon_is_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    held = tmp_path / "h.npy"
    np.save(held, VALUES)
    argv = ["calibrate", "--held-out", str(held), "--epsilon", "1e-300", "--cohort", "2000"]
    assert main([*argv, "--json"]) == 0
    out = capsys.readouterr().out

    def no_constants(name: str) -> None:
        raise AssertionError(f"non-standard JSON constant {name}")

    data = json.loads(out, parse_constant=no_constants)
    assert all(math.isfinite(r["rmse"]) for r in data["rows"])
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "inf" not in text
    assert "nan" not in text


@pytest.mark.parametrize(
    ("sensitivity", "scale", "options"),
    [
        (1e308, 1e-308, {}),
        (1e300, 1e-300, {}),
        (1e12, 1e-300, {"measure": "rho", "mechanism": "gaussian"}),
    ],
)
def test_budget_for_scale_overflow_is_typed(
    sensitivity: float, scale: float, options: dict[str, str]
) -> None:
    with pytest.raises(InvalidInput, match="beyond the range of a double"):
        budget_for_scale(sensitivity, scale, **options)  # type: ignore[arg-type]

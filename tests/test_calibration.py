"""Clip calibration: the candidate table, its arithmetic, inputs and refusals."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from dpledger import mechanisms as mech
from dpledger.errors import InvalidInput
from dpledger.planning.clip import (
    ClipCalibration,
    calibrate_clip,
    load_held_out,
    plot_candidates,
)
from dpledger.policy import Clip

SEED_PERCENTILES = (50, 90, 95, 99, 100)
SEED_QUANTILES = (0.4, 1.2, 1.6, 3.4, 48.0)


def seed_held_out(n: int = 2000) -> npt.NDArray[np.float64]:
    """A held-out loss per client whose p50, p90, p95, p99, max are fixed knots.

    Deterministic: a piecewise-linear quantile function through (0, 0) and the
    knots, sampled at n evenly spaced probabilities.
    """
    return np.interp(
        np.linspace(0.0, 100.0, n), (0.0, *SEED_PERCENTILES), (0.0, *SEED_QUANTILES)
    ).astype(np.float64)


SEED = calibrate_clip(seed_held_out(), epsilon=1.0, cohort=2000, source="held-out fleet-a")


def test_seed_chart_noise_times_1000_is_reproduced() -> None:
    noise = [round(1000 * r.noise_scale, 1) for r in SEED.rows]
    assert noise == [0.2, 0.6, 0.8, 1.7, 24.0]


def test_seed_chart_clipped_fractions_are_reproduced() -> None:
    clipped = [r.clipped_fraction for r in SEED.rows]
    assert clipped == pytest.approx([0.50, 0.10, 0.05, 0.01, 0.0], abs=0.001)


def test_bounds_are_the_held_out_percentiles() -> None:
    assert [r.percentile for r in SEED.rows] == [50.0, 90.0, 95.0, 99.0, 100.0]
    assert [r.bound for r in SEED.rows] == pytest.approx(SEED_QUANTILES, rel=0.01)


def test_clipping_at_the_max_costs_an_order_of_magnitude_more_noise_than_p99() -> None:
    assert SEED.row(100).noise_scale >= 10 * SEED.row(99).noise_scale
    assert SEED.row(100).clipped_fraction == 0.0
    assert SEED.row(100).bias == 0.0


def test_clipping_at_the_median_clips_half_the_fleet_and_distorts_the_mean() -> None:
    median, p99 = SEED.row(50), SEED.row(99)
    assert median.clipped_fraction == pytest.approx(0.5, abs=0.001)
    assert median.bias < 0
    assert abs(median.bias) > 2 * abs(p99.bias)


def test_noise_scale_is_the_mechanisms_closed_form_over_the_cohort() -> None:
    # the calibrated scale (review 40): a few ulps above the closed form at these bounds
    for r in SEED.rows:
        assert r.noise_scale == pytest.approx(mech.noise_scale(r.bound, 1.0, "epsilon") / 2000)
        assert r.noise_scale >= mech.noise_scale(r.bound, 1.0, "epsilon") / 2000


def test_bias_and_rmse_match_a_direct_computation() -> None:
    rng = np.random.default_rng(7)
    values = rng.lognormal(mean=-0.5, sigma=1.0, size=5000)
    res = calibrate_clip(values, epsilon=0.5, cohort=800, percentiles=(10, 60, 97, 99.5))
    for r in res.rows:
        bound = np.percentile(values, r.percentile)
        clipped = np.clip(values, 0.0, bound)
        assert r.bound == bound
        assert r.bias == pytest.approx(clipped.mean() - values.mean(), rel=1e-9, abs=1e-12)
        assert r.clipped_fraction == np.mean(values > bound)
        scale = bound / (0.5 * 800)
        assert r.noise_scale == pytest.approx(scale, rel=1e-12)
        assert r.rmse == pytest.approx(math.sqrt(r.bias**2 + 2 * scale**2), rel=1e-9)


def test_values_below_low_are_raised_to_low_and_count_as_clipped() -> None:
    values = np.array([-2.0, -1.0, 0.5, 1.0, 2.0])
    res = calibrate_clip(values, epsilon=1.0, cohort=10, percentiles=(100,), low=0.0)
    r = res.rows[0]
    assert r.clipped_fraction == pytest.approx(2 / 5)
    assert r.bias == pytest.approx(np.clip(values, 0, 2).mean() - values.mean())


def test_add_remove_sensitivity_is_the_largest_magnitude_replace_is_the_width() -> None:
    values = np.linspace(-1.0, 4.0, 101)
    kw = {"epsilon": 2.0, "cohort": 100, "percentiles": (100,), "low": -3.0}
    replace = calibrate_clip(values, neighbouring="replace", **kw).rows[0]  # type: ignore[arg-type]
    add_remove = calibrate_clip(values, neighbouring="add_remove", **kw).rows[0]  # type: ignore[arg-type]
    assert replace.noise_scale == pytest.approx((4.0 - -3.0) / (2.0 * 100))
    assert add_remove.noise_scale == pytest.approx(max(3.0, 4.0) / (2.0 * 100))


def test_recommended_is_the_lowest_rmse_and_says_when_it_is_not_p99() -> None:
    assert SEED.recommended == min(SEED.rows, key=lambda r: r.rmse)
    assert SEED.recommended.percentile != 99
    assert "NOT the usual default p99" in SEED.note


def test_recommendation_is_p99_when_the_tail_is_a_lone_outlier() -> None:
    values = np.append(np.linspace(0.0, 1.0, 1999), 1000.0)
    res = calibrate_clip(values, epsilon=0.5, cohort=500)
    assert res.recommended.percentile == 99
    assert "usual default" in res.note
    assert "NOT" not in res.note


def test_source_string_has_the_form_of_a_policy_clip_source() -> None:
    text = SEED.source_string(99)
    assert text.startswith("held-out fleet-a (n=2000 clients), p99 = 3.4")
    assert SEED.source_string() == SEED.source_string(SEED.recommended.percentile)


def test_to_clip_gives_a_valid_policy_clip_with_provenance() -> None:
    clip = SEED.to_clip(99)
    assert isinstance(clip, Clip)
    assert float(clip.high) == pytest.approx(SEED.row(99).bound, rel=1e-5)
    assert clip.low == 0
    assert clip.source == SEED.source_string(99)


def test_table_lists_every_candidate_and_marks_the_recommended_one() -> None:
    table = SEED.table()
    for label, noise in zip(
        ("p50", "p90", "p95", "p99", "p100"), ("0.2", "0.6", "0.8", "1.7", "24.0"), strict=True
    ):
        line = next(ln for ln in table.splitlines() if ln.startswith(label + " "))
        assert noise in line.split()
    marked = [ln for ln in table.splitlines() if ln.rstrip().endswith("*")]
    assert len(marked) == 1
    assert marked[0].startswith(f"p{SEED.recommended.percentile:g} ")


def test_result_is_frozen_and_round_trips_through_json() -> None:
    with pytest.raises(InvalidInput, match="frozen"):  # a DpLedgerError, not pydantic's
        SEED.epsilon = 2.0  # type: ignore[misc]
    assert isinstance(SEED.rows, tuple)
    assert ClipCalibration.model_validate_json(SEED.model_dump_json()) == SEED


def test_unknown_candidate_is_refused() -> None:
    with pytest.raises(InvalidInput, match="p42 is not a candidate"):
        SEED.row(42)


# -- inputs ---------------------------------------------------------------------------------


def test_npy_path_is_read_and_named_in_the_provenance(tmp_path: Path) -> None:
    path = tmp_path / "fleet-b.npy"
    np.save(path, seed_held_out())
    res = calibrate_clip(path, epsilon=1.0, cohort=2000)
    assert res.rows == SEED.rows
    assert res.source_string(99).startswith("held-out fleet-b.npy (n=2000 clients), p99")


def test_csv_column_is_read_and_empty_cells_are_dropped_as_nan(tmp_path: Path) -> None:
    path = tmp_path / "held.csv"
    path.write_text("client,loss\na,0.5\nb,\nc,1.5\nd,2.5\n", encoding="utf-8")
    values = load_held_out(path, "loss")
    assert np.isnan(values[1])
    res = calibrate_clip(path, column="loss", epsilon=1.0, cohort=10, percentiles=(100,))
    assert (res.n_values, res.nan_dropped) == (3, 1)
    assert res.rows[0].bound == 2.5
    assert "held.csv[loss]" in res.source


def test_zeros_in_any_spelling_still_read_as_zero(tmp_path: Path) -> None:
    path = tmp_path / "zeros.csv"
    path.write_text("v\n0\n-0.0\n0e5\n.0E-9\n5e-324\n", encoding="utf-8")
    assert load_held_out(path).tolist() == [0.0, 0.0, 0.0, 0.0, 5e-324]


def test_csv_cells_in_every_decimal_form_read_exactly(tmp_path: Path) -> None:
    path = tmp_path / "one.csv"
    path.write_text("x\n1\n-1.5\n+.5\n2.\n1E-3\n\nNaN\n 7 \n", encoding="utf-8")
    got = load_held_out(path)
    assert got[:5].tolist() == [1.0, -1.5, 0.5, 2.0, 0.001]
    assert np.isnan(got[5:7]).all()
    assert got[7] == 7.0


def test_single_column_csv_needs_no_column_name(tmp_path: Path) -> None:
    path = tmp_path / "one.csv"
    path.write_text("loss\n1\n2\n3\n", encoding="utf-8")
    assert load_held_out(path).tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("name", "text", "column", "message"),
    [
        ("a.csv", "x,y\n1,2\n", None, "name one with --column"),  # the CLI flag (audit 5 F8)
        ("a.csv", "x\n2\n1e-400\n", None, r"line 3: '1e-400' is too small for a double \(it"),
        ("a.csv", "x\n2\n-5e-999\n", None, "line 3: '-5e-999' is too small"),
        ("a.csv", "x,y\n1,2\n", "z", "no column 'z'"),
        ("a.csv", "x\n1\noops\n", "x", "line 3: 'oops' is not a number"),
        # float() reads these; a held-out file does not (nothing invented from a typo)
        ("a.csv", "x\n1\n1_000\n", "x", "line 3: '1_000' is not a number"),
        ("a.csv", "x\n1\n\uff11\n", "x", "line 3: '\uff11' is not a number"),  # full-width 1
        ("a.csv", "x\n\u0661\u0662\n", "x", "line 2: '\u0661\u0662' is not a number"),
        ("a.csv", "x\n1\n0x10\n", "x", "line 3: '0x10' is not a number"),
        # review: one pattern over the joined column backtracked exponentially (30 cells
        # before a bad one hung) and read a quoted cell "1\n2" as two numbers (exit 3)
        ("a.csv", "x\n" + "1234\n" * 30 + "12a\n", "x", "line 32: '12a' is not a number"),
        ("a.csv", 'x\n1\n"1\n2"\n', "x", r"line 3: '1\\n2' is not a number"),
        ("a.csv", "", None, "empty"),
        ("a.txt", "1\n", None, ".npy or .csv"),
    ],
)
def test_malformed_files_are_refused_with_the_reason(
    tmp_path: Path, name: str, text: str, column: str | None, message: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidInput, match=message):
        load_held_out(path, column)


def test_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot read"):
        load_held_out(tmp_path / "nope.npy")


# -- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "kwargs", "message"),
    [
        ([], {}, "no held-out values"),
        ([np.nan, np.nan, np.nan], {}, r"3 NaN dropped, nothing left"),
        ([1.0, np.inf], {}, "infinite"),
        ([[1.0, 2.0]], {}, "1-D"),
        (["a", "b"], {}, "must be numbers"),
        ([1.0, 2.0], {"percentiles": (50, 101)}, r"\[0, 100\], got \[101.0\]"),
        ([1.0, 2.0], {"percentiles": (-1,)}, r"\[0, 100\]"),
        ([1.0, 2.0], {"percentiles": ()}, "at least one"),
        ([1.0, 2.0], {"percentiles": (99, 99)}, "distinct"),
        ([1.0, 2.0], {"epsilon": 0.0}, "epsilon must be"),
        ([1.0, 2.0], {"epsilon": -1.0}, "epsilon must be"),
        ([1.0, 2.0], {"epsilon": math.nan}, "epsilon must be"),
        ([1.0, 2.0], {"epsilon": math.inf}, "epsilon must be"),
        ([1.0, 2.0], {"cohort": 0}, "cohort n must be"),
        ([1.0, 2.0], {"cohort": -5}, "cohort n must be"),
        ([1.0, 2.0], {"neighbouring": "swap"}, "neighbouring"),
        ([0.0, 0.0, 1.0], {"percentiles": (0, 50)}, "not above low"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(
    values: object, kwargs: dict[str, object], message: str
) -> None:
    args: dict[str, object] = {"epsilon": 1.0, "cohort": 100, **kwargs}
    with pytest.raises(InvalidInput, match=message):
        calibrate_clip(values, **args)  # type: ignore[arg-type]


def test_some_nan_are_dropped_and_counted() -> None:
    values = np.append(seed_held_out(), [np.nan] * 5)
    res = calibrate_clip(values, epsilon=1.0, cohort=2000)
    assert res.nan_dropped == 5
    assert res.rows == SEED.rows
    assert "5 NaN dropped" in res.table()


def test_plot_writes_the_grouped_bar_chart(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = plot_candidates(SEED, tmp_path / "clip.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("values", "says"),
    [
        (np.array(["1.5", "2.5"]), "real numbers"),
        (np.array([True, False, True]), "real numbers"),
        (np.array([1 + 2j, 3 + 0j]), "real numbers"),
        ([1.0, "2.0", 3.0], "real numbers"),
        ([1.0, None, 3.0], "real numbers"),
        ([1.0, 2.0, 5e12], "exceed 1e12"),
    ],
    ids=["text", "bool", "complex", "mixed text", "None", "beyond a clip bound"],
)
def test_held_out_values_are_real_numbers_a_policy_can_clip_to(values: object, says: str) -> None:
    """Text, booleans and complex values are refused, not converted (NumPy reads "1.5" as
    1.5 and drops an imaginary part); a value past any policy clip bound too."""
    with pytest.raises(InvalidInput, match=says):
        calibrate_clip(values, epsilon=0.2, cohort=1000)


def test_low_beyond_a_clip_bound_is_refused_not_an_infinite_rmse() -> None:
    with pytest.raises(InvalidInput, match="within ±1e12"):
        calibrate_clip([1.0, 2.0, 3.0], epsilon=0.2, cohort=1000, low=-1e308)


def test_a_csv_with_a_bom_duplicate_columns_or_a_ragged_row(tmp_path: Path) -> None:
    bom = tmp_path / "bom.csv"
    bom.write_bytes("\ufeffloss\n1.0\n2.0\n3.0\n".encode())
    assert calibrate_clip(bom, epsilon=0.2, cohort=1000, column="loss").n_values == 3
    twice = tmp_path / "twice.csv"
    twice.write_text("loss,loss\n1,2\n")
    with pytest.raises(InvalidInput, match="more than once"):
        calibrate_clip(twice, epsilon=0.2, cohort=1000, column="loss")
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("loss,ratio\n1,2\n3\n4,5\n")
    with pytest.raises(InvalidInput, match="line 3 has 1 cells"):
        calibrate_clip(ragged, epsilon=0.2, cohort=1000, column="loss")

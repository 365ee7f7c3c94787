"""Block-wise evaluation: the same rows as the whole-fleet computation, exact per-group sums.

Every test shrinks :data:`dpledger.metrics.blocks.BLOCK_SAMPLES` to a few samples, so a
fleet of a few dozen samples spans many blocks (clients larger than a block, empty
clients and groups that change inside a block included).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.errors import InvalidInput
from dpledger.metrics import blocks, flam, flam_regression
from dpledger.metrics import spatial as sp
from dpledger.metrics.declarations import (
    DECLARATIONS,
    Bounds,
    Contribution,
    sum_contributions,
)
from dpledger.metrics.secure_sum import FixedPoint, exact_sum

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

EDGES = (0.5, 1.0, 2.0, 5.0, 10.0, 25.0)
SMALL_BLOCK = 16


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blocks, "BLOCK_SAMPLES", SMALL_BLOCK)


def offsets_of(lengths: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)


def fleet(lengths: list[int], seed: int) -> dict[str, np.ndarray]:
    """Per-sample arrays of every metric, for clients of the given sample counts."""
    rng = np.random.default_rng(seed)
    n = sum(lengths)
    return {
        "loss": rng.exponential(2.0, n),
        "along": rng.normal(0, 2, n),
        "across": rng.normal(0, 3, n),
        "prob": rng.random(n),
        "outcome": (rng.random(n) < 0.5).astype(float),
        "cell": rng.integers(-5, 30, n),
        "y_true": rng.integers(0, 4, n),
        "y_pred": rng.integers(0, 4, n),
        "y": rng.normal(100, 15, n),
        "y_hat": rng.normal(100, 15, n),
    }


BATCH: dict[str, Callable[[dict[str, np.ndarray], Any], np.ndarray]] = {
    "loss": lambda d, o: sp.clipped_loss(d["loss"], clip_high=3.0, offsets=o),
    "ratio": lambda d, o: sp.along_across_ratio(d["along"], d["across"], offsets=o),
    "pooled": lambda d, o: sp.pooled_along_across_ratio(
        d["along"], d["across"], error_bound=4.0, max_samples=10, offsets=o
    ),
    "hist": lambda d, o: sp.error_histogram(
        sp.error_magnitude(d["along"], d["across"]), edges=EDGES, cap=7, offsets=o
    ),
    "calib": lambda d, o: sp.calibration_gap(d["prob"], d["outcome"], cap=6, offsets=o),
    "cells": lambda d, o: sp.distinct_cells(d["cell"], offsets=o),
    "cover": lambda d, o: sp.coverage(d["cell"], edges=[0, 2, 5, 10], offsets=o),
    "confusion": lambda d, o: flam.confusion_matrix(
        d["y_true"], d["y_pred"], n_classes=4, cap=5, offsets=o
    ),
    "counts": lambda d, o: flam.confusion_matrix(d["y_true"], d["y_pred"], n_classes=4, offsets=o),
    "regression": lambda d, o: flam_regression.regression_measures(
        d["y"], d["y_hat"], y_bounds=(50, 150), residual_bound=30, max_samples=8, offsets=o
    ),
}

LENGTHS = st.lists(st.integers(0, 40), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(LENGTHS, st.integers(0, 2**32 - 1))
def test_blocked_rows_equal_the_whole_fleet_rows(lengths: list[int], seed: int) -> None:
    data = fleet(lengths, seed)
    offsets = offsets_of(lengths)
    for name, batch in BATCH.items():
        blocked = batch(data, offsets)
        with pytest.MonkeyPatch.context() as m:
            m.setattr(blocks, "BLOCK_SAMPLES", 10**9)
            whole = batch(data, offsets)
        np.testing.assert_array_equal(blocked, whole, err_msg=name)


def _jobs() -> dict[str, Contribution]:
    return {
        "clipped_loss": Contribution(DECLARATIONS["clipped_loss"], Bounds(low=0.0, high=3.0)),
        "along_across_ratio": Contribution(
            DECLARATIONS["along_across_ratio"], Bounds(low=0.0, high=10.0)
        ),
        "error_histogram": Contribution(
            DECLARATIONS["error_histogram"], Bounds(cap=7.0, edges=EDGES)
        ),
        "calibration_gap": Contribution(
            DECLARATIONS["calibration_gap"], Bounds(cap=6.0, dimension=10)
        ),
        "coverage": Contribution(DECLARATIONS["coverage"], Bounds(cap=1.0, edges=(0, 2, 5))),
        "pooled_along_across_ratio": Contribution(
            DECLARATIONS["pooled_along_across_ratio"],
            Bounds(cap=9.0),
            {"error_bound": 4.0, "max_samples": 10},
        ),
        "confusion_matrix": Contribution(
            DECLARATIONS["confusion_matrix"], Bounds(cap=5.0), {"n_classes": 4}
        ),
        "regression_measures": Contribution(
            DECLARATIONS["regression_measures"],
            Bounds(cap=20.0),
            {"y_bounds": (50.0, 150.0), "residual_bound": 30.0, "max_samples": 8},
        ),
    }


def _sample_data(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = dict(data)
    out["y_true"], out["y_pred"] = data["y"], data["y_hat"]  # regression reads these names
    return out


@settings(max_examples=40, deadline=None)
@given(LENGTHS, st.integers(0, 2**32 - 1), st.integers(1, 4))
def test_region_sums_equal_the_exact_sum_of_the_client_rows(
    lengths: list[int], seed: int, n_groups: int
) -> None:
    rng = np.random.default_rng(seed)
    data = fleet(lengths, seed)
    offsets = offsets_of(lengths)
    groups = rng.integers(0, n_groups, len(lengths))  # any order, not only contiguous
    for name, job in _jobs().items():
        arrays = _sample_data(data) if name == "regression_measures" else data
        sums = sum_contributions({name: job}, arrays, offsets=offsets, groups=groups,
                                 n_groups=n_groups)[name]  # fmt: skip
        rows = job.declaration.contribute(arrays, job.bounds, offsets=offsets, **job.settings)
        grid = job.declaration.grid(job.bounds)
        assert sums.shape == (n_groups, rows.shape[1])
        for g in range(n_groups):
            want = exact_sum(rows[groups == g], grid)
            np.testing.assert_array_equal(sums[g], want, err_msg=f"{name}, group {g}")


def test_many_metrics_in_one_pass_equal_one_metric_at_a_time() -> None:
    lengths = [3, 0, 40, 7, 19, 1, 25]
    data = fleet(lengths, 7)
    offsets, groups = offsets_of(lengths), np.array([0, 1, 1, 0, 2, 2, 2])
    jobs = {k: v for k, v in _jobs().items() if k != "regression_measures"}
    together = sum_contributions(jobs, data, offsets=offsets, groups=groups)
    for name, job in jobs.items():
        alone = job.declaration.contribute_sums(
            data, job.bounds, offsets=offsets, groups=groups, **job.settings
        )
        np.testing.assert_array_equal(together[name], alone, err_msg=name)


def test_without_groups_the_sum_is_the_fleet_total() -> None:
    lengths = [5, 12, 30, 2]
    data = fleet(lengths, 3)
    job = _jobs()["error_histogram"]
    total = job.declaration.contribute_sums(data, job.bounds, offsets=offsets_of(lengths))
    rows = job.declaration.contribute(data, job.bounds, offsets=offsets_of(lengths))
    np.testing.assert_array_equal(total, exact_sum(rows, FixedPoint.for_cap(7.0)))


def test_group_sums_of_any_batch_function_exact_or_float() -> None:
    lengths = [9, 33, 0, 17, 4]
    data = fleet(lengths, 11)
    offsets, groups = offsets_of(lengths), np.array([1, 0, 1, 1, 0])
    rows = flam.confusion_matrix(data["y_true"], data["y_pred"], n_classes=4, cap=5,
                                 offsets=offsets)  # fmt: skip
    grid = FixedPoint.for_cap(5.0)
    labels = (data["y_true"], data["y_pred"])
    settings = {"offsets": offsets, "groups": groups, "n_classes": 4, "cap": 5}
    exact = blocks.group_sums(flam.confusion_matrix, *labels, grid=grid, **settings)
    approx = blocks.group_sums(flam.confusion_matrix, *labels, grid=None, **settings)
    assert exact.shape == approx.shape == (2, 4, 4)
    for g in (0, 1):
        want = exact_sum(rows[groups == g].reshape(-1, 16), grid).reshape(4, 4)
        np.testing.assert_array_equal(exact[g], want)
        np.testing.assert_allclose(approx[g], rows[groups == g].sum(axis=0), rtol=1e-14)


def test_a_bad_sample_in_a_later_block_is_named_by_its_fleet_index() -> None:
    lengths = [10] * 10
    data = fleet(lengths, 5)
    data["loss"][57] = math.nan
    data["prob"][83] = 1.5
    offsets = offsets_of(lengths)
    with pytest.raises(InvalidInput, match="first at index 57"):
        sp.clipped_loss(data["loss"], clip_high=3.0, offsets=offsets)
    with pytest.raises(InvalidInput, match="at index 83"):
        sp.calibration_gap(data["prob"], data["outcome"], cap=6, offsets=offsets)
    job = _jobs()["clipped_loss"]
    with pytest.raises(InvalidInput, match="first at index 57"):
        job.declaration.contribute_sums(data, job.bounds, offsets=offsets)
    with pytest.raises(InvalidInput, match="first at index 57"):
        job.declaration.contribute(data, job.bounds, offsets=offsets)


def test_encode_fast_path_gives_the_grids_integers() -> None:
    rng = np.random.default_rng(0)
    cases = [
        (FixedPoint.for_cap(40.0), rng.uniform(-40, 40, (50, 7))),
        (FixedPoint(0.0, 3.4), rng.uniform(0, 3.4, (50, 1))),
        (FixedPoint(0.0, 3.4), np.array([[3.4000000000000004], [-1e-300]])),  # rounding
        (FixedPoint(1.0, 5.0), rng.uniform(1, 5, (50, 1))),  # away from 0
        (FixedPoint.for_cap(1.0, bits=40), np.array([[1.0, -1.0, 0.0, 2.0**-40]])),
    ]
    for grid, rows in cases:
        np.testing.assert_array_equal(blocks.encode(grid, rows), grid.encode(rows))
    outside = [
        (FixedPoint(0.0, 3.4), rng.uniform(-1, 5, (50, 1))),
        (FixedPoint(1.0, 5.0), rng.uniform(0, 6, (50, 1))),
    ]
    for grid, rows in outside:  # refused on both paths, never clamped (audit 5, F9)
        for encode in (blocks.encode, lambda g, r: g.encode(r)):
            with pytest.raises(InvalidInput, match="outside the grid's"):
                encode(grid, rows)
    with pytest.raises(InvalidInput, match="NaN"):
        blocks.encode(FixedPoint.for_cap(1.0), np.array([[0.5, math.nan]]))


def test_client_segments_are_validated_once_and_must_match_the_arrays() -> None:
    seg = blocks.client_segments([0, 3, 3], 10)
    assert seg.lengths.tolist() == [3, 0, 7]
    assert sp.clipped_loss(np.ones(10), clip_high=2.0, offsets=seg).tolist() == [1.0, 0.0, 1.0]
    with pytest.raises(InvalidInput, match="describe 10 samples, but the arrays hold 9"):
        sp.clipped_loss(np.ones(9), clip_high=2.0, offsets=seg)
    with pytest.raises(InvalidInput, match="start at 0"):
        blocks.client_segments([1, 3], 10)
    with pytest.raises(InvalidInput, match="n_samples"):
        blocks.client_segments([0], -1)


@pytest.mark.parametrize(
    ("groups", "n_groups", "match"),
    [
        ([0, 1], None, "one label per client"),
        ([0, -1, 0], None, "≥ 0"),
        ([0, 2, 0], 2, "outside"),
        ([0.0, 1.0, 0.0], None, "integer labels"),
        (None, 3, "needs groups"),
    ],
)
def test_groups_are_checked(groups: Any, n_groups: int | None, match: str) -> None:
    data = fleet([2, 3, 4], 1)
    job = _jobs()["clipped_loss"]
    with pytest.raises(InvalidInput, match=match):
        job.declaration.contribute_sums(
            data, job.bounds, offsets=[0, 2, 5], groups=groups, n_groups=n_groups
        )


def test_unequal_sample_arrays_are_refused_before_any_sum() -> None:
    data = fleet([4, 4], 2)
    data["across"] = data["across"][:-1]
    job = _jobs()["along_across_ratio"]
    with pytest.raises(InvalidInput, match="equally long"):
        job.declaration.contribute_sums(data, job.bounds, offsets=[0, 4])


@pytest.mark.parametrize(
    "cells",
    [
        [2**62, -(2**62), 2**62, 5, 5, 2**61],  # ids ±2⁶²: sorted as (client, id) pairs
        [0, 2**59, 1, 2**59, 0, 3],  # a span that times the clients overflows the keys
        [7, 7, 7, 1, 2, 3],
        [2**40, 2**40 + 1, 2**40, -(2**45), -(2**45) + 7, -(2**45)],  # int32 keys, wide ids
    ],
)
def test_distinct_cells_is_exact_whatever_the_id_range(cells: list[int]) -> None:
    arr = np.array(cells, dtype=np.int64)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(blocks, "BLOCK_SAMPLES", 10**9)
        got = sp.distinct_cells(arr, offsets=[0, 3, 3])
    assert got.tolist() == [float(len(set(cells[:3]))), 0.0, float(len(set(cells[3:])))]

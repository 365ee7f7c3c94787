"""Per-region sums of a count contribution from its cells: no row for an uncapped client.

:func:`dpledger.metrics.blocks.sums_in_blocks` adds a count contribution (the confusion
matrix) per group from one tally of its samples' cells, and builds rows only for the
clients its cap scales. These tests hold that path to the rows path bit for bit, check it
is the path taken, and that grids it cannot serve fall back to rows. Blocks are shrunk to a
few samples so groups change inside blocks and clients straddle them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.errors import InvalidInput
from dpledger.metrics import blocks, flam
from dpledger.metrics.declarations import DECLARATIONS, Bounds, Contribution, sum_contributions
from dpledger.metrics.secure_sum import FixedPoint, exact_sum

SMALL_BLOCK = 16
CONFUSION = DECLARATIONS["confusion_matrix"]


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blocks, "BLOCK_SAMPLES", SMALL_BLOCK)


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """What every call of the tally path returned (True: it added the block's units)."""
    seen: list[bool] = []
    real = blocks._add_tally

    def spy(*args: Any) -> bool:
        seen.append(real(*args))
        return seen[-1]

    monkeypatch.setattr(blocks, "_add_tally", spy)
    return seen


def _labels(lengths: list[int], n_classes: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = sum(lengths)
    return {"y_true": rng.integers(0, n_classes, n), "y_pred": rng.integers(0, n_classes, n)}


def _offsets(lengths: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 14), min_size=1, max_size=14),
    st.integers(1, 5),
    st.integers(1, 4),
    st.sampled_from([1.0, 3.0, 5.0, 7.5]),
    st.integers(0, 2**32 - 1),
)
def test_confusion_sums_from_cells_equal_the_exact_sum_of_rows(
    lengths: list[int], n_classes: int, n_groups: int, cap: float, seed: int
) -> None:
    data, offsets = _labels(lengths, n_classes, seed), _offsets(lengths)
    groups = np.random.default_rng(seed).integers(0, n_groups, len(lengths))
    job = Contribution(CONFUSION, Bounds(cap=cap), {"n_classes": n_classes})
    sums = sum_contributions({"cm": job}, data, offsets=offsets, groups=groups,
                             n_groups=n_groups)["cm"]  # fmt: skip
    rows = CONFUSION.contribute(data, job.bounds, offsets=offsets, n_classes=n_classes)
    grid = CONFUSION.grid(job.bounds)
    for g in range(n_groups):
        np.testing.assert_array_equal(sums[g], exact_sum(rows[groups == g], grid))


def test_the_cells_path_is_the_one_taken_for_the_shipped_grid(taken: list[bool]) -> None:
    lengths = [3, 0, 9, 4, 12, 1, 6, 30, 2]  # cap 5: some clients scaled, some not
    data, offsets = _labels(lengths, 3, 1), _offsets(lengths)
    job = Contribution(CONFUSION, Bounds(cap=5.0), {"n_classes": 3})
    sum_contributions({"cm": job}, data, offsets=offsets, groups=[0, 1, 1, 0, 2, 2, 0, 1, 2])
    assert taken
    assert all(taken)


@pytest.mark.parametrize(
    "grid",
    [FixedPoint(-2.5, 2.5), FixedPoint(-(2.0**30), 2.0**30)],
    ids=["uncapped-length-above-high", "quantum-above-1"],
)
def test_a_grid_the_cells_cannot_serve_falls_back_to_rows(
    grid: FixedPoint, taken: list[bool]
) -> None:
    lengths = [3, 7, 2, 11, 5]
    data, offsets = _labels(lengths, 3, 2), _offsets(lengths)
    job = Contribution(CONFUSION, Bounds(cap=5.0), {"n_classes": 3}, grid)
    groups = np.array([0, 1, 0, 1, 1])
    sums = sum_contributions({"cm": job}, data, offsets=offsets, groups=groups)["cm"]
    rows = CONFUSION.contribute(data, job.bounds, offsets=offsets, n_classes=3)
    for g in (0, 1):
        np.testing.assert_array_equal(sums[g], exact_sum(rows[groups == g], grid))
    assert taken
    assert not any(taken)


@pytest.mark.parametrize(
    "grid", [FixedPoint(-1.0, 1.0), FixedPoint(0.5, 8.0)], ids=["counts-above", "zero-below"]
)
def test_a_grid_the_counts_do_not_fit_is_refused_not_clamped(grid: FixedPoint) -> None:
    """Audit 5, F9: counts of a cap-5 confusion on a [−1, 1] grid (or zero counts on a grid
    away from 0) were clamped onto it, silently: now refused, as exact_sum refuses them."""
    lengths = [3, 7, 2, 11, 5]
    data, offsets = _labels(lengths, 3, 2), _offsets(lengths)
    job = Contribution(CONFUSION, Bounds(cap=5.0), {"n_classes": 3}, grid)
    groups = np.array([0, 1, 0, 1, 1])
    with pytest.raises(InvalidInput, match=r"outside the grid's.*counted in one block"):
        sum_contributions({"cm": job}, data, offsets=offsets, groups=groups)
    rows = CONFUSION.contribute(data, job.bounds, offsets=offsets, n_classes=3)
    with pytest.raises(InvalidInput, match="outside the grid's"):
        exact_sum(rows, grid)


def test_cell_counts_give_the_confusion_rows_bit_for_bit() -> None:
    lengths = [4, 0, 9, 1, 6]
    data, offsets = _labels(lengths, 4, 3), _offsets(lengths)
    counts = flam.confusion_cells(data["y_true"], data["y_pred"], n_classes=4, cap=5,
                                  offsets=offsets)  # fmt: skip
    rows = flam.flatten_confusion(flam.confusion_matrix(
        data["y_true"], data["y_pred"], n_classes=4, cap=5, offsets=offsets))  # fmt: skip
    np.testing.assert_array_equal(counts.rows(counts.counts()), rows)
    some = np.array([True, False, True, False, True])
    np.testing.assert_array_equal(counts.rows(counts.counts(some), some), rows[some])


def test_a_bad_label_in_a_later_block_is_named_by_its_fleet_index() -> None:
    lengths = [10] * 8
    data, offsets = _labels(lengths, 3, 4), _offsets(lengths)
    data["y_pred"][61] = 3
    job = Contribution(CONFUSION, Bounds(cap=5.0), {"n_classes": 3})
    with pytest.raises(InvalidInput, match="index 61"):
        sum_contributions({"cm": job}, data, offsets=offsets)


def test_the_error_histogram_sums_from_its_cells_too(taken: list[bool]) -> None:
    lengths = [3, 0, 9, 4, 12, 1, 6, 30, 2]  # cap 5: some clients scaled, some not
    rng = np.random.default_rng(6)
    n = sum(lengths)
    data = {"along": rng.normal(0, 2, n), "across": rng.normal(0, 3, n)}
    offsets, groups = _offsets(lengths), np.array([0, 1, 1, 0, 2, 2, 0, 1, 2])
    hist = DECLARATIONS["error_histogram"]
    job = Contribution(hist, Bounds(cap=5.0, edges=(0.5, 1.0, 2.0, 5.0)))
    sums = sum_contributions({"h": job}, data, offsets=offsets, groups=groups)["h"]
    rows = hist.contribute(data, job.bounds, offsets=offsets)
    for g in range(3):
        np.testing.assert_array_equal(sums[g], exact_sum(rows[groups == g], hist.grid(job.bounds)))
    assert taken
    assert all(taken)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(0, 12),
    st.integers(1, 6),
    st.integers(0, 60),
    st.sampled_from([(-40.0, 40.0, 26), (0.0, 5.0, 20), (-1.0, 1.0, 12), (-3.0, 3.0, 40)]),
    st.booleans(),
    st.integers(0, 2**32 - 1),
)
def test_capped_units_equal_encoding_the_scaled_rows(
    n_rows: int,
    width: int,
    top: int,
    bounds: tuple[float, float, int],
    repeat_factors: bool,
    seed: int,
) -> None:
    # Tables (few distinct factors, small counts) and the direct fallback (many distinct
    # factors, large counts) alike; entries past the grid are refused on every path.
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, top + 1, (n_rows, width)).astype(np.int64)
    if repeat_factors:
        factor = 40.0 / rng.integers(41, 50, n_rows).astype(np.float64)
    else:
        factor = rng.uniform(0.0, 1.0, n_rows)
    grid = FixedPoint(low=bounds[0], high=bounds[1], bits=bounds[2])
    most = counts.max(axis=1, initial=0) + rng.integers(0, 3, n_rows)
    scaled = counts.astype(np.float64) * factor[:, None]
    if scaled.size and float(scaled.max()) > grid.accepted_range()[1]:  # all paths refuse
        for path in (
            lambda: blocks.encode(grid, scaled),
            lambda: blocks.capped_units(grid, counts, factor),
            lambda: blocks._capped_units_reused(grid, counts, factor, most),
        ):
            with pytest.raises(InvalidInput, match="outside the grid's"):
                path()
        return
    want = blocks.encode(grid, scaled)
    got = blocks.capped_units(grid, counts, factor)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    # the summing path's form: reused buffers, no reductions when no clamp can apply
    reused = blocks._capped_units_reused(grid, counts, factor, most)
    assert reused.dtype == want.dtype
    np.testing.assert_array_equal(reused, want)


def test_coverage_sums_from_one_bucket_per_client(taken: list[bool]) -> None:
    lengths = [3, 0, 9, 4, 12, 1, 6, 30, 2]  # an empty client is in bucket 0 too
    rng = np.random.default_rng(8)
    data = {"cell": rng.integers(0, 12, sum(lengths))}
    offsets, groups = _offsets(lengths), np.array([0, 1, 1, 0, 2, 2, 0, 1, 2])
    cover = DECLARATIONS["coverage"]
    job = Contribution(cover, Bounds(cap=1.0, edges=(1.0, 2.0, 5.0)))
    sums = sum_contributions({"c": job}, data, offsets=offsets, groups=groups)["c"]
    rows = cover.contribute(data, job.bounds, offsets=offsets)
    np.testing.assert_array_equal(rows.sum(axis=1), np.ones(len(lengths)))
    for g in range(3):
        np.testing.assert_array_equal(sums[g], exact_sum(rows[groups == g], cover.grid(job.bounds)))
    assert taken
    assert all(taken)


@pytest.mark.parametrize(
    ("counts", "most", "factor"),
    [
        ([[147, 0], [3, 144]], [147, 147], 40.0 / 147),  # fl(147·fl(40/147)) > 40: encode
        ([[41, 0], [20, 21]], [41, 41], 40.0 / 41),  # no clamp: the one-product path
        ([[0, 0], [0, 0]], [50, 50], 40.0 / 50),  # all zero
        ([[1, 2], [0, 5]], [9, 9], 1e-300),  # all through the one-product path
    ],
)
def test_reused_capped_units_at_the_clamp_and_tiny_factors(
    counts: list[list[int]], most: list[int], factor: float
) -> None:
    grid = FixedPoint.for_cap(40.0)
    c = np.array(counts, dtype=np.int64)
    f = np.full(c.shape[0], factor)
    want = blocks.capped_units(grid, c, f)
    got = blocks._capped_units_reused(grid, c, f, np.array(most, dtype=np.int64))
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype

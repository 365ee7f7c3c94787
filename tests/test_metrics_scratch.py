"""Reused block temporaries: the same memory per key inside ``reusing``, never in a result."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dpledger.metrics import _scratch, blocks, flam
from dpledger.metrics import spatial as sp
from dpledger.metrics.declarations import DECLARATIONS, Bounds, Contribution, sum_contributions
from dpledger.metrics.secure_sum import exact_sum

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def test_outside_reusing_every_call_is_a_new_array() -> None:
    a = _scratch.empty("k", 8, np.float64)
    b = _scratch.empty("k", 8, np.float64)
    assert not np.shares_memory(a, b)


def test_inside_reusing_a_key_gets_the_same_memory_until_it_must_grow() -> None:
    with _scratch.reusing():
        a = _scratch.empty("k", 100, np.float64)
        assert np.shares_memory(a, _scratch.empty("k", 110, np.float64))  # within the headroom
        assert not np.shares_memory(a, _scratch.empty("other", 100, np.float64))
        assert not np.shares_memory(a, _scratch.empty("k", 100, np.int64))  # per dtype
        big = _scratch.empty("k", 10_000, np.float64)
        assert big.shape == (10_000,)
        assert big.dtype == np.float64
        assert np.shares_memory(big, _scratch.empty("k", 50, np.float64))
        with _scratch.reusing():  # nested: the outer workspace
            assert np.shares_memory(big, _scratch.empty("k", 50, np.float64))
    assert not np.shares_memory(big, _scratch.empty("k", 50, np.float64))


def _data(seed: int, n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "along": rng.normal(0, 2, n),
        "across": rng.normal(0, 3, n),
        "prob": rng.random(n),
        "outcome": (rng.random(n) < 0.5).astype(float),
        "y_true": rng.integers(0, 4, n),
        "y_pred": rng.integers(0, 4, n),
    }


CALLS: dict[str, Callable[[dict[str, np.ndarray], Any], object]] = {
    "ratio": lambda d, o: sp.along_across_ratio(d["along"], d["across"], offsets=o),
    "calibration": lambda d, o: sp.calibration_gap(d["prob"], d["outcome"], cap=6, offsets=o),
    "histogram cells": lambda d, o: (
        sp.error_magnitude_cells(
            d["along"], d["across"], edges=(0.5, 1.0, 2.0), cap=7, offsets=o
        ).cells
    ),
    "confusion cells": lambda d, o: (
        flam.confusion_cells(d["y_true"], d["y_pred"], n_classes=4, cap=5, offsets=o).cells
    ),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_result_never_shares_a_reused_buffer(name: str) -> None:
    call, offsets = CALLS[name], np.array([0, 3, 3, 9, 20])
    first_data, second_data = _data(1, 40), _data(2, 40)
    want_first, want_second = call(first_data, offsets), call(second_data, offsets)
    with _scratch.reusing():
        first = call(first_data, offsets)
        kept = np.array(first, copy=True)
        second = call(second_data, offsets)
        np.testing.assert_array_equal(first, kept)  # the second call did not overwrite it
    np.testing.assert_array_equal(first, want_first)
    np.testing.assert_array_equal(second, want_second)


def test_sums_with_capped_clients_in_every_block_match_fresh_buffers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Blocks of different sizes and capped counts reuse (and grow) the tally buffers."""
    monkeypatch.setattr(blocks, "BLOCK_SAMPLES", 16)
    lengths = [30, 2, 0, 9, 41, 1, 6, 17, 3, 25]
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    data = _data(3, sum(lengths))
    groups = np.array([0, 1, 1, 0, 2, 2, 0, 1, 2, 0])
    jobs = {
        "confusion": Contribution(DECLARATIONS["confusion_matrix"], Bounds(cap=5.0),
                                  {"n_classes": 4}),
        "histogram": Contribution(DECLARATIONS["error_histogram"],
                                  Bounds(cap=4.0, edges=(0.5, 1.0, 2.0))),
        "calibration": Contribution(DECLARATIONS["calibration_gap"],
                                    Bounds(cap=3.0, dimension=6)),
    }  # fmt: skip
    sums = sum_contributions(jobs, data, offsets=offsets, groups=groups, n_groups=3)
    for name, job in jobs.items():
        rows = job.declaration.contribute(data, job.bounds, offsets=offsets, **job.settings)
        for g in range(3):
            want = exact_sum(rows[groups == g], job.declaration.grid(job.bounds))
            np.testing.assert_array_equal(sums[name][g], want, err_msg=f"{name}, group {g}")

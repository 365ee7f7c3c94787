"""Per-region sums on a thread pool: the same bits, dtypes and errors for any ``workers``.

Blocks are shrunk to a few samples (as in test_metrics_blocks), so a small fleet spans
many blocks and every worker gets several.
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.errors import InvalidInput
from dpledger.metrics import _pool, _scratch, blocks, flam
from dpledger.metrics.declarations import DECLARATIONS, Bounds, Contribution, sum_contributions
from dpledger.metrics.secure_sum import FixedPoint
from tests.test_metrics_blocks import _jobs, _sample_data, fleet, offsets_of

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

WORKERS = (1, 2, 4)


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blocks, "BLOCK_SAMPLES", 16)


def _all_sums(data: dict[str, np.ndarray], offsets: Any, groups: Any, workers: int) -> Any:
    jobs = {k: v for k, v in _jobs().items() if k != "regression_measures"}
    out = sum_contributions(jobs, data, offsets=offsets, groups=groups, workers=workers)
    reg = {"regression_measures": _jobs()["regression_measures"]}
    out |= sum_contributions(reg, _sample_data(data), offsets=offsets, groups=groups,
                             workers=workers)  # fmt: skip
    return out


def _assert_same(a: dict[str, np.ndarray], b: dict[str, np.ndarray], what: str) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype, (what, name)
        assert a[name].shape == b[name].shape, (what, name)
        assert np.array_equal(a[name], b[name]), (what, name)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.integers(0, 60), min_size=1, max_size=30),  # empty and over-cap clients
    st.integers(0, 2**32 - 1),
    st.integers(1, 4),
)
def test_any_number_of_workers_gives_the_same_sums(
    lengths: list[int], seed: int, n_groups: int
) -> None:
    data = fleet(lengths, seed)
    offsets = offsets_of(lengths)
    groups = np.random.default_rng(seed).integers(0, n_groups, len(lengths))
    one = _all_sums(data, offsets, groups, 1)
    for w in WORKERS[1:]:
        _assert_same(one, _all_sums(data, offsets, groups, w), f"workers={w}")


def test_caps_bind_and_edge_values_give_the_same_sums() -> None:
    lengths = [0, 45, 3, 0, 90, 1, 16, 17, 0, 33, 64, 2, 0]
    data = fleet(lengths, 1)
    n = sum(lengths)
    data["loss"][::5] = 3.0  # at the clip
    data["loss"][1::7] = 1e300
    data["loss"][2::11] = 0.0
    data["along"][::9], data["across"][::9] = 1e200, -1e200
    data["along"][3::13], data["across"][3::13] = 0.0, 0.0
    data["along"][4::17] = -0.0
    data["prob"][::6] = 0.0
    data["prob"][1::6] = 1.0
    data["cell"][::4] = 2**40 + np.arange(n)[::4]
    offsets, groups = offsets_of(lengths), np.arange(len(lengths)) % 3
    one = _all_sums(data, offsets, groups, 1)
    for w in WORKERS[1:]:
        _assert_same(one, _all_sums(data, offsets, groups, w), f"workers={w}")
    without = {
        w: {
            name: job.declaration.contribute_sums(
                data, job.bounds, offsets=offsets, workers=w, **job.settings
            )
            for name, job in _jobs().items()
            if name != "regression_measures"
        }
        for w in WORKERS
    }
    _assert_same(without[1], without[2], "no groups, 2")
    _assert_same(without[1], without[4], "no groups, 4")


def _first_sample(a: np.ndarray, *, offsets: Any) -> np.ndarray:
    """Each client's first sample (0 if empty) and its sample count: float rows."""
    out = np.zeros((offsets.n_clients, 2))
    some = offsets.lengths > 0
    out[some, 0] = a[offsets.starts[some]]
    out[:, 1] = offsets.lengths
    return out


def test_float_sums_are_combined_in_block_order() -> None:
    lengths = [7, 0, 31, 12, 5, 40, 22, 3, 9, 18, 1, 0, 27, 14, 6, 35]
    data = fleet(lengths, 4)
    rng = np.random.default_rng(0)  # cancellations: the order of the partials shows
    spread = rng.choice([1.0, 0.375, 1e16, -1e16, 3e15], data["along"].shape[0])
    offsets, groups = offsets_of(lengths), np.arange(len(lengths)) % 2
    kw: dict[str, Any] = {"offsets": offsets, "groups": groups, "grid": None}
    sums = {w: blocks.group_sums(_first_sample, spread, workers=w, **kw) for w in WORKERS}
    seg = blocks.client_segments(offsets, spread.shape[0])
    partials = []  # the sequential loop's: each block's per-group sums, block after block
    for c0, c1 in blocks.block_ranges(seg):
        s0, s1 = int(seg.starts[c0]), int(seg.starts[c1]) if c1 < len(lengths) else spread.size
        rows = _first_sample(spread[s0:s1], offsets=seg.part(c0, c1))
        here = groups[c0:c1]
        block = np.zeros((2, 2))
        for g in np.unique(here):
            block[g] = np.ascontiguousarray(rows[here == g].T).sum(axis=1)
        partials.append(block)
    want = np.ascontiguousarray(np.moveaxis(np.stack(partials), 0, -1)).sum(axis=-1)
    backwards = np.ascontiguousarray(np.moveaxis(np.stack(partials[::-1]), 0, -1)).sum(axis=-1)
    assert not np.array_equal(want, backwards)  # the order shows in the bits
    for w in WORKERS:
        assert np.array_equal(sums[w], want)
        assert sums[w].dtype == want.dtype


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None, np.float64(2.0), 257, 10**6])
def test_bad_workers_are_typed_errors(bad: Any) -> None:
    lengths = [5, 6]
    data = fleet(lengths, 0)
    job = _jobs()["clipped_loss"]
    offsets = offsets_of(lengths)
    with pytest.raises(InvalidInput, match="workers"):
        sum_contributions({"loss": job}, data, offsets=offsets, workers=bad)
    with pytest.raises(InvalidInput, match="workers"):
        job.declaration.contribute_sums(data, job.bounds, offsets=offsets, workers=bad)
    with pytest.raises(InvalidInput, match="workers"):
        blocks.group_sums(flam.confusion_matrix, data["y_true"], data["y_pred"],
                          offsets=offsets, grid=None, n_classes=4, workers=bad)  # fmt: skip


def test_numpy_integer_workers_are_accepted() -> None:
    assert _pool.check_workers(np.int64(3)) == 3


def test_a_sums_call_without_workers_runs_on_the_default_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the default is the usable CPUs up to 4, and every public entry point passes it on
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert min(4, cpus or 1) == blocks.DEFAULT_WORKERS
    seen: list[int] = []
    real = blocks.run_ordered

    def spy(n: int, start: Any, step: Any, workers: int) -> Any:
        seen.append(workers)
        return real(n, start, step, workers)

    monkeypatch.setattr(blocks, "run_ordered", spy)
    lengths = [5, 6]
    data = fleet(lengths, 0)
    job = _jobs()["clipped_loss"]
    sum_contributions({"loss": job}, data, offsets=offsets_of(lengths))
    job.declaration.contribute_sums(data, job.bounds, offsets=offsets_of(lengths))
    assert seen == [blocks.DEFAULT_WORKERS] * 2


@pytest.mark.parametrize("workers", WORKERS)
def test_a_bad_sample_raises_the_same_error_for_any_workers(workers: int) -> None:
    lengths = [10] * 12
    data = fleet(lengths, 5)
    data["loss"][97] = math.nan
    offsets = offsets_of(lengths)
    job = _jobs()["clipped_loss"]
    with pytest.raises(InvalidInput, match="first at index 97"):
        job.declaration.contribute_sums(data, job.bounds, offsets=offsets, workers=workers)


@pytest.mark.parametrize("workers", WORKERS)
def test_the_first_failing_block_wins_whatever_finishes_first(workers: int) -> None:
    lengths = [10] * 12
    data = fleet(lengths, 6)
    data["loss"][25] = math.nan  # clipped_loss comes first in the jobs, but a later block
    data["prob"][13] = 1.5  # calibration fails in an earlier block: the sequential error
    offsets = offsets_of(lengths)
    jobs = {k: v for k, v in _jobs().items() if k in ("clipped_loss", "calibration_gap")}
    for _ in range(5):
        with pytest.raises(InvalidInput, match="at index 13"):
            sum_contributions(jobs, data, offsets=offsets, workers=workers)


@pytest.mark.parametrize("workers", WORKERS)
def test_any_exception_of_a_worker_propagates(workers: int) -> None:
    lengths = [8] * 10

    def boom(a: Any, b: Any, *, offsets: Any) -> np.ndarray:
        if np.any(np.asarray(a) == 40.0):
            raise ZeroDivisionError("block of sample 40")
        return np.zeros((offsets.n_clients, 1))

    x = np.arange(80.0)
    with pytest.raises(ZeroDivisionError, match="sample 40"):
        blocks.group_sums(boom, x, x, offsets=offsets_of(lengths), grid=None, workers=workers)


def scratch_users(monkeypatch: pytest.MonkeyPatch) -> dict[int, set[int]]:
    """Spy on the scratch workspaces: workspace id -> the threads that took a buffer from it
    (each workspace kept alive, so no id is reused; each take slowed a little so that the
    pool threads do take blocks)."""
    users: dict[int, set[int]] = {}
    alive: list[Any] = []  # keeps every workspace alive, so no id is reused
    lock = threading.Lock()
    take = _scratch._Workspace.take

    def spy(self: Any, key: str, n: int, dtype: Any) -> Any:
        with lock:
            alive.append(self)
            users.setdefault(id(self), set()).add(threading.get_ident())
        time.sleep(0.002)  # let the other threads take blocks too
        return take(self, key, n, dtype)

    monkeypatch.setattr(_scratch._Workspace, "take", spy)
    return users


def test_no_scratch_buffer_is_shared_between_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each workspace (and so each buffer) is used by one thread; several threads ran."""
    users = scratch_users(monkeypatch)
    lengths = [60, 2, 55, 48, 0, 70, 41, 66] * 3  # confusion and histogram caps bind
    data = fleet(lengths, 9)
    offsets = offsets_of(lengths)
    jobs = {"confusion_matrix": _jobs()["confusion_matrix"], "hist": _jobs()["error_histogram"]}
    one = sum_contributions(jobs, data, offsets=offsets, workers=1)
    assert len(users) == 1
    users.clear()
    four = sum_contributions(jobs, data, offsets=offsets, workers=4)
    assert all(len(threads) == 1 for threads in users.values())
    assert len({t for threads in users.values() for t in threads}) == len(users) >= 2
    _assert_same(one, four, "workers=4")


def test_exact_grid_sums_do_not_depend_on_the_order_of_workers() -> None:
    grid = FixedPoint.for_cap(5.0)
    lengths = [33, 0, 12, 48, 7, 19, 61, 4]
    data = fleet(lengths, 12)
    offsets, groups = offsets_of(lengths), np.array([2, 0, 1, 2, 0, 1, 2, 0])
    labels = (data["y_true"], data["y_pred"])
    kw: dict[str, Any] = {"offsets": offsets, "groups": groups, "n_classes": 4, "cap": 5}
    sums = {
        w: blocks.group_sums(flam.confusion_matrix, *labels, grid=grid, workers=w, **kw)
        for w in WORKERS
    }
    for w in WORKERS[1:]:
        assert np.array_equal(sums[1], sums[w])
        assert sums[1].dtype == sums[w].dtype
    decl = DECLARATIONS["confusion_matrix"]
    alone = decl.contribute_sums(data, Bounds(cap=5.0), offsets=offsets, groups=groups,
                                 n_classes=4, workers=4)  # fmt: skip
    assert np.array_equal(alone, sums[1].reshape(alone.shape))
    assert isinstance(_jobs()["confusion_matrix"], Contribution)


def test_numpys_call_error_mode_reaches_every_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    # np.seterr(all="call") with a callback: the pool threads must see the caller's
    # callback (without it a worker fails where one worker succeeds)
    from dpledger.metrics import spatial

    monkeypatch.setattr(blocks, "BLOCK_SAMPLES", 16)
    rng = np.random.default_rng(0)
    along, across = rng.normal(size=400), rng.normal(size=400)
    along[::37] = 1e200  # overflows when squared: the callback fires
    offsets = np.arange(0, 401, 10)
    results = []
    for workers in (1, 2, 4):
        seen: list[str] = []
        old_call = np.seterrcall(lambda kind, flag, s=seen: s.append(kind))
        try:
            with np.errstate(all="call"):
                results.append(blocks.group_sums(spatial.along_across_ratio, along, across,
                                                 offsets=offsets, grid=None, workers=workers,
                                                 clip=10.0))  # fmt: skip
        finally:
            np.seterrcall(old_call)
        assert seen  # the overflow was reported to the caller's callback
    assert results[0] == results[1] == results[2]

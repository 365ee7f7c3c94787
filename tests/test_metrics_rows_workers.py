"""Per-client rows on a thread pool: the same bits, dtypes and errors for any ``workers``.

The rows counterpart of test_metrics_workers (the sums path). Blocks are shrunk to a
few samples (as in test_metrics_blocks), so a small fleet spans many blocks and every
worker gets several. Where the order in which blocks finish could change a result (the
output's dtype, the error raised), an early block is made slow, so a later one finishes
first.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.errors import InvalidInput
from dpledger.metrics import blocks, spatial
from dpledger.metrics.declarations import DECLARATIONS, Bounds
from tests.test_metrics_blocks import _jobs, _sample_data, fleet, offsets_of
from tests.test_metrics_workers import scratch_users

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

WORKERS = (1, 2, 4)


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blocks, "BLOCK_SAMPLES", 16)


def _all_rows(data: dict[str, np.ndarray], offsets: Any, workers: int) -> dict[str, np.ndarray]:
    out = {}
    for name, job in _jobs().items():
        arrays = _sample_data(data) if name == "regression_measures" else data
        out[name] = job.declaration.contribute(
            arrays, job.bounds, offsets=offsets, workers=workers, **job.settings
        )
    return out


def _assert_same(a: dict[str, np.ndarray], b: dict[str, np.ndarray], what: str) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype, (what, name)
        assert a[name].shape == b[name].shape, (what, name)
        assert np.array_equal(a[name], b[name], equal_nan=True), (what, name)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.integers(0, 60), min_size=1, max_size=30),  # empty and over-cap clients
    st.integers(0, 2**32 - 1),
)
def test_any_number_of_workers_gives_the_same_rows(lengths: list[int], seed: int) -> None:
    data = fleet(lengths, seed)
    offsets = offsets_of(lengths)
    one = _all_rows(data, offsets, 1)
    for w in WORKERS[1:]:
        _assert_same(one, _all_rows(data, offsets, w), f"workers={w}")
    with pytest.MonkeyPatch.context() as mp:  # one block: the unblocked computation
        mp.setattr(blocks, "BLOCK_SAMPLES", 1 << 30)
        _assert_same(one, _all_rows(data, offsets, 1), "unblocked")


def test_caps_bind_and_edge_values_give_the_same_rows() -> None:
    lengths = [0, 45, 3, 0, 90, 1, 16, 17, 0, 33, 64, 2, 0]
    data = fleet(lengths, 1)
    n = sum(lengths)
    data["loss"][::5] = 3.0  # at the clip
    data["loss"][1::7] = 1e300
    data["along"][::9], data["across"][::9] = 1e200, -1e200
    data["along"][3::13], data["across"][3::13] = 0.0, 0.0
    data["along"][4::17] = -0.0
    data["prob"][::6] = 0.0
    data["prob"][1::6] = 1.0
    data["cell"][::4] = 2**40 + np.arange(n)[::4]
    offsets = offsets_of(lengths)
    one = _all_rows(data, offsets, 1)
    for w in WORKERS[1:]:
        _assert_same(one, _all_rows(data, offsets, w), f"workers={w}")


def _slow_first_block(delay: float = 0.05) -> Callable[[list[Any], Any], np.ndarray]:
    """Block 0 (it holds sample 0) sleeps and returns int32 rows; every other block at
    once, float rows with a fraction: a pool that let the first FINISHED block choose the
    output's dtype would keep the fractions."""

    def compute(views: list[Any], part: Any) -> np.ndarray:
        x = views[0]
        first = bool(part.n_samples) and x[0] == 0.0
        if first:
            time.sleep(delay)
        rows = np.zeros((part.n_clients, 3))
        some = part.lengths > 0
        rows[some, 0] = x[part.starts[some]] + 0.75
        rows[:, 1] = part.lengths
        rows[:, 2] = -2.5
        return rows.astype(np.int32) if first else rows

    return compute


@pytest.mark.parametrize("workers", WORKERS)
def test_the_first_blocks_rows_fix_the_dtype_and_later_rows_are_cast_into_it(
    workers: int,
) -> None:
    lengths = [5, 0, 9, 12, 7, 3, 20, 1, 8, 11, 6, 4]
    x = np.arange(float(sum(lengths)))
    seg = blocks.client_segments(offsets_of(lengths), x.size)
    compute = _slow_first_block()
    want = None  # the one-thread loop: allocate from block 0, assign every block into it
    for c0, c1 in blocks.block_ranges(seg):
        s0 = int(seg.starts[c0])
        part = seg.part(c0, c1)
        rows = compute([x[s0 : s0 + part.n_samples]], part)
        if want is None:
            want = np.empty((seg.n_clients, 3), dtype=rows.dtype)
        want[c0:c1] = rows
    assert want is not None
    assert want.dtype == np.int32
    got = blocks.rows_in_blocks(compute, [x], seg, lambda: None, workers=workers)
    assert got.dtype == want.dtype
    assert np.array_equal(got, want)


class _Failing:
    """A block computation that fails on chosen samples, with a slow early block."""

    def __init__(self, errors: dict[float, BaseException], slow: float) -> None:
        self.errors, self.slow = errors, slow
        self.ran: list[int] = []  # first sample of every block that ran
        self.whole_calls: list[int] = []  # thread of each whole() call
        self.lock = threading.Lock()

    def compute(self, views: list[Any], part: Any) -> np.ndarray:
        x = views[0]
        with self.lock:
            self.ran.append(int(x[0]))
        if np.any(x == self.slow):
            time.sleep(0.05)
        for value, exc in self.errors.items():
            if np.any(x == value):
                raise exc
        return np.zeros((part.n_clients, 1))

    def whole(self) -> None:
        self.whole_calls.append(threading.get_ident())
        raise InvalidInput("whole-fleet check: first at index 25")


@pytest.mark.parametrize("workers", WORKERS)
def test_the_first_failing_block_wins_whatever_finishes_first(workers: int) -> None:
    lengths = [10] * 12  # 12 clients of 10 samples, blocks of 2 clients
    x = np.arange(120.0)
    seg = blocks.client_segments(offsets_of(lengths), x.size)
    starts = [int(seg.starts[c0]) for c0, _ in blocks.block_ranges(seg)]
    for _ in range(3):
        # an InvalidInput in an early, slow block; another error in a later, fast one:
        # the early block's error, named by whole() (run once, in the calling thread)
        f = _Failing({25.0: InvalidInput("block-local: index 5"), 97.0: ZeroDivisionError()},
                     slow=25.0)  # fmt: skip
        with pytest.raises(InvalidInput, match="whole-fleet check: first at index 25"):
            blocks.rows_in_blocks(f.compute, [x], seg, f.whole, workers=workers)
        assert f.whole_calls == [threading.get_ident()]
        assert {s for s in starts if s <= 25} <= set(f.ran)  # every block up to it ran
        # the other way round: the early block's error is not an InvalidInput, so it is
        # raised as is and whole() is not run
        g = _Failing({25.0: ZeroDivisionError("block of 25"), 97.0: InvalidInput("97")},
                     slow=25.0)  # fmt: skip
        with pytest.raises(ZeroDivisionError, match="block of 25"):
            blocks.rows_in_blocks(g.compute, [x], seg, g.whole, workers=workers)
        assert g.whole_calls == []


@pytest.mark.parametrize("workers", WORKERS)
def test_a_bad_sample_raises_the_same_error_for_any_workers(workers: int) -> None:
    lengths = [10] * 12
    data = fleet(lengths, 5)
    data["loss"][97] = math.nan  # index 17 of its block: only whole() names 97
    data["loss"][113] = math.nan  # a later block fails too
    offsets = offsets_of(lengths)
    job = _jobs()["clipped_loss"]
    with pytest.raises(InvalidInput, match="first at index 97"):
        job.declaration.contribute(data, job.bounds, offsets=offsets, workers=workers)
    data["prob"][83] = 1.5
    job = _jobs()["calibration_gap"]
    with pytest.raises(InvalidInput, match="at index 83"):
        job.declaration.contribute(data, job.bounds, offsets=offsets, workers=workers)


@pytest.mark.parametrize("workers", WORKERS)
def test_any_exception_of_a_worker_propagates(workers: int) -> None:
    lengths = [8] * 10
    x = np.arange(80.0)
    seg = blocks.client_segments(offsets_of(lengths), x.size)
    f = _Failing({40.0: KeyError("block of sample 40")}, slow=-1.0)
    with pytest.raises(KeyError, match="sample 40"):
        blocks.rows_in_blocks(f.compute, [x], seg, f.whole, workers=workers)
    assert f.whole_calls == []


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None, np.float64(2.0), 257, 10**6])
def test_bad_workers_are_typed_errors(bad: Any) -> None:
    job = _jobs()["clipped_loss"]
    for lengths in ([5, 6], [30] * 4):  # one block (no pool), and many
        data, offsets = fleet(lengths, 0), offsets_of(lengths)
        with pytest.raises(InvalidInput, match="workers"):
            job.declaration.contribute(data, job.bounds, offsets=offsets, workers=bad)
        with pytest.raises(InvalidInput, match="workers"):
            job.declaration.contribute({"loss": data["loss"][:5]}, job.bounds, workers=bad)
        seg = blocks.client_segments(offsets, data["loss"].size)
        with pytest.raises(InvalidInput, match="workers"):
            blocks.rows_in_blocks(lambda v, p: np.zeros((p.n_clients, 1)), [data["loss"]], seg,
                                  lambda: None, workers=bad)  # fmt: skip


def test_a_rows_call_without_workers_runs_on_the_default_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[int] = []
    real = blocks.run_ordered

    def spy(n: int, start: Any, step: Any, workers: int) -> Any:
        seen.append(workers)
        return real(n, start, step, workers)

    monkeypatch.setattr(blocks, "run_ordered", spy)
    lengths = [20] * 6
    data = fleet(lengths, 0)
    job = _jobs()["clipped_loss"]
    job.declaration.contribute(data, job.bounds, offsets=offsets_of(lengths))
    job.declaration.contribute(data, job.bounds, offsets=offsets_of(lengths), workers=3)
    assert seen == [blocks.DEFAULT_WORKERS, 3]


def test_no_scratch_buffer_is_shared_between_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each workspace (and so each buffer) is used by one thread; several threads ran."""
    users = scratch_users(monkeypatch)
    lengths = [60, 2, 55, 48, 0, 70, 41, 66] * 3  # confusion and histogram caps bind
    data = fleet(lengths, 9)
    offsets = offsets_of(lengths)
    jobs = {k: _jobs()[k] for k in ("confusion_matrix", "error_histogram")}

    def rows(workers: int) -> dict[str, np.ndarray]:
        return {k: j.declaration.contribute(data, j.bounds, offsets=offsets, workers=workers,
                                            **j.settings) for k, j in jobs.items()}  # fmt: skip

    one = rows(1)
    assert len({t for threads in users.values() for t in threads}) == 1
    users.clear()
    four = rows(4)
    assert all(len(threads) == 1 for threads in users.values())
    assert len({t for threads in users.values() for t in threads}) == len(users) >= 2
    _assert_same(one, four, "workers=4")


def test_numpys_call_error_mode_reaches_every_worker() -> None:
    # np.seterr(all="call") with a callback: the pool threads must see the caller's
    # callback (without it a worker warns, an error here, where one worker succeeds).
    # Every client overflows when squared, and every block is slowed a little, so the
    # pool threads do take blocks and report to the callback from their own threads.
    rng = np.random.default_rng(0)
    n = 400
    data = {"along": rng.normal(size=n), "across": rng.normal(size=n)}
    data["along"][::10] = 1e200  # one sample of every client: the callback fires
    offsets = np.arange(0, n, 10)
    real, bounds = DECLARATIONS["along_across_ratio"], Bounds(low=0.0, high=10.0)

    def slow(d: Any, b: Bounds, offsets: Any, p: Any) -> np.ndarray:
        time.sleep(0.002)
        return real.compute(d, b, offsets, p)

    decl = dataclasses.replace(real, compute=slow)
    results = []
    for workers in WORKERS:
        threads: set[int] = set()
        old_call = np.seterrcall(lambda kind, flag, t=threads: t.add(threading.get_ident()))
        try:
            with np.errstate(all="call"):
                results.append(decl.contribute(data, bounds, offsets=offsets, workers=workers))
        finally:
            np.seterrcall(old_call)
        assert len(threads) == 1 if workers == 1 else len(threads) >= 2, (workers, threads)
    for r in results[1:]:
        assert np.array_equal(results[0], r)
    plain = spatial.along_across_ratio(data["along"], data["across"], clip=10.0, offsets=offsets)
    assert np.array_equal(results[0], plain[:, None])


@pytest.mark.parametrize("workers", WORKERS)
def test_the_rows_are_written_into_one_output_not_gathered(workers: int) -> None:
    """Peak memory: the output plus a few blocks' rows, not every block's rows and a
    concatenation of them (which would hold the rows twice)."""
    n_clients, width = 4_000, 64  # 2 MiB of rows; blocks of 8 clients (16 KiB of rows)
    x = np.ones(2 * n_clients)
    seg = blocks.client_segments(np.arange(0, 2 * n_clients, 2), x.size)

    def compute(views: list[Any], part: Any) -> np.ndarray:
        return np.full((part.n_clients, width), float(views[0][0]))

    out_bytes = n_clients * width * 8
    tracemalloc.start()
    try:
        rows = blocks.rows_in_blocks(compute, [x], seg, lambda: None, workers=workers)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rows.shape == (n_clients, width)
    assert np.all(rows == 1.0)
    assert peak < 1.3 * out_bytes, peak / out_bytes

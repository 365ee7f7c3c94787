"""Fleet-scale evaluation in client-aligned blocks: per-client rows, or per-group exact sums.

A batch contribution over a whole fleet (flat per-sample arrays plus ``offsets=``) used to
run every numpy step over all samples at once, so each temporary was as large as an input
array and was first touched in the call — on a virtual machine, first-touched memory costs
more than the arithmetic. Here the fleet is cut into blocks of whole clients of about
:data:`BLOCK_SAMPLES` samples; each block is computed by the same per-client code, so its
temporaries stay a few megabytes (cache-resident and reused) and the result is the same,
bit for bit, as the whole-fleet computation (a client's row depends on its own samples only).

Two forms:

* per-client rows (:func:`rows_in_blocks`; every batch function of :mod:`dpledger.metrics`
  runs this way, in the calling thread, when given many samples:
  :func:`~dpledger.metrics._blockwise.blockwise`), and
* per-group EXACT sums (:func:`group_sums`, :func:`sums_in_blocks`): what an aggregator
  delivers per region, equal bit for bit to
  :func:`~dpledger.metrics.secure_sum.exact_sum` of the group's per-client rows, without ever
  holding every client's row — only one block's.

Both take ``workers=``: blocks on a small thread pool (:mod:`dpledger.metrics._pool`),
with the same results, bit for bit, and the same errors as on one thread.

:func:`client_segments` validates ``offsets`` once into a :class:`Segments` that every
metric of a fleet can share (pass it as ``offsets=``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.metrics._pool import DEFAULT_WORKERS, check_workers, run_ordered
from dpledger.metrics._reading import read_plain
from dpledger.metrics._scratch import empty, reusing
from dpledger.metrics._segments import (
    CellCounts,
    FloatArray,
    IntArray,
    Segments,
    checked_segments,
    segments_for,
)
from dpledger.metrics.secure_sum import FixedPoint

__all__ = [
    "BLOCK_SAMPLES",
    "DEFAULT_WORKERS",
    "BlockJob",
    "Segments",
    "block_ranges",
    "capped_units",
    "client_segments",
    "encode",
    "group_sums",
    "rows_in_blocks",
    "sums_in_blocks",
    "worth_blocking",
]

BLOCK_SAMPLES = 1 << 17
"""Samples per block (about 1 MiB per float64 temporary): whole clients, so a client larger
than this is a block of its own."""

Arrays = Sequence[npt.NDArray[Any]]
Compute = Callable[[Arrays, Segments], npt.NDArray[Any]]
Tally = Callable[[Arrays, Segments], CellCounts]


class BlockJob(NamedTuple):
    """One contribution of :func:`sums_in_blocks`.

    ``compute(block_arrays, block_segments)`` gives the block's per-client rows; ``grid``
    the public fixed-point grid of its exact sums (None: float sums); ``whole()`` reruns
    it unblocked to name a bad sample by its fleet index. ``tally``, for a count
    contribution, gives the block's :class:`CellCounts` instead, so clients whose counts
    no cap scales are added per group without a row each.
    """

    compute: Compute
    grid: FixedPoint | None
    whole: Callable[[], object]
    tally: Tally | None = None


def client_segments(offsets: npt.ArrayLike | Segments, n_samples: int) -> Segments:
    """The fleet's client index, validated once: pass it as ``offsets=`` to every metric.

    ``offsets`` are the start of each client's samples (ascending, first 0, empty clients
    allowed); ``n_samples`` the length of the per-sample arrays.
    """
    if isinstance(n_samples, bool) or not isinstance(n_samples, int | np.integer):
        raise InvalidInput(f"n_samples must be an integer, got {shown(n_samples)}")
    if not 0 <= n_samples < 2**63:  # past int64, the lengths became objects or floats
        raise InvalidInput(f"n_samples must be in [0, 2**63), got {shown(n_samples)}")
    return segments_for(offsets, int(n_samples))


def block_ranges(seg: Segments, size: int | None = None) -> list[tuple[int, int]]:
    """Client ranges ``[c0, c1)`` of about ``size`` samples each (default
    :data:`BLOCK_SAMPLES`), covering every client."""
    size = BLOCK_SAMPLES if size is None else size
    if seg.n_clients == 0:
        return []
    cuts = np.searchsorted(seg.starts, np.arange(size, seg.n_samples, size), side="left")
    bounds = np.unique(np.concatenate(([0], cuts, [seg.n_clients])))
    return [(int(a), int(b)) for a, b in itertools.pairwise(bounds)]


def _slices(arrays: Arrays, seg: Segments, c0: int, c1: int) -> tuple[list[Any], Segments]:
    part = seg.part(c0, c1)
    s0 = int(seg.starts[c0])
    return [a[s0 : s0 + part.n_samples] for a in arrays], part


def rows_in_blocks(
    compute: Compute,
    arrays: Arrays,
    seg: Segments,
    whole: Callable[[], object],
    *,
    workers: int = DEFAULT_WORKERS,
) -> npt.NDArray[Any]:
    """Per-client rows of ``compute`` over the fleet, one block of clients at a time.

    ``compute(block_arrays, block_segments)`` returns one row per client of the block.
    Block 0 runs first, in the calling thread; its rows fix the dtype and row shape of the
    one output. The other blocks run on ``workers`` threads (an int ≥ 1; default
    :data:`DEFAULT_WORKERS`), each assigning its rows to its own slice of the output as
    the one-thread loop does: the same rows and dtype, bit for bit, for any number of
    workers, and besides the output only one block's rows per thread. A failure raises
    the FIRST failing block's error (:func:`~dpledger.metrics._pool.run_ordered`); for
    :class:`InvalidInput` (a bad sample), ``whole()`` — the same computation unblocked,
    whose checks run before any work — is run once, in the calling thread, so the error
    names whole-fleet indices.
    """
    threads = check_workers(workers)
    seg = checked_segments(seg)  # built by hand, it could split a client in two
    ranges = block_ranges(seg)
    if not ranges:
        return np.asarray(whole())
    with reusing():
        try:
            first = compute(*_slices(arrays, seg, *ranges[0]))
            out = np.empty((seg.n_clients, *first.shape[1:]), dtype=first.dtype)
            out[: ranges[0][1]] = first
            del first

            def step(_: None, i: int) -> None:
                c0, c1 = ranges[i + 1]
                out[c0:c1] = compute(*_slices(arrays, seg, c0, c1))

            run_ordered(len(ranges) - 1, lambda: None, step, threads)
        except InvalidInput:
            whole()
            raise
    return out


def worth_blocking(n_samples: int) -> bool:
    """True when ``n_samples`` is more than two blocks. A block of whole clients may run a
    client past :data:`BLOCK_SAMPLES`, so a metric called on one block is never cut again."""
    return n_samples > 2 * BLOCK_SAMPLES


def encode(grid: FixedPoint, rows: FloatArray) -> IntArray:
    """``grid.encode(rows)``, bit for bit, in two passes when no clamp can apply.

    When the grid's interval contains 0 and every value lies inside it (checked: two
    reductions, False for NaN), trunc(x / quantum) is already inside the grid's integer
    range — for x ≥ 0 it is floor(x/q) ≤ floor(high/q), for x < 0 it is ceil(x/q) ≥
    ceil(low/q) — so the clamp is the identity, and a float-to-int64 cast is trunc.
    Otherwise (NaN, a value outside, an interval away from 0, not a float64 array: flags,
    a masked array; review 42) the grid's own encode runs, which refuses NaN, values
    outside beyond float rounding, and what it does not read as numbers.
    """
    if not isinstance(grid, FixedPoint):
        raise InvalidInput(f"grid must be a FixedPoint, got {type(grid).__name__}")
    plain = type(rows) is np.ndarray and rows.dtype == np.float64
    return _encode(grid, rows, owned=False) if plain else grid.encode(rows)


def _encode(
    grid: FixedPoint, rows: FloatArray, *, owned: bool, out: IntArray | None = None
) -> IntArray:
    """:func:`encode`; ``owned`` rows (a temporary of the caller) are scaled in place, and
    cast into ``out`` (same shape) when given."""
    inverse = 1.0 / grid.quantum  # a power of two: multiplying by it is exact
    if (rows.size and math.isfinite(inverse) and grid.low <= 0.0 <= grid.high
            and float(rows.min()) >= grid.low and float(rows.max()) <= grid.high):  # fmt: skip
        if owned:
            rows *= inverse
            if out is not None:
                np.copyto(out, rows, casting="unsafe")  # astype's cast: toward zero
                return out
            return rows.astype(np.int64)  # the cast truncates toward zero
        return (rows * inverse).astype(np.int64)
    return grid.encode(rows)


def _add_units(
    acc: IntArray, rows: FloatArray, grid: FixedPoint, here: IntArray, one: list[int] | None
) -> None:
    """Add each row's grid units to its group's total in ``acc`` (groups × d, int64);
    ``one`` names the block's only group, if it has one."""
    try:
        units = encode(grid, rows)
    except InvalidInput as e:
        if not np.isfinite(rows).all():
            raise
        # values outside the grid: its count is this block's, not the fleet's
        raise InvalidInput(f"{e} (counted in one block of {len(rows):,} clients)") from None
    if one is not None:
        acc[one[0]] += units.sum(axis=0)
        return
    for g in np.unique(here):
        acc[g] += units[here == g].sum(axis=0)


def capped_units(grid: FixedPoint, counts: IntArray, factor: FloatArray) -> IntArray:
    """``encode(grid, counts * factor[:, None])`` bit for bit: the grid units of count rows
    scaled by one factor per row.

    ``counts * factor[:, None]`` converts each count k to float64 exactly (k < 2⁵³) and
    gives fl(k·f), the entry of the scaled row; that temporary is then scaled to grid
    units in place. (A table of the encoded fl(k·f) per distinct factor and count, read
    by index, was measured slower: building the index costs a pass of its own.)
    """
    arrays = type(counts) is np.ndarray and type(factor) is np.ndarray
    if not (isinstance(grid, FixedPoint) and arrays and counts.dtype.kind in "iu"
            and counts.ndim == 2 and factor.dtype == np.float64
            and factor.shape == counts.shape[:1]):  # fmt: skip
        raise InvalidInput("capped_units: a FixedPoint, int counts (rows, cells), a factor each")
    return _encode(grid, counts * factor[:, None], owned=True)


_NORMAL_FACTOR = 2.0**-960  # a factor at least this: no fl(k·f·2^m), k ≥ 1, m ≥ 0, is subnormal


def _capped_units_reused(
    grid: FixedPoint, counts: IntArray, factor: FloatArray, most: IntArray
) -> IntArray:
    """:func:`capped_units` bit for bit, in reused buffers (``_scratch``): valid until the
    next call. ``most`` bounds each row's counts (the client's sample count).

    Every entry is fl(k·f) with 0 ≤ k ≤ n, so it lies in [0, fl(n·f)] (rounding is
    monotone): when every fl(n·f) ≤ high and low ≤ 0, no clamp applies, so the two
    reductions over the rows are not needed. Scaling by 1/quantum = 2^m (m ≥ 0) commutes
    with rounding away from subnormals, so fl(k·f)·2^m = fl(k·(f·2^m)): one product per
    entry gives its grid value, and the cast truncates it, as :func:`encode` does.
    """
    size = counts.size
    scaled = empty("tally.scaled", size, np.float64).reshape(counts.shape)
    out = empty("tally.units", size, np.int64).reshape(counts.shape)
    inverse = 1.0 / grid.quantum
    if (
        size
        and math.isfinite(inverse)
        and inverse >= 1.0
        and grid.low <= 0.0
        and float(factor.min()) >= _NORMAL_FACTOR
        and float((most * factor).max()) <= grid.high
    ):
        np.multiply(counts, (factor * inverse)[:, None], out=scaled)
        np.copyto(out, scaled, casting="unsafe")  # astype's cast: toward zero
        return out
    np.multiply(counts, factor[:, None], out=scaled)  # as counts * factor[:, None]
    return _encode(grid, scaled, owned=True, out=out)


def _add_tally(
    acc: IntArray, counts: CellCounts, grid: FixedPoint, here: IntArray, present: list[int]
) -> bool:
    """Add a count contribution's grid units to ``acc`` (groups × cells) from its cells:
    bit for bit :func:`_add_units` of its rows, but only capped clients get a row.

    An uncapped client's row is its integer counts k, whose grid units are k / quantum
    exactly (a power of two ≤ 1, no clamp: low ≤ 0 ≤ k ≤ n ≤ high), so a group's units
    are 1/quantum times its uncapped clients' summed counts. One ``bincount`` gives both:
    each capped client (factor < 1) counts its cells in a row of its own, and the
    uncapped clients of group g count theirs in a shared row after those. Capped rows
    are encoded as :func:`_add_units` does (through :func:`capped_units`). Returns False,
    adding nothing, when the grid does not allow this: the caller then sums rows.
    """
    seg, w = counts.seg, counts.n_cells
    inverse = 1.0 / grid.quantum
    capped = None if counts.factor is None else counts.factor < 1.0
    lengths = seg.lengths if capped is None else seg.lengths[~capped]
    top = int(lengths.max()) if lengths.size else 0
    if not (inverse >= 1.0 and grid.low <= 0.0 and top <= grid.high and acc.shape[1] == w):
        return False
    n_capped = 0 if capped is None else int(np.count_nonzero(capped))
    if n_capped == 0 and len(present) == 1:
        acc[present] += np.bincount(counts.cells, minlength=w).reshape(1, w) * int(inverse)
        return True
    row = here + n_capped  # uncapped clients: their group's shared row
    if capped is not None and n_capped:
        row[capped] = np.arange(n_capped)
    key = np.repeat(row * w, seg.lengths)
    key += counts.cells
    table = np.bincount(key, minlength=(n_capped + acc.shape[0]) * w).reshape(-1, w)
    if capped is not None and n_capped:
        assert counts.factor is not None
        most = seg.lengths[capped]
        units = _capped_units_reused(grid, table[:n_capped], counts.factor[capped], most)
        mine = here[capped]
        for g in present:
            acc[g] += units.sum(axis=0) if len(present) == 1 else units[mine == g].sum(axis=0)
    acc[present] += table[n_capped:][present] * int(inverse)
    return True


def _add_block(
    name: str,
    job: BlockJob,
    views: Arrays,
    part: Segments,
    here: IntArray,
    present: list[int],
    sums: dict[str, IntArray],
    partial: list[FloatArray],
    k: int,
) -> tuple[int, ...]:
    """Add one block's contribution ``name`` to its per-group sums; return its row shape."""
    one = len(present) == 1
    try:
        if job.tally is not None and job.grid is not None:
            counts = job.tally(views, part)
            acc = sums.setdefault(name, np.zeros((k, counts.n_cells), dtype=np.int64))
            if _add_tally(acc, counts, job.grid, here, present):
                return (counts.n_cells,)
        rows = np.asarray(job.compute(views, part), dtype=np.float64)
    except InvalidInput:
        job.whole()
        raise
    flat = rows.reshape(rows.shape[0], -1)
    if job.grid is not None:
        acc = sums.setdefault(name, np.zeros((k, flat.shape[1]), dtype=np.int64))
        _add_units(acc, flat, job.grid, here, present if one else None)
    else:
        block = np.zeros((k, flat.shape[1]))
        for g in present:
            chosen = flat if one else flat[here == g]
            block[g] = np.ascontiguousarray(chosen.T).sum(axis=1)
        partial.append(block)
    return tuple(rows.shape[1:])


_MAX_GROUPS = 2**31 - 1  # a group count (regions): labels stay far inside int64


def _group_index(groups: npt.ArrayLike | None, n_clients: int, n_groups: int | None) -> IntArray:
    """Validated group label of every client (all 0 without ``groups``), read by type: a
    masked label would be its hidden value, a timedelta no integer (review 39)."""
    if n_groups is not None and (isinstance(n_groups, bool) or not isinstance(
            n_groups, int | np.integer) or not 1 <= n_groups <= _MAX_GROUPS):  # fmt: skip
        raise InvalidInput(f"n_groups must be an integer in [1, 2**31 - 1], got {shown(n_groups)}")
    if groups is None:
        if n_groups not in (None, 1):
            raise InvalidInput(f"n_groups={n_groups!r} needs groups= (one label per client)")
        return np.zeros(n_clients, dtype=np.int64)
    g = read_plain(groups, "groups must be one array of integer labels, one per client")
    if g.dtype.kind not in "iu" or g.ndim != 1:
        raise InvalidInput(f"groups must be a 1-D array of integer labels, got {g.dtype} {g.shape}")
    if g.shape[0] != n_clients:
        raise InvalidInput(f"groups needs one label per client: {g.shape[0]} for {n_clients}")
    if g.size and int(g.min()) < 0:
        raise InvalidInput(f"group labels must be ≥ 0, got {int(g.min())}")
    if g.size and int(g.max()) >= _MAX_GROUPS:
        raise InvalidInput(f"group labels must be below 2**31 - 1, got {int(g.max())}")
    if n_groups is not None and g.size and int(g.max()) >= n_groups:
        raise InvalidInput(f"group label {int(g.max())} is outside [0, n_groups={n_groups})")
    return g.astype(np.int64, copy=False)


def _check_cohorts(labels: IntArray, n_groups: int, grids: Sequence[FixedPoint | None]) -> None:
    """Refuse a group larger than a grid's exact range, as :func:`exact_sum` does: a
    decision on the number of rows, private under ``add_remove`` (compare the planned
    cohort with ``max_clients`` before the round there, so this never decides)."""
    sizes = np.bincount(labels, minlength=n_groups)
    for grid in grids:
        if grid is not None and sizes.size and int(sizes.max()) > grid.max_clients:
            raise InvalidInput(
                f"a group of {int(sizes.max()):,} clients exceeds the grid's exact range "
                f"({grid.max_clients:,}); use fewer bits"
            )


def sums_in_blocks(
    computes: Mapping[str, BlockJob | tuple[Compute, FixedPoint | None, Callable[[], object]]],
    arrays: Arrays,
    seg: Segments,
    *,
    groups: npt.ArrayLike | None = None,
    n_groups: int | None = None,
    workers: int = DEFAULT_WORKERS,
) -> dict[str, FloatArray]:
    """Per-group sums of several contributions over one fleet, in one pass of blocks.

    ``computes`` maps a name to a :class:`BlockJob` (or its first three fields): with a
    ``grid`` each group's rows are summed EXACTLY (each row encoded, integers added,
    decoded once: :func:`~dpledger.metrics.secure_sum.exact_sum` per group, bit for bit);
    with None as a float sum (pairwise within a block, then block after block; NOT exact,
    so not for a release). Every contribution sees the same blocks and the same block
    segments, so a block's samples are read from memory once for all of them and its
    client index is built once. Shape of each result: (groups, *row), or the row's shape
    without ``groups``.

    ``workers`` (an int ≥ 1; default :data:`DEFAULT_WORKERS`, the usable CPUs up to 4)
    threads compute blocks at once (numpy releases the GIL in its kernels); the result is
    bit for bit the same for any number: integer grid units are added exactly (their sum
    does not depend on the order), float partials are combined in block order, and an
    error is the one the first failing block raises, as with one worker.
    """
    threads = check_workers(workers)
    seg = checked_segments(seg)
    jobs = {name: BlockJob(*spec) for name, spec in computes.items()}
    labels = _group_index(groups, seg.n_clients, n_groups)
    k = n_groups if n_groups is not None else (int(labels.max()) + 1 if labels.size else 1)
    _check_cohorts(labels, k, [job.grid for job in jobs.values()])
    ranges = block_ranges(seg)

    def step(acc: dict[str, IntArray], i: int) -> tuple[dict[str, Any], dict[str, Any]]:
        c0, c1 = ranges[i]
        views, part = _slices(arrays, seg, c0, c1)
        here = labels[c0:c1]
        one = bool(here[0] == here[-1]) and bool(np.all(here == here[0]))
        present = [int(here[0])] if one else [int(x) for x in np.unique(here)]
        shapes, floats = {}, {}
        for name, job in jobs.items():
            partial: list[FloatArray] = []
            shapes[name] = _add_block(name, job, views, part, here, present, acc, partial, k)
            if partial:
                floats[name] = partial[0]
        return shapes, floats

    results, states = run_ordered(len(ranges), dict, step, threads)
    sums: dict[str, IntArray] = {}
    for state in states:  # int64 units: exact, so any order of the workers gives the same
        for name, acc in state.items():
            sums[name] = acc if name not in sums else sums[name] + acc
    out: dict[str, FloatArray] = {}
    for name, job in jobs.items():
        shape = next((r[0][name] for r in reversed(results)), None)
        if shape is None:  # no clients: the shape comes from an unblocked call
            shape = np.asarray(job.whole()).shape[1:]
        width = int(np.prod(shape, dtype=np.int64))
        if job.grid is not None:
            total = job.grid.decode(sums.get(name, np.zeros((k, width), dtype=np.int64)))
        else:
            partial = [r[1][name] for r in results]  # in block order
            stack = np.stack(partial) if partial else np.zeros((1, k, width))
            total = np.ascontiguousarray(np.moveaxis(stack, 0, -1)).sum(axis=-1)
        total = total.reshape(k, *shape)
        out[name] = total if groups is not None else total[0]
    return out


def group_sums(
    contribution: Callable[..., npt.ArrayLike],
    *arrays: npt.ArrayLike,
    offsets: npt.ArrayLike | Segments,
    groups: npt.ArrayLike | None = None,
    n_groups: int | None = None,
    grid: FixedPoint | None,
    workers: int = DEFAULT_WORKERS,
    **settings: Any,
) -> FloatArray:
    """Per-group sums of a batch contribution's per-client rows, never holding all rows.

    ``contribution(*arrays, offsets=..., **settings)`` is any batch function of
    :mod:`dpledger.metrics` (e.g. ``flam.confusion_matrix`` with ``n_classes=10, cap=40``);
    ``groups`` gives each client's group (e.g. its region index, ``0 … n_groups−1``).
    With a ``grid`` the sums are EXACT, equal bit for bit to
    ``exact_sum(rows[groups == g], grid)`` — what a release needs; ``grid=None`` gives
    float sums for an evaluation without noise (not exact: never release them).
    ``workers``: threads, as in :func:`sums_in_blocks` (bit-identical results).
    """
    arrs = [read_plain(a, f"per-sample array {i} must be one array") for i, a in enumerate(arrays)]
    if not arrs or any(a.ndim == 0 for a in arrs):
        raise InvalidInput(f"group_sums needs per-sample arrays, got {[a.shape for a in arrs]}")
    n = int(arrs[0].shape[0])
    seg = segments_for(offsets, n)

    def compute(views: Arrays, part: Segments) -> npt.NDArray[Any]:
        return np.asarray(contribution(*views, offsets=part, **settings))

    def whole() -> object:
        return contribution(*arrs, offsets=seg, **settings)

    spec = {"sum": BlockJob(compute, grid, whole)}
    sums = sums_in_blocks(spec, arrs, seg, groups=groups, n_groups=n_groups, workers=workers)
    return sums["sum"]

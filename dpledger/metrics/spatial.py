"""The spatial metric set: bounded per-client contributions and server-side recombination.

Each contribution function takes ONE client's per-sample arrays and returns that
client's bounded contribution; with ``offsets=`` (start index of each client in the
flat arrays, ascending, first 0; empty clients allowed) it returns one row per
client, computed with vectorised segment reductions. Units: along/across-track
errors and magnitudes in metres; losses in the model's loss units.

Two along/across-track measures answer different questions:

* :func:`along_across_ratio` — "how anisotropic is the typical client?": each client
  reports its own across-RMSE / along-RMSE clipped to [0, clip]; the ledger releases
  the mean of those per-client ratios (``scalar_mean``).
* :func:`pooled_along_across_ratio` — "how anisotropic is the fleet's error, every
  sample counted equally?": each client reports ``(Σacross², Σalong², n)``; the
  server takes ``sqrt(ΣΣacross² / ΣΣalong²)`` with
  :func:`pooled_along_across_ratio_from_sums` (a ratio of pooled sums, FLAM style).
"""

from __future__ import annotations

import math
import sys
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.metrics._blockwise import blockwise
from dpledger.metrics._distinct import distinct_cells
from dpledger.metrics._intervals import Interval
from dpledger.metrics._magnitude import error_magnitude, magnitude_buckets
from dpledger.metrics._reading import FloatArray, check_positive, real_limit
from dpledger.metrics._scratch import empty
from dpledger.metrics._segments import (
    CellCounts,
    ClientOffsets,
    Segments,
    as_finite,
    as_float,
    bucket_of,
    cap_factor,
    check_same_length,
    check_unit_interval,
    edges_array,
    segments_for,
)
from dpledger.metrics.codec import VectorSumCodec
from dpledger.types import MAX_DIMENSION, MechanismKind

__all__ = [
    "ALONG_RMSE_FLOOR",
    "POOLED_MEASURES",
    "along_across_ratio",
    "calibration_gap",
    "clipped_loss",
    "coverage",
    "coverage_cells",
    "distinct_cells",
    "error_histogram",
    "error_histogram_cells",
    "error_magnitude",
    "error_magnitude_cells",
    "mean_calibration_gaps",
    "pooled_along_across_ratio",
    "pooled_along_across_ratio_from_sums",
    "pooled_ratio_codec",
    "pooled_ratio_interval",
]

ALONG_RMSE_FLOOR = 1e-9
"""Along-track RMSE (metres) at or below which a client's ratio pins at the clip."""

_SQUARE_SAFE = 1e100  # |x| ≤ this: x² ≤ 1e200, so any realistic sum of squares stays finite

POOLED_MEASURES = ("sum_across_sq", "sum_along_sq", "n")
"""Column order of :func:`pooled_along_across_ratio` rows (m², m², samples)."""


def _one_or_many(rows: FloatArray, offsets: ClientOffsets | None) -> FloatArray:
    return rows[0] if offsets is None else rows


@overload
def clipped_loss(loss: npt.ArrayLike, *, clip_high: float, offsets: None = None) -> float: ...
@overload
def clipped_loss(
    loss: npt.ArrayLike, *, clip_high: float, offsets: ClientOffsets
) -> FloatArray: ...
@blockwise
def clipped_loss(
    loss: npt.ArrayLike, *, clip_high: float, offsets: ClientOffsets | None = None
) -> float | FloatArray:
    """Per-client mean loss, clipped to ``[0, clip_high]`` (released as ``scalar_mean``).

    The client's mean is clipped, not each sample: ``clip_high`` is calibrated as a
    percentile of per-client mean loss on a held-out fleet. A client with no samples
    contributes 0.0 (it reported, with nothing to report). A client whose sum
    overflows (|loss| near the float limit) is re-summed as ``Σ loss/(2n)`` then
    doubled, so huge finite losses clip instead of becoming NaN.
    """
    high = check_positive(clip_high, "clip_high")
    x = as_float(loss, "loss")
    seg = segments_for(offsets, x.shape[0])
    count = np.maximum(seg.lengths, 1)
    with np.errstate(over="ignore", invalid="ignore"):
        mean = seg.sum(x) / count
        overflowed = ~np.isfinite(mean)
        if overflowed.any():  # decided per client, so batch rows equal per-client results
            as_finite(loss, "loss")  # NaN or inf in the data is refused; huge finite sums go on
            halves = 2.0 * seg.sum(x * seg.per_sample(0.5 / count))
            mean[overflowed] = halves[overflowed]
    out = np.clip(mean, 0.0, high)
    return float(out[0]) if offsets is None else out


@overload
def along_across_ratio(
    along: npt.ArrayLike, across: npt.ArrayLike, *, clip: float = 10.0, offsets: None = None
) -> float: ...
@overload
def along_across_ratio(
    along: npt.ArrayLike, across: npt.ArrayLike, *, clip: float = 10.0, offsets: ClientOffsets
) -> FloatArray: ...
@blockwise
def along_across_ratio(
    along: npt.ArrayLike,
    across: npt.ArrayLike,
    *,
    clip: float = 10.0,
    offsets: ClientOffsets | None = None,
) -> float | FloatArray:
    """Per-client across-RMSE / along-RMSE, clipped to ``[0, clip]`` (``scalar_mean``).

    Answers "how anisotropic is each client's error?"; the release is the mean of
    these per-client ratios. ≈ 1 is isotropic; large means sideways drift. An
    along-track RMSE ≤ :data:`ALONG_RMSE_FLOOR` (1e-9 m) pins the ratio at ``clip``
    (even if across is also 0); a client with no samples contributes min(1, clip). Errors are
    signed, in metres. A client with an error beyond 1e100 m has its errors first
    divided by a power of two near their largest magnitude (exact; the ratio is
    scale-free), so huge values neither overflow nor become NaN.
    """
    high = check_positive(clip, "clip")
    a, b = as_float(along, "along"), as_float(across, "across")
    if a.shape != b.shape:
        a, b = as_finite(along, "along"), as_finite(across, "across")
        check_same_length(along=a, across=b)
    seg = segments_for(offsets, a.shape[0])
    with np.errstate(over="ignore", invalid="ignore"):
        square = np.multiply(a, a, out=empty("ratio.square", a.shape[0], np.float64))
        sum_a = seg.sum(square)
        np.multiply(b, b, out=square)
        sum_b = seg.sum(square)
    # Every sum ≤ 1e200 proves every |error| ≤ 1e100 and none NaN or inf: the plain path.
    if not (_at_most(sum_a, _SQUARE_SAFE**2) and _at_most(sum_b, _SQUARE_SAFE**2)):
        sum_a, sum_b, per_client = _ratio_sums_extreme(along, across, seg)
    else:  # squares cannot overflow; tiny along errors pin at the clip whatever their rounding
        per_client = np.ones(seg.n_clients)
    count = np.maximum(seg.lengths, 1).astype(np.float64)
    with np.errstate(over="ignore"):  # an inf product is correctly "not below the floor"
        along_zero = (sum_a == 0) | (np.sqrt(sum_a / count) * per_client <= ALONG_RMSE_FLOOR)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # inf clips to clip
        ratio = np.sqrt(sum_b / np.where(along_zero, 1.0, sum_a))
    out = np.where(along_zero, high, np.clip(ratio, 0.0, high))
    out = np.where(seg.lengths == 0, min(1.0, high), out)  # "isotropic", within the clip
    return float(out[0]) if offsets is None else out


def _at_most(values: FloatArray, bound: float) -> bool:
    """Every value ≤ ``bound`` (False for NaN); True for none."""
    return values.size == 0 or bool(values.max() <= bound)


def _ratio_sums_extreme(
    along: npt.ArrayLike, across: npt.ArrayLike, seg: Segments
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Σalong², Σacross² and the scale per client when some error is NaN, inf or > 1e100.

    NaN and inf are refused here, naming the first; otherwise each client with an error
    beyond 1e100 m has its errors divided by a power of two near their largest
    magnitude first (exact), so huge values neither overflow nor become NaN.
    """
    a, b = as_finite(along, "along"), as_finite(across, "across")
    n = a.shape[0]
    peak = max(float(a.max()), -float(a.min()), float(b.max()), -float(b.min())) if n else 0.0
    if peak > _SQUARE_SAFE:
        # a power of two (exact), only for a client past 1e100: rows are own-data (review 42)
        scale = seg.max(np.maximum(np.abs(a), np.abs(b)))
        per_client = np.where(scale > _SQUARE_SAFE, np.ldexp(1.0, np.frexp(scale)[1] - 1), 1.0)
        per = seg.per_sample(per_client)
        a, b = a / per, b / per
    else:
        per_client = np.ones(seg.n_clients)
    return seg.sum(a * a), seg.sum(b * b), per_client


@blockwise
def pooled_along_across_ratio(
    along: npt.ArrayLike,
    across: npt.ArrayLike,
    *,
    error_bound: float,
    max_samples: float | None = None,
    offsets: ClientOffsets | None = None,
) -> FloatArray:
    """Per-client pooled measures ``(Σacross², Σalong², n)`` for a ratio of fleet sums.

    Answers "how anisotropic is the fleet's error, each sample counted once?" (the
    server computes :func:`pooled_along_across_ratio_from_sums`). Bounds: each error
    is clipped to ``[−error_bound, error_bound]`` metres; with ``max_samples`` = m,
    each sample of a client holding n_i samples weighs ``min(1, m/n_i)``, so per
    client Σacross² ≤ m·E², Σalong² ≤ m·E² and n ≤ m. Without ``max_samples`` the
    contribution grows with the sample count and is not releasable. Release through
    ``vector_sum`` with :func:`pooled_ratio_codec`. Shape (3,) or (clients, 3).
    """
    bound = check_positive(error_bound, "error_bound")
    if not np.isfinite(bound * bound):
        raise InvalidInput(f"error_bound² must be finite, got error_bound={shown(error_bound)}")
    a = np.clip(as_finite(along, "along"), -bound, bound)
    b = np.clip(as_finite(across, "across"), -bound, bound)
    n = check_same_length(along=a, across=b)
    seg = segments_for(offsets, n)
    weight = _sample_weights(seg, max_samples)
    w = seg.per_sample(weight)
    rows = np.stack(
        [seg.sum(w * b * b), seg.sum(w * a * a), seg.lengths * weight],
        axis=1,
    )
    return _one_or_many(rows, offsets)


def _sample_weights(seg: Segments, max_samples: float | None) -> FloatArray:
    """Per-client sample weight ``min(1, m / n_i)`` (1 without a sample cap)."""
    if max_samples is None:
        return np.ones(seg.n_clients)
    m = check_positive(max_samples, "max_samples")
    return np.minimum(1.0, m / np.maximum(seg.lengths, 1))


def pooled_ratio_codec(
    *,
    error_bound: float,
    max_samples: float,
    cap: float,
    weights: tuple[float, float, float] | None = None,
) -> VectorSumCodec:
    """Codec putting pooled measures into one ``vector_sum`` release with L1 cap ``cap``.

    Per-client bounds are (m·E², m·E², m); ``weights`` share the cap between the three
    coordinates (equal by default; the ratio itself needs only the first two).
    """
    e = check_positive(error_bound, "error_bound")
    m = check_positive(max_samples, "max_samples")
    return VectorSumCodec.build(
        POOLED_MEASURES, (m * e * e, m * e * e, m), cap=cap, weights=weights
    )


def pooled_along_across_ratio_from_sums(sums: npt.ArrayLike, *, clip: float | None = None) -> float:
    """Server side: ``sqrt(ΣΣacross² / ΣΣalong²)`` from summed (decoded) pooled measures.

    A ratio of pooled sums, not a mean of per-client ratios. Noisy negative sums are
    clamped to 0 first (post-processing). Σalong² = 0 gives ``inf`` (``clip`` if
    given) when Σacross² > 0, and NaN when both are 0.
    """
    s = as_finite(sums, "sums")
    if s.shape != (len(POOLED_MEASURES),):
        raise InvalidInput(f"sums must have shape (3,) {POOLED_MEASURES}, got {s.shape}")
    across, along = max(0.0, float(s[0])), max(0.0, float(s[1]))
    if along == 0.0:
        ratio = float("nan") if across == 0.0 else float("inf")
    else:
        ratio = float(np.sqrt(across / along))
    if clip is not None and not np.isnan(ratio):
        ratio = min(ratio, check_positive(clip, "clip"))
    return ratio


def pooled_ratio_interval(
    released: npt.ArrayLike,
    codec: VectorSumCodec,
    scale: float | npt.ArrayLike,
    *,
    clip: float,
    max_along: float = float("inf"),
    level: float = 0.95,
    distribution: MechanismKind = "laplace",
) -> Interval:
    """Interval of the pooled ratio √(ΣΣacross² / ΣΣalong²) from one noisy release.

    ``released`` is the noisy ``vector_sum`` of :func:`pooled_ratio_codec`-encoded
    measures, ``scale`` its public noise scale, ``clip`` the ratio's public upper bound
    (as :func:`pooled_along_across_ratio_from_sums`' ``clip``), ``max_along`` a public
    upper bound on ΣΣalong² (per-client bound × cohort). The square root of the interval
    of A/B — a ratio of two coordinates: Fieller's, conditional on B's guard
    (:func:`~dpledger.metrics.uncertainty.ratio_interval`) — on [0, clip²]; unusable
    (interval [0, clip]) when ΣΣalong² is not clearly positive (its coverage, and why not
    the delta method: docs/intervals.md, "pooled along/across ratio"). It covers the noise
    of ``scale`` only: for a release whose slack (OpenDP's grid, rounding, an encoding) is
    not negligible, pass ``rel.interval_scale()[0]`` (:func:`~dpledger.metrics.interval_scales`).
    """
    from dpledger.metrics.uncertainty import ratio_interval  # imports this package

    top = check_positive(clip, "clip")
    low, high = math.sqrt(sys.float_info.min), math.sqrt(sys.float_info.max)
    if not low <= top <= high:  # A/B's range [0, clip²] in normal doubles (review 39)
        raise InvalidInput(f"clip must be in [{low:.2g}, {high:.2g}] (clip² bounds A/B): {top!r}")
    if not isinstance(codec, VectorSumCodec) or codec.dimension != len(POOLED_MEASURES):
        raise InvalidInput(f"the codec must be pooled_ratio_codec's ({POOLED_MEASURES})")
    per = codec.decode(np.ones(codec.dimension))  # decode is z / factors: linear
    num, den = np.zeros(codec.dimension), np.zeros(codec.dimension)
    num[0], den[1] = per[0], per[1]
    iv = ratio_interval(
        released, scale, num, den, bounds=(0.0, top * top), level=level,
        distribution=distribution, denominator_name="pooled ΣΣalong²",
        denominator_max=max_along,
    )  # fmt: skip
    method = f"square root of the interval of ΣΣacross² / ΣΣalong² ({iv.method})"
    return Interval(math.sqrt(iv.low), math.sqrt(iv.high), level, method, iv.reason)


@blockwise
def error_histogram(
    errors: npt.ArrayLike,
    *,
    edges: npt.ArrayLike,
    cap: float,
    offsets: ClientOffsets | None = None,
) -> FloatArray:
    """Per-client counts over fixed ``edges``, L1-capped at ``cap`` (``histogram`` kind).

    ``errors`` are error magnitudes in metres (e.g. :func:`error_magnitude`). A value
    v falls in bucket = number of edges e with e < v, so there are len(edges) + 1
    buckets. A client with more than ``cap`` samples has its counts scaled by
    ``cap / n`` (mass exactly ``cap``); fewer samples keep raw counts.
    """
    counts = error_histogram_cells(errors, edges=edges, cap=cap, offsets=offsets)
    rows = counts.seg.counts(counts.cells, counts.n_cells, counts.factor)
    return _one_or_many(rows, offsets)


def error_histogram_cells(
    errors: npt.ArrayLike,
    *,
    edges: npt.ArrayLike,
    cap: float,
    offsets: ClientOffsets | None = None,
) -> CellCounts:
    """:func:`error_histogram` before its rows: each sample's bucket and each client's cap
    factor (the same checks; ``CellCounts.rows()`` gives the same rows bit for bit), for
    per-region sums that need no uncapped client's row."""
    c = check_positive(cap, "cap")
    e = edges_array(edges)
    x = as_finite(errors, "errors")
    return _capped_cells(bucket_of(x, e), e.shape[0] + 1, c, offsets)


def _capped_cells(
    buckets: npt.NDArray[np.integer[Any]], n_cells: int, cap: float, offsets: ClientOffsets | None
) -> CellCounts:
    seg = segments_for(offsets, buckets.shape[0])
    factor = cap_factor(seg.lengths.astype(np.float64), cap)  # a row's L1 norm is its count
    return CellCounts(seg, buckets, n_cells, factor)


def error_magnitude_cells(
    along: npt.ArrayLike,
    across: npt.ArrayLike,
    *,
    edges: npt.ArrayLike,
    cap: float,
    offsets: ClientOffsets | None = None,
) -> CellCounts:
    """``error_histogram_cells(error_magnitude(along, across), ...)`` bit for bit (cells,
    factors, errors), counting buckets on squared magnitudes (m²) without square roots
    where :func:`~dpledger.metrics._magnitude.magnitude_buckets` allows it."""
    buckets = magnitude_buckets(along, across, edges)
    if buckets is None:
        errors = error_magnitude(along, across)
        return error_histogram_cells(errors, edges=edges, cap=cap, offsets=offsets)
    e_count = np.asarray(edges).shape[0]  # validated by magnitude_buckets
    return _capped_cells(buckets, e_count + 1, check_positive(cap, "cap"), offsets)


@blockwise
def calibration_gap(
    prob: npt.ArrayLike,
    outcome: npt.ArrayLike,
    *,
    buckets: int = 5,
    cap: float,
    offsets: ClientOffsets | None = None,
) -> FloatArray:
    """Per-client ``[Σ(p−y) per bucket…, count per bucket…]``, L1-capped (``vector_sum``).

    Confidence bucket of p is ``min(buckets−1, floor(p·buckets))``. p and y are
    checked to lie in [0, 1], so each gap p − y lies in [−1, 1] by construction (the
    subtraction of two numbers in [0, 1] cannot round outside it). The whole vector
    (length 2·buckets, signed) is scaled by one factor to L1 ≤ ``cap``, so each
    bucket's mean gap Σgap/count is unchanged.
    """
    if (
        isinstance(buckets, bool)
        or not isinstance(buckets, int | np.integer)
        or not 1 <= buckets <= MAX_DIMENSION // 2
    ):
        raise InvalidInput(
            f"buckets must be an integer in [1, {MAX_DIMENSION // 2:,}], got {shown(buckets)}: "
            f"the 2·buckets values are one vector_sum release of at most {MAX_DIMENSION:,}"
        )
    c = check_positive(cap, "cap")
    p, y = as_float(prob, "prob"), as_float(outcome, "outcome")
    if not _within_unit_interval(p, y):  # NaN fails too: the full checks name the problem
        p, y = as_finite(prob, "prob"), as_finite(outcome, "outcome")
        check_same_length(prob=p, outcome=y)
        check_unit_interval(p, "prob")
        check_unit_interval(y, "outcome")
    seg = segments_for(offsets, p.shape[0])
    k = int(buckets)
    narrow: type[np.integer[Any]] = np.int8 if k <= 127 else np.int64
    n = p.shape[0]
    scaled = np.multiply(p, k, out=empty("calibration.float", n, np.float64))
    bucket = empty("calibration.bucket", n, narrow)
    np.copyto(bucket, scaled, casting="unsafe")  # astype's cast: truncation = floor, p ≥ 0
    np.minimum(bucket, k - 1, out=bucket)
    flat = seg.tags(k)
    flat += bucket
    size = seg.n_clients * k
    rows = np.empty((seg.n_clients, 2 * k))
    gap = np.subtract(p, y, out=scaled)  # p·k is dead: its buffer takes p − y
    rows[:, :k] = np.bincount(flat, weights=gap, minlength=size).reshape(seg.n_clients, k)
    rows[:, k:] = np.bincount(flat, minlength=size).reshape(seg.n_clients, k)
    # L1 norm: Σ|gap sums| + the sample count (the counts' sum), one factor per client
    norm = np.abs(rows[:, :k]).sum(axis=1)
    norm += seg.lengths
    rows *= cap_factor(norm, c)[:, None]
    return _one_or_many(rows, offsets)


_ONE_BITS = int(np.float64(1.0).view(np.uint64))


def _within_unit_interval(*arrays: FloatArray) -> bool:
    """Equal lengths and every value in [0, 1] (False for NaN): one reduction each, no copies.

    Read as unsigned 64-bit integers, the doubles in [+0, 1] are exactly those ≤ the bits
    of 1.0 (a sign bit, a NaN or a value above 1 is larger); −0.0 fails here and passes
    the full checks.
    """
    n = arrays[0].shape[0]
    return all(
        a.shape[0] == n and (n == 0 or int(a.view(np.uint64).max()) <= _ONE_BITS) for a in arrays
    )


def mean_calibration_gaps(summed: npt.ArrayLike, *, min_count: float = 0.0) -> FloatArray:
    """Server side: per-bucket mean gap Σ(p−y) / count from a summed calibration vector.

    A bucket whose (possibly noisy) count is ≤ ``min_count`` gives NaN: no estimate.
    With noise, raise ``min_count`` to a few noise scales to avoid dividing by noise.
    """
    s = as_finite(summed, "summed")
    limit = real_limit(min_count, "min_count")  # by type: no text, None, NaN
    if s.shape[0] % 2:
        raise InvalidInput(f"a calibration vector has even length 2·buckets, got {s.shape[0]}")
    k = s.shape[0] // 2
    sums, counts = s[:k], s[k:]
    ok = counts > limit
    return np.where(ok, sums / np.where(ok, counts, 1.0), np.nan)


@blockwise
def coverage(
    cells: npt.ArrayLike, *, edges: npt.ArrayLike, offsets: ClientOffsets | None = None
) -> FloatArray:
    """One-hot of the client's distinct-cell count over fixed coverage ``edges`` (L1 = 1).

    The count k falls in bucket = number of edges e < k (as the error histogram);
    a client with no samples has k = 0. Released as a ``histogram`` with cap 1.
    """
    tally = coverage_cells(cells, edges=edges, offsets=offsets)
    n = tally.seg.n_clients
    rows = np.zeros((n, tally.n_cells))
    rows[np.arange(n), tally.cells] = 1.0
    return _one_or_many(rows, offsets)


def coverage_cells(
    cells: npt.ArrayLike, *, edges: npt.ArrayLike, offsets: ClientOffsets | None = None
) -> CellCounts:
    """:func:`coverage` before its rows: one entry per client, in the bucket of its
    distinct-cell count, never scaled (the same checks; ``CellCounts.rows()`` gives the
    same one-hot rows bit for bit), so per-region sums are one count of those buckets."""
    e = edges_array(edges, "edges")
    counts = distinct_cells(cells, offsets=offsets)
    n = counts.shape[0]
    each = Segments(np.arange(n, dtype=np.int64), np.ones(n, dtype=np.int64), n)
    return CellCounts(each, bucket_of(counts, e), e.shape[0] + 1)

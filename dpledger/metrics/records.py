"""Silo-side contributions under a record-level policy: one summed vector per silo.

Under ``privacy_unit = "record"`` a silo (a hospital, a company) holds many people's
records and sends ONE summed measure vector; the ledger's sensitivity is what one
person's records can move that sum. Three steps, all vectorised over every record of
every silo at once (silos are contiguous segments of flat per-record arrays, described by
``offsets`` as for clients elsewhere in :mod:`dpledger.metrics`):

1. **The person bound** (:func:`keep_per_person`): in each silo, each person keeps at
   most ``max_records`` records — the FIRST ones in the order the silo lists them. The
   rule reads only that person's own records' order, never another person's data, so
   adding, removing or changing one person changes only that person's kept records.
   List a person's records by something of their own (admission time, record id); an
   order that depends on other people (e.g. "most recent in the ward") would break that.
   A person present in several silos is bounded in each silo separately: declare the
   policy's ``max_records_per_person`` as their total across silos
   (docs/privacy-model.md, "Privacy units").
2. **Per-record bounds**: a scalar is clipped to ``[low, high]``; a confusion-matrix or
   histogram record is one count (L1 = 1); a regression record's y and ŷ are clipped to
   the declared ranges, so its five measures fit :func:`record_regression_codec`'s
   bounds and its encoded row has L1 ≤ ``cap``.
3. **An exact sum**: each record's row is put on a public fixed-point grid (rounding
   toward zero, so bounds still hold; integer counts are exact already) and summed in
   integers. :class:`SiloSums` keeps the integer units, so adding silos is exact too:
   the ledger charges at the sensitivity of the exact sum. The grid's own error (one
   way, up to a quantum per record) is :meth:`SiloSums.sum_error`: pass it as the
   release's ``aggregate_error`` so that intervals allow for it.

The number of records a silo summed is returned for the silo's own use. Under
``add_remove`` it is private (one person's presence changes it): a release's cohort is
then the planned record count fixed before the round, never this number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.metrics._reading import FloatArray, check_positive, read_plain, real_pair
from dpledger.metrics._segments import (
    IntArray,
    Segments,
    as_finite,
    bucket_of,
    check_same_length,
    edges_array,
    segments_for,
)
from dpledger.metrics.codec import VectorSumCodec
from dpledger.metrics.flam import confusion_cells, confusion_matrix
from dpledger.metrics.flam_regression import check_range, regression_codec
from dpledger.metrics.secure_sum import FixedPoint
from dpledger.types import MAX_COHORT

__all__ = [
    "SiloSums",
    "keep_per_person",
    "record_confusion",
    "record_histogram",
    "record_regression",
    "record_regression_codec",
    "record_scalar",
    "residual_bound",
]


@dataclass(frozen=True)
class SiloSums:
    """Each silo's exact summed measure vector, as integer grid units, and its record counts.

    ``units`` (silos, d) are multiples of ``quantum`` (1.0 for counts); ``records`` the
    records each silo summed after the person bound, ``dropped`` those the bound left
    out. Both counts are the silo's private knowledge under ``add_remove``: never send
    them as a release's cohort there, and never publish ``dropped``. ``record_error``:
    how far the grid moves one record's row per coordinate (< ``quantum`` for values put
    on a grid, 0 for integer counts); :meth:`sum_error` bounds the total's.
    """

    units: IntArray
    quantum: float
    records: IntArray
    dropped: IntArray
    record_error: float = 0.0

    def sum_error(self, records: int) -> float:
        """A public bound on |total − the exact sum of the kept records' rows| per
        coordinate for at most ``records`` records (the release's cohort, public: the
        planned count under ``add_remove``): 0 for counts, ``records × quantum`` for
        values on a grid (truncation toward zero moves every record the same way, so the
        error grows with the count: at 2·10⁶ records and ε = 100 it cost MSE's interval 6
        points of coverage; review 39). Pass it as ``aggregate_error=`` to
        :func:`dpledger.release_regression` (or ``Release.with_aggregate_error``)."""
        if isinstance(records, bool) or not isinstance(records, int | np.integer):
            raise InvalidInput(f"records must be an integer >= 0, got {shown(records, 40)}")
        if not 0 <= records <= MAX_COHORT:
            raise InvalidInput(f"records must be in 0..{MAX_COHORT:_}, got {shown(records, 40)}")
        return float(records) * self.record_error

    @property
    def sums(self) -> FloatArray:
        """Each silo's summed vector (silos, d), exact as doubles."""
        return self._decode(self.units)

    def total(self, silos: npt.ArrayLike | None = None) -> FloatArray:
        """The exact sum over ``silos`` (distinct indices or a mask; default every silo): (d,).

        Integer units are added before decoding, as a secure aggregator would, so the
        total is the exact sum of every kept record's bounded row.
        """
        rows = np.asarray(self.units if silos is None else self.units[self._chosen(silos)])
        if rows.dtype.kind not in "iu":  # a cast to int64 truncated floats, wrapped uint64
            raise InvalidInput(f"SiloSums units must be integer grid units, got {rows.dtype}")
        # as Python integers: an int64 sum wrapped (four silos of 2**62 units summed to 0)
        return self._decode(rows.astype(object).sum(axis=0))

    def _chosen(self, silos: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """``silos`` as a mask over the silos: each silo once (one listed twice would be
        summed twice, its people's records counted double: past the charged sensitivity)."""
        n = self.units.shape[0]
        if (
            isinstance(silos, list | tuple)
            and silos
            and all(isinstance(x, bool | np.bool_) for x in silos)
        ):  # a mask as a list: read_plain refuses booleans (among numbers), not a mask
            arr = np.array(silos, dtype=bool)
        else:
            arr = read_plain(silos, "silos must be silo indices or a mask over the silos")
        if arr.dtype == np.bool_ and arr.shape == (n,):
            return arr
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise InvalidInput(
                f"silos must be distinct indices in [0, {n}) or a mask of {n} booleans, "
                f"got dtype {arr.dtype}, shape {arr.shape}"
            )
        mask = np.zeros(n, dtype=bool)
        index = arr.astype(np.int64)
        if arr.size and not (int(index.min()) >= 0 and int(arr.max()) < n):
            raise InvalidInput(f"silos must be indices in [0, {n}), got {shown(arr.tolist())}")
        mask[index] = True
        if int(mask.sum()) != arr.size:
            raise InvalidInput(f"silos must list each silo once, got {shown(arr.tolist())}")
        return mask

    def _decode(self, units: IntArray) -> FloatArray:
        if units.size and int(np.abs(units).max()) > 2**53:
            raise InvalidInput("a sum beyond 2**53 grid units is not an exact double")
        return units.astype(np.float64) * self.quantum


def _max_records(max_records: int | None) -> int | None:
    if max_records is None:
        return None
    if isinstance(max_records, bool) or not isinstance(max_records, int | np.integer):
        raise InvalidInput(f"max_records must be an integer ≥ 1, got {shown(max_records)}")
    if max_records < 1:
        raise InvalidInput(f"max_records must be ≥ 1, got {max_records}")
    return int(max_records)


def _person_ids(persons: npt.ArrayLike) -> npt.NDArray[Any]:
    """``persons`` as an array; a list keeps its objects: ``np.asarray`` would turn
    ``["p1", nan]`` into the text ``"nan"``, one pseudo-person for every missing id.
    NumPy's ``StringDType`` text is read as objects too (review 40: it was refused as "not
    integers or strings"), so an ``na_object`` among the ids is refused as missing."""
    if isinstance(persons, np.ma.MaskedArray) and np.ma.getmaskarray(persons).any():
        raise InvalidInput(  # np.asarray would read each masked id as its hidden value
            f"{int(np.ma.getmaskarray(persons).sum()):,} person id(s) are masked (missing): a "
            "masked id would be read as its hidden value, each record perhaps its own person, "
            "escaping the bound; give every record its person's id, or drop the records"
        )
    if isinstance(persons, list | tuple):
        return np.asarray(persons, dtype=object)
    ids = np.asarray(persons)
    if ids.dtype.kind == "T":  # numpy's variable-width text: as objects, its missing ids seen
        return ids.astype(object)
    return ids


def keep_per_person(
    persons: npt.ArrayLike,
    max_records: int,
    *,
    offsets: npt.ArrayLike | None = None,
) -> npt.NDArray[np.bool_]:
    """Which records each silo keeps: every person's first ``max_records``, in listed order.

    ``persons`` holds one person id per record (integers or strings; ids are compared
    within a silo only). Returns a boolean mask over the records. Vectorised: one stable
    sort by (silo, person, position), then each record's rank among its person's records.
    The kept set of a person depends only on the order of that person's own records.
    """
    k = _max_records(max_records)
    if k is None:
        raise InvalidInput("max_records must be an integer ≥ 1, got None")
    ids = _person_ids(persons)
    if ids.ndim != 1:
        raise InvalidInput(f"persons must be 1-dimensional, got shape {ids.shape}")
    if ids.size and ids.dtype.kind not in "iuUSO":  # np.array([]) is float64: no ids
        raise InvalidInput(f"person ids must be integers or strings, got dtype {ids.dtype}")
    if ids.dtype.kind == "O":  # e.g. a text column with missing ids (None, NaN)
        odd = sum(1 for v in ids.tolist() if not _person_id(v))
        if odd:
            raise InvalidInput(
                f"{odd:,} person id(s) are missing (None, or NaN: it equals no id, itself "
                "included, so each record would count as its own person and escape the "
                "bound; audit 6, G5) or booleans: give every record its person's id, or "
                "drop the records that have none"
            )
    n = ids.shape[0]
    seg = segments_for(offsets, n)
    if n == 0:
        return np.zeros(0, dtype=bool)
    try:
        unique, codes = np.unique(ids, return_inverse=True)
        # sorted by "<": ids it does not order totally (frozensets: subsets) could leave one
        # id in two places, its records two people's, escaping the bound (review 39)
        split = ids.dtype.kind == "O" and len(set(unique.tolist())) != unique.shape[0]
    except TypeError as e:  # an object array mixing types, or unhashable ids
        raise InvalidInput(f"person ids must be comparable (all integers or all text): {e}") from e
    if split:
        raise InvalidInput(
            "person ids must be totally ordered (integers, text, UUIDs): these sort so that "
            "one id falls apart into several, and its records would escape the bound"
        )
    codes = codes.reshape(-1)
    position = np.arange(n, dtype=np.int64)
    order = np.lexsort((position, codes, seg.ids))  # silo, then person, then listed order
    silo_s, code_s = seg.ids[order], codes[order]
    new_group = np.ones(n, dtype=bool)
    new_group[1:] = (silo_s[1:] != silo_s[:-1]) | (code_s[1:] != code_s[:-1])
    group_start = np.maximum.accumulate(np.where(new_group, position, 0))
    keep = np.empty(n, dtype=bool)
    keep[order] = (position - group_start) < k
    return keep


def _person_id(v: object) -> bool:
    """An id: any value equal to itself (text, integers, UUIDs…), but not None or a bool."""
    if v is None or isinstance(v, bool | np.bool_):
        return False
    try:
        return bool(v == v)  # NaN (float, numpy or Decimal) equals nothing, itself included
    except (TypeError, ValueError, ArithmeticError):  # Decimal("sNaN") raises InvalidOperation
        return False


def _bounded(
    n: int,
    offsets: npt.ArrayLike | None,
    persons: npt.ArrayLike | None,
    max_records: int | None,
) -> tuple[Segments, npt.NDArray[np.bool_] | None]:
    """The silos' segments and the person bound's mask (None: every record is kept)."""
    seg = segments_for(offsets, n)
    k = _max_records(max_records)
    if persons is None:
        if k is not None:
            raise InvalidInput(
                "max_records needs persons (one person id per record) to bound; without "
                "ids every record is taken to be a different person"
            )
        return seg, None
    if k is None:
        raise InvalidInput("persons given without max_records: pass the policy's bound")
    ids = _person_ids(persons)  # as keep_per_person reads them: a missing id is refused
    if ids.ndim != 1 or ids.shape[0] != n:
        raise InvalidInput(f"persons must hold one id per record ({n}), got shape {ids.shape}")
    return seg, keep_per_person(ids, k, offsets=offsets)


def _silo_units(
    seg: Segments, keep: npt.NDArray[np.bool_] | None, units: npt.NDArray[np.int64]
) -> tuple[IntArray, IntArray, IntArray]:
    """Per-silo integer sums of per-record rows (n, d), kept records only, and the counts."""
    kept = np.ones(seg.n_samples, dtype=bool) if keep is None else keep
    rows = np.where(kept[:, None], units, 0)
    out = np.zeros((seg.n_clients, units.shape[1]), dtype=np.int64)
    nonempty = seg.lengths > 0
    if nonempty.any():
        out[nonempty] = np.add.reduceat(rows, seg.starts[nonempty], axis=0)
    records = np.zeros(seg.n_clients, dtype=np.int64)
    if nonempty.any():
        records[nonempty] = np.add.reduceat(kept.astype(np.int64), seg.starts[nonempty])
    return out, records, seg.lengths - records


def _counts(
    buckets: npt.NDArray[np.integer[Any]],
    n_buckets: int,
    offsets: npt.ArrayLike | None,
    persons: npt.ArrayLike | None,
    max_records: int | None,
) -> SiloSums:
    n = int(buckets.shape[0])
    seg, keep = _bounded(n, offsets, persons, max_records)
    kept = np.ones(n, dtype=bool) if keep is None else keep
    flat = seg.ids[kept] * n_buckets + buckets[kept].astype(np.int64)
    tally = np.bincount(flat, minlength=seg.n_clients * n_buckets).astype(np.int64)
    records = np.bincount(seg.ids[kept], minlength=seg.n_clients).astype(np.int64)
    return SiloSums(tally.reshape(seg.n_clients, n_buckets), 1.0, records, seg.lengths - records)


def record_confusion(
    y_true: npt.ArrayLike,
    y_pred: npt.ArrayLike,
    *,
    n_classes: int,
    offsets: npt.ArrayLike | None = None,
    persons: npt.ArrayLike | None = None,
    max_records: int | None = None,
) -> SiloSums:
    """Each silo's flattened C×C confusion counts (row = true, column = predicted): (silos, C²).

    Each kept record adds exactly one count (L1 = 1: the policy's ``cap_per_record = 1``).
    Counts are integers, so the sums are exact. Release the total with
    :func:`dpledger.release_confusion`.
    """
    what = "{} must be one flat array of integer class labels"
    t, p = (
        read_plain(y_true, what.format("y_true")),
        read_plain(y_pred, what.format("y_pred")),
    )
    if t.ndim != 1 or p.shape != t.shape:
        raise InvalidInput(f"y_true and y_pred must be 1-D of one length, got {t.shape}, {p.shape}")
    seg, keep = _bounded(t.shape[0], offsets, persons, max_records)
    if keep is not None:  # every record's labels, by its own index: a dropped one's too
        confusion_cells(t, p, n_classes=n_classes)  # (review 44 G)
        t, p = t[keep], p[keep]
    records = np.bincount(seg.ids if keep is None else seg.ids[keep], minlength=seg.n_clients)
    starts = np.concatenate([[0], np.cumsum(records)[:-1]]).astype(np.int64)
    counts = confusion_matrix(t, p, n_classes=n_classes, offsets=starts)  # labels checked there
    units = counts.reshape(seg.n_clients, -1).astype(np.int64)  # integer counts: exact
    return SiloSums(units, 1.0, records.astype(np.int64), seg.lengths - records)


def record_histogram(
    values: npt.ArrayLike,
    *,
    edges: npt.ArrayLike,
    offsets: npt.ArrayLike | None = None,
    persons: npt.ArrayLike | None = None,
    max_records: int | None = None,
) -> SiloSums:
    """Each silo's counts of its records' values over fixed edges: (silos, len(edges) + 1).

    Bucket = number of edges strictly below the value; each kept record adds one count.
    """
    v = as_finite(values, "values")
    e = edges_array(edges)
    return _counts(bucket_of(v, e), e.shape[0] + 1, offsets, persons, max_records)


def record_scalar(
    values: npt.ArrayLike,
    *,
    low: float,
    high: float,
    offsets: npt.ArrayLike | None = None,
    persons: npt.ArrayLike | None = None,
    max_records: int | None = None,
) -> SiloSums:
    """Each silo's exact sum of its records' values clipped to ``[low, high]``: (silos, 1).

    The policy's per-record clip; the published mean divides the released sum by a
    public record count (the planned one under ``add_remove``). The grid's error on the
    sum is :meth:`SiloSums.sum_error` (add it with ``Release.with_aggregate_error``).
    """
    v = as_finite(values, "values")
    lo, hi = real_pair((low, high), "low, high")  # by type: no text, None (audit s29, F5)
    seg, keep = _bounded(v.shape[0], offsets, persons, max_records)
    grid = FixedPoint(lo, hi)
    units = grid.encode(np.clip(v, lo, hi)).reshape(-1, 1)
    _check_rows(v.shape[0], grid)
    sums, records, dropped = _silo_units(seg, keep, units)
    return SiloSums(sums, grid.quantum, records, dropped, grid.max_error)


def _check_rows(n: int, grid: FixedPoint) -> None:
    """Refuse more records than the grid sums exactly: a decision on a private count under
    ``add_remove`` (plan the cohort within ``max_clients`` before the round instead)."""
    if n > grid.max_clients:
        raise InvalidInput(
            f"{n:,} records exceed the grid's exact range ({grid.max_clients:,}); sum fewer"
        )


def residual_bound(y_clip: tuple[float, float], y_pred_clip: tuple[float, float]) -> float:
    """|y − ŷ| for y and ŷ clipped to these ranges: ``max(y_hi − ŷ_lo, ŷ_hi − y_lo)``, rounded up.

    Rounded up one ulp, so the float residual of any clipped pair (itself rounded to
    nearest, hence monotone) never exceeds it.
    """
    (y_lo, y_hi), (p_lo, p_hi) = (
        check_range(y_clip, "y_clip"),
        check_range(y_pred_clip, "y_pred_clip"),
    )
    return math.nextafter(max(y_hi - p_lo, p_hi - y_lo), math.inf)


def record_regression_codec(
    *,
    y_clip: tuple[float, float],
    y_pred_clip: tuple[float, float],
    cap: float,
    weights: tuple[float, float, float, float, float] | None = None,
) -> VectorSumCodec:
    """The codec of one record's regression measures under the declared y and ŷ clips.

    :func:`~dpledger.metrics.flam_regression.regression_codec` with one sample per record
    (``max_samples = 1``), the residual bound of :func:`residual_bound`, the midpoint of
    ``y_clip`` as the shift: a record's encoded row has L1 ≤ ``cap`` (the policy's
    ``cap_per_record``) whatever the ``weights`` (equal by default), so they are a free
    choice of where the noise goes, not a privacy setting — e.g. more weight on
    Σ(y−ŷ)², whose per-record bound (y−ŷ)² is the loosest, narrows R²'s interval. The
    server decodes with the same codec (:meth:`MetricSpec.record_regression_codec
    <dpledger.policy.MetricSpec.record_regression_codec>` builds it from a policy).
    """
    return regression_codec(
        y_bounds=check_range(y_clip, "y_clip"),
        residual_bound=residual_bound(y_clip, y_pred_clip),
        max_samples=1,
        cap=check_positive(cap, "cap"),
        weights=weights,
    )


def record_regression(
    y_true: npt.ArrayLike,
    y_pred: npt.ArrayLike,
    *,
    y_clip: tuple[float, float],
    y_pred_clip: tuple[float, float],
    cap: float,
    weights: tuple[float, float, float, float, float] | None = None,
    offsets: npt.ArrayLike | None = None,
    persons: npt.ArrayLike | None = None,
    max_records: int | None = None,
) -> SiloSums:
    """Each silo's exact sum of its records' encoded regression measures: (silos, 5).

    Per record: y clipped to ``y_clip`` and ŷ to ``y_pred_clip``, then ``[(y−ŷ)², |y−ŷ|,
    y−c, (y−c)², 1]`` encoded by :func:`record_regression_codec` (L1 ≤ ``cap``) and put
    on the grid of ``FixedPoint.for_cap(cap)`` (toward zero: the cap still holds). Release
    the total with :func:`dpledger.release_regression` and that codec, with
    ``aggregate_error=sums.sum_error(cohort)``.
    """
    y = as_finite(y_true, "y_true")
    yh = as_finite(y_pred, "y_pred")
    n = check_same_length(y_true=y, y_pred=yh)
    codec = record_regression_codec(
        y_clip=y_clip, y_pred_clip=y_pred_clip, cap=cap, weights=weights
    )
    seg, keep = _bounded(n, offsets, persons, max_records)
    lo, hi = check_range(y_clip, "y_clip")
    y = np.clip(y, lo, hi)
    yh = np.clip(yh, *check_range(y_pred_clip, "y_pred_clip"))
    r = y - yh
    d = y - 0.5 * (lo + hi)  # the codec's shift: the midpoint of y_clip
    measures = np.stack([r * r, np.abs(r), d, d * d, np.ones(n)], axis=1)
    grid = FixedPoint.for_cap(codec.cap)
    _check_rows(n, grid)
    units = grid.encode(codec.encode(measures)) if n else np.zeros((0, 5), dtype=np.int64)
    sums, records, dropped = _silo_units(seg, keep, units)
    return SiloSums(sums, grid.quantum, records, dropped, grid.max_error)

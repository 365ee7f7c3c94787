"""Metric declarations: which client function computes a metric, from which data, bounded how.

A :class:`MetricDeclaration` ties a releasable metric to its contribution function, the
per-sample arrays it reads, the policy kind that releases it and the norm its bound is
in. :meth:`MetricDeclaration.contribute` computes every client's bounded contribution
from plain numbers — the :class:`Bounds` a policy states (a scalar's clip, a vector's
L1 cap, its bucket edges or dimension) — so a client, a simulator or a test can run the
same code a device runs. Sensitivity is not computed here: the ledger derives it from
the policy (``dpledger.mechanisms``), and the sensitivity property tests check these
contributions against that rule.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.metrics import blocks, flam, flam_regression, spatial
from dpledger.metrics._pool import check_workers
from dpledger.metrics._reading import check_positive, finite_real, read_plain
from dpledger.metrics._segments import (
    CellCounts,
    ClientOffsets,
    FloatArray,
    Segments,
    edges_array,
    segments_for,
)
from dpledger.metrics.secure_sum import FixedPoint
from dpledger.types import MetricKind

__all__ = [
    "DECLARATIONS",
    "FLAM_DECLARATIONS",
    "SPATIAL_DECLARATIONS",
    "Bounds",
    "Contribution",
    "MetricDeclaration",
    "Norm",
    "sum_contributions",
]

Norm = Literal["absolute", "l1"]
"""The norm a contribution is bounded in: absolute (a scalar) or L1 (a vector)."""


@dataclass(frozen=True)
class Bounds:
    """A metric's per-client bounds as a policy states them, in plain numbers.

    ``low``/``high``: a scalar's clip; ``cap``: a vector's L1 bound per client;
    ``edges``: fixed bucket edges; ``dimension``: a vector's length.
    """

    low: float | None = None
    high: float | None = None
    cap: float | None = None
    edges: tuple[float, ...] | None = None
    dimension: int | None = None

    def __post_init__(self) -> None:
        """Each bound read by type, as the metric functions read them (review 39: text,
        lists and objects reached ``float()``'s TypeError, ``"2"`` was read as 2.0)."""
        low, high = (None if v is None else finite_real(v, f"bound {n}")
                     for n, v in (("low", self.low), ("high", self.high)))  # fmt: skip
        if low is not None and high is not None and not low < high:
            raise InvalidInput(f"bounds need low < high, got [{low!r}, {high!r}]")
        if self.cap is not None:
            check_positive(self.cap, "bound cap")
        if self.edges is not None:
            edges_array(self.edges, "bound edges")
            # kept as a tuple: a list given here, changed after, changed the bounds (review 42)
            object.__setattr__(self, "edges", tuple(np.asarray(self.edges).tolist()))
        d = self.dimension
        if d is not None and (isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1):
            raise InvalidInput(f"bound dimension must be an integer ≥ 1, got {shown(d)}")

    def need(self, name: str, metric: str) -> Any:
        """The bound ``name``, or :class:`InvalidInput` naming the metric that needs it."""
        value = getattr(self, name)
        if value is None:
            raise InvalidInput(f"{metric} needs the bound {name!r} (from its policy)")
        return value


Data = Mapping[str, Any]
Params = Mapping[str, Any]
Compute = Callable[[Data, Bounds, Any, Params], FloatArray]
TallyCompute = Callable[[Data, Bounds, Segments, Params], CellCounts]


@dataclass(frozen=True)
class MetricDeclaration:
    """A releasable metric: its contribution function, inputs, policy kind and norm.

    ``nonnegative`` says every coordinate is ≥ 0 (histogram-like; it matters for the
    L2 sensitivity under ``replace`` and for the ledger's negative-count check).
    ``tally``, for a count contribution, gives its :class:`CellCounts` (the same checks,
    the same rows): per-region sums then need no row for a client no cap scales.
    """

    metric: str
    kind: MetricKind
    norm: Norm
    summary: str
    inputs: tuple[str, ...]
    compute: Compute
    nonnegative: bool = True
    tally: TallyCompute | None = None

    def contribute(
        self,
        data: Mapping[str, npt.ArrayLike],
        bounds: Bounds,
        *,
        offsets: ClientOffsets | None = None,
        workers: int = blocks.DEFAULT_WORKERS,
        **params: Any,
    ) -> FloatArray:
        """Each client's bounded contribution, one row per client: shape (clients, d).

        ``data`` holds the per-sample arrays named by :attr:`inputs`; ``offsets`` the
        start of each client's samples (None: one client). ``params`` are the function's
        own settings that no policy states (e.g. ``n_classes``).

        A fleet of many samples is computed in blocks of clients
        (:func:`~dpledger.metrics.blocks.rows_in_blocks`) on ``workers`` threads (an int
        ≥ 1, default :data:`~dpledger.metrics.blocks.DEFAULT_WORKERS`: the usable CPUs,
        at most 4), each block writing its own slice of one output: the rows, their dtype
        and the error a bad sample raises are bit for bit the same for any number of
        workers. ``workers=1`` runs in the calling thread only.
        """
        check_workers(workers)
        self._check_bounds(bounds)
        arrays = self._arrays(data)
        if offsets is None:  # one client: a scalar or a vector
            return self._rows(arrays, bounds, None, params).reshape(1, -1)
        names = tuple(arrays)
        columns = [arrays[k] for k in names]
        n = _common_length(arrays)
        seg = None if n is None or not blocks.worth_blocking(n) else _segments_or_none(offsets, n)
        if seg is None:  # one block, or inputs the metric's own checks will refuse
            return self._rows(arrays, bounds, offsets, params)

        def compute(views: Sequence[Any], part: Segments) -> FloatArray:
            return self._rows(dict(zip(names, views, strict=True)), bounds, part, params)

        def whole() -> FloatArray:
            return self._rows(arrays, bounds, seg, params)

        out: FloatArray = blocks.rows_in_blocks(compute, columns, seg, whole, workers=workers)
        return out

    def contribute_sums(
        self,
        data: Mapping[str, npt.ArrayLike],
        bounds: Bounds,
        *,
        offsets: ClientOffsets,
        groups: npt.ArrayLike | None = None,
        n_groups: int | None = None,
        grid: FixedPoint | None = None,
        workers: int = blocks.DEFAULT_WORKERS,
        **params: Any,
    ) -> FloatArray:
        """Per-group EXACT sums of every client's contribution, without every client's row.

        Equal bit for bit to ``exact_sum(self.contribute(...)[groups == g], grid)`` for each
        group g (``groups``: each client's label in ``[0, n_groups)``, e.g. its region;
        without it, the one total). ``grid`` defaults to :meth:`grid`. Shape (groups, d),
        or (d,) without ``groups``. ``workers``: threads, as in :func:`sum_contributions`.
        """
        self._check_bounds(bounds, grid)  # named as given here, not as a Contribution's
        job = Contribution(self, bounds, params, grid)
        sums = sum_contributions({self.metric: job}, data, offsets=offsets, groups=groups,
                                 n_groups=n_groups, workers=workers)  # fmt: skip
        return sums[self.metric]

    def grid(self, bounds: Bounds) -> FixedPoint:
        """The public fixed-point grid of this metric's exact sums, from its bounds.

        A scalar's clip ``[low, high]``, or ``[−cap, cap]`` for an L1-capped vector
        (every coordinate of a capped row lies there).
        """
        self._check_bounds(bounds)  # a dict of bounds raised AttributeError (review 42 d2)
        if self.norm == "absolute":
            return FixedPoint(float(bounds.need("low", self.metric)),
                              float(bounds.need("high", self.metric)))  # fmt: skip
        return FixedPoint.for_cap(float(bounds.need("cap", self.metric)))

    def _check_bounds(self, bounds: object, grid: object = None) -> None:
        """InvalidInput unless ``bounds`` is a Bounds and ``grid`` a FixedPoint or None."""
        for what, value, want in (("bounds", bounds, "a Bounds"), ("grid", grid, "a FixedPoint")):
            if not isinstance(value, Bounds if what == "bounds" else FixedPoint | None):
                got = type(value).__name__
                raise InvalidInput(f"{self.metric}: {what} must be {want}, got {got}")

    def _arrays(self, data: Mapping[str, npt.ArrayLike]) -> dict[str, npt.NDArray[Any]]:
        if not isinstance(data, Mapping):
            raise InvalidInput(
                f"{self.metric}: data must map input names {list(self.inputs)} to per-sample "
                f"arrays, got {type(data).__name__}"
            )
        missing = [k for k in self.inputs if k not in data]
        if missing:
            raise InvalidInput(f"{self.metric} reads {list(self.inputs)}; missing {missing}")
        # by type, as the metric reads them: a masked array is refused, not unmasked
        return {k: read_plain(data[k], f"{k} must be one array of samples") for k in self.inputs}

    def _rows(
        self,
        arrays: Mapping[str, npt.NDArray[Any]],
        bounds: Bounds,
        offsets: ClientOffsets | None,
        params: Mapping[str, Any],
    ) -> FloatArray:
        """One row per client (shape (clients, d)) from arrays already gathered."""
        rows = np.asarray(self.compute(arrays, bounds, offsets, params), dtype=np.float64)
        if offsets is None:
            return rows
        return rows[:, None] if rows.ndim == 1 else rows  # a scalar per client, or rows


@dataclass(frozen=True)
class Contribution:
    """One metric to sum over a fleet: its declaration, bounds, own settings and grid.

    ``grid`` None means the declaration's :meth:`MetricDeclaration.grid` of ``bounds``.
    """

    declaration: MetricDeclaration
    bounds: Bounds
    settings: Mapping[str, Any] = field(default_factory=dict)
    grid: FixedPoint | None = None


def sum_contributions(
    jobs: Mapping[str, Contribution],
    data: Mapping[str, npt.ArrayLike],
    *,
    offsets: ClientOffsets,
    groups: npt.ArrayLike | None = None,
    n_groups: int | None = None,
    workers: int = blocks.DEFAULT_WORKERS,
) -> dict[str, FloatArray]:
    """Per-group EXACT sums of several metrics over one fleet, in one pass of blocks.

    What the aggregator owes the ledger for each (metric, region): for every name in
    ``jobs``, equal bit for bit to ``exact_sum`` of the group's rows of
    :meth:`MetricDeclaration.contribute`, computed block by block
    (:mod:`dpledger.metrics.blocks`) so no metric's per-client rows exist for the whole
    fleet, every block's samples are read once for all metrics, and ``offsets`` is
    validated once. ``data`` holds every per-sample array the metrics read.

    ``workers`` (an int ≥ 1, default :data:`~dpledger.metrics.blocks.DEFAULT_WORKERS`:
    the usable CPUs, at most 4) threads compute blocks at once, each with its own
    buffers; the sums are bit for bit the same for any number of workers, and so is the
    error a bad sample raises. ``workers=1`` runs in the calling thread only.
    """
    check_workers(workers)
    if not isinstance(jobs, Mapping) or not jobs:
        raise InvalidInput(
            "no metrics given: pass a mapping name -> Contribution with at least one metric"
        )
    for name, job in jobs.items():
        if not (  # its fields too: a dict of bounds raised AttributeError (review 42)
            isinstance(job, Contribution)
            and isinstance(job.declaration, MetricDeclaration)
            and isinstance(job.bounds, Bounds)
            and isinstance(job.settings, Mapping)
            and isinstance(job.grid, FixedPoint | None)
        ):
            given = [job] if not isinstance(job, Contribution) else list(vars(job).values())
            raise InvalidInput(
                f"metric {name!r}: expected a Contribution(declaration, bounds, settings) of a "
                "MetricDeclaration, a Bounds and a mapping (a FixedPoint grid or None), got "
                + ", ".join(type(v).__name__ for v in given)
            )
    gathered = {name: job.declaration._arrays(data) for name, job in jobs.items()}
    names = sorted({k for arrays in gathered.values() for k in arrays})
    read = {k: a for arrays in gathered.values() for k, a in arrays.items()}  # by type
    union = {k: read[k] for k in names}
    n = _common_length(union)
    if n is None:
        shown = ", ".join(f"{k}: shape {a.shape}" for k, a in union.items())
        raise InvalidInput(f"per-sample arrays must be 1-D and equally long, got {shown}")
    seg = segments_for(offsets, n)
    columns = [union[k] for k in names]
    computes: dict[str, blocks.BlockJob] = {}
    for name, job in jobs.items():
        grid = job.grid if job.grid is not None else job.declaration.grid(job.bounds)
        computes[name] = _block_job(job, names, gathered[name], seg, grid)
    return blocks.sums_in_blocks(
        computes, columns, seg, groups=groups, n_groups=n_groups, workers=workers
    )


def _block_job(
    job: Contribution,
    names: Sequence[str],
    arrays: Mapping[str, npt.NDArray[Any]],
    seg: Segments,
    grid: FixedPoint,
) -> blocks.BlockJob:
    """A job's per-block rows (views in ``names`` order), its cells when it is a count,
    and its unblocked rerun."""
    decl, bounds, settings = job.declaration, job.bounds, job.settings
    mine = [names.index(k) for k in decl.inputs]

    def chosen(views: Sequence[Any]) -> dict[str, Any]:
        return {k: views[i] for k, i in zip(decl.inputs, mine, strict=True)}

    def compute(views: Sequence[Any], part: Segments) -> FloatArray:
        return decl._rows(chosen(views), bounds, part, settings)

    def whole() -> FloatArray:
        return decl._rows(arrays, bounds, seg, settings)

    tally = decl.tally
    if tally is None:
        return blocks.BlockJob(compute, grid, whole)

    def cells(views: Sequence[Any], part: Segments) -> CellCounts:
        return tally(chosen(views), bounds, part, settings)

    return blocks.BlockJob(compute, grid, whole, cells)


def _common_length(arrays: Mapping[str, npt.NDArray[Any]]) -> int | None:
    """The arrays' common length; None if one is not 1-D or the lengths differ."""
    lengths = {int(a.shape[0]) if a.ndim == 1 else -1 for a in arrays.values()}
    if len(lengths) != 1 or -1 in lengths:
        return None
    return lengths.pop()


def _segments_or_none(offsets: ClientOffsets, n: int) -> Segments | None:
    """``offsets`` validated for ``n`` samples, or None (the metric's own call says why)."""
    try:
        return segments_for(offsets, n)
    except InvalidInput:
        return None


def _scalar_low(bounds: Bounds, metric: str) -> float:
    low = float(bounds.need("low", metric))
    if low != 0.0:
        raise InvalidInput(f"{metric} clips to [0, high]: its policy clip must start at 0")
    return float(bounds.need("high", metric))


def _clipped_loss(
    d: Mapping[str, Any], b: Bounds, offsets: Any, p: Mapping[str, Any]
) -> FloatArray:
    high = _scalar_low(b, "clipped_loss")
    return np.atleast_1d(spatial.clipped_loss(d["loss"], clip_high=high, offsets=offsets))


def _ratio(d: Data, b: Bounds, offsets: Any, p: Params) -> FloatArray:
    high = _scalar_low(b, "along_across_ratio")
    return np.atleast_1d(
        spatial.along_across_ratio(d["along"], d["across"], clip=high, offsets=offsets)
    )


def _histogram(d: Data, b: Bounds, offsets: Any, p: Params) -> FloatArray:
    cells = _histogram_cells(d, b, offsets, p)
    rows = cells.seg.counts(cells.cells, cells.n_cells, cells.factor)
    return rows if offsets is not None else rows[0]


def _histogram_cells(d: Data, b: Bounds, offsets: Any, p: Params) -> CellCounts:
    if b.edges is None or b.cap is None:  # bad data is named before a missing bound
        spatial.error_magnitude(d["along"], d["across"])
    edges, cap = b.need("edges", "error_histogram"), b.need("cap", "error_histogram")
    return spatial.error_magnitude_cells(
        d["along"], d["across"], edges=edges, cap=cap, offsets=offsets
    )


def _calibration(d: Data, b: Bounds, offsets: Any, p: Params) -> FloatArray:
    dimension, cap = b.need("dimension", "calibration_gap"), b.need("cap", "calibration_gap")
    if dimension % 2:
        raise InvalidInput("calibration_gap's dimension is 2 × its buckets: an even number")
    return spatial.calibration_gap(
        d["prob"], d["outcome"], buckets=dimension // 2, cap=cap, offsets=offsets
    )


def _coverage(d: Data, b: Bounds, offsets: Any, p: Params) -> FloatArray:
    if b.cap is not None and b.cap != 1:
        raise InvalidInput("coverage is a one-hot per client: its policy cap must be 1")
    return spatial.coverage(d["cell"], edges=b.need("edges", "coverage"), offsets=offsets)


def _coverage_cells(d: Data, b: Bounds, offsets: Segments, p: Params) -> CellCounts:
    if b.cap is not None and b.cap != 1:
        raise InvalidInput("coverage is a one-hot per client: its policy cap must be 1")
    return spatial.coverage_cells(d["cell"], edges=b.need("edges", "coverage"), offsets=offsets)


def _pooled(d: Data, b: Bounds, offsets: Any, p: Params) -> FloatArray:
    name = "pooled_along_across_ratio"
    settings = {k: _setting(p, k, name) for k in ("error_bound", "max_samples")}
    codec = spatial.pooled_ratio_codec(cap=b.need("cap", "pooled_along_across_ratio"), **settings)
    rows = spatial.pooled_along_across_ratio(d["along"], d["across"], offsets=offsets, **settings)
    return codec.encode(rows)


def _setting(p: Params, name: str, metric: str) -> Any:
    """The metric's own setting ``name``, or :class:`InvalidInput` naming it."""
    if name not in p:
        raise InvalidInput(
            f"{metric} needs the setting {name!r}: pass {name}=... to contribute, or "
            f"Contribution(..., settings={{{name!r}: ...}})"
        )
    return p[name]


def _confusion(d: Data, b: Bounds, offsets: Any, p: Params) -> FloatArray:
    counts = flam.confusion_matrix(
        d["y_true"], d["y_pred"], n_classes=_setting(p, "n_classes", "confusion_matrix"),
        cap=b.need("cap", "confusion_matrix"),
        offsets=offsets,
    )  # fmt: skip
    return flam.flatten_confusion(counts)


def _confusion_cells(d: Data, b: Bounds, offsets: Segments, p: Params) -> CellCounts:
    return flam.confusion_cells(
        d["y_true"], d["y_pred"], n_classes=_setting(p, "n_classes", "confusion_matrix"),
        cap=b.need("cap", "confusion_matrix"),
        offsets=offsets,
    )  # fmt: skip


def _regression(d: Data, b: Bounds, offsets: Any, p: Params) -> FloatArray:
    name = "regression_measures"
    settings = {k: _setting(p, k, name) for k in ("y_bounds", "residual_bound", "max_samples")}
    if "shift" in p:
        settings["shift"] = p["shift"]
    codec = flam_regression.regression_codec(cap=b.need("cap", "regression_measures"), **settings)
    measures = flam_regression.regression_measures(
        d["y_true"], d["y_pred"], offsets=offsets, **settings
    )
    return codec.encode(measures)


SPATIAL_DECLARATIONS: types.MappingProxyType[str, MetricDeclaration] = types.MappingProxyType(
    {
        d.metric: d
        for d in (
            MetricDeclaration("clipped_loss", "scalar_mean", "absolute",
                              "per-client mean loss, clipped to [0, high]", ("loss",),
                              _clipped_loss),
            MetricDeclaration("along_across_ratio", "scalar_mean", "absolute",
                              "per-client across/along RMSE ratio, clipped to [0, high]",
                              ("along", "across"), _ratio),
            MetricDeclaration("error_histogram", "histogram", "l1",
                              "error magnitudes counted over fixed edges, L1-capped",
                              ("along", "across"), _histogram, tally=_histogram_cells),
            MetricDeclaration("calibration_gap", "vector_sum", "l1",
                              "[Σ(p−y) per confidence bucket, count per bucket], L1-capped",
                              ("prob", "outcome"), _calibration, nonnegative=False),
            MetricDeclaration("coverage", "histogram", "l1",
                              "one-hot of the client's distinct-cell count", ("cell",),
                              _coverage, tally=_coverage_cells),
            MetricDeclaration("pooled_along_across_ratio", "vector_sum", "l1",
                              "(Σacross², Σalong², n) encoded by pooled_ratio_codec",
                              ("along", "across"), _pooled),
        )
    }
)  # fmt: skip
"""The spatial metric set, by contribution name."""

FLAM_DECLARATIONS: types.MappingProxyType[str, MetricDeclaration] = types.MappingProxyType(
    {
        d.metric: d
        for d in (
            MetricDeclaration("confusion_matrix", "vector_sum", "l1",
                              "flattened C×C confusion counts, L1-capped",
                              ("y_true", "y_pred"), _confusion, tally=_confusion_cells),
            MetricDeclaration("regression_measures", "vector_sum", "l1",
                              "regression measures encoded by regression_codec (5 values)",
                              ("y_true", "y_pred"), _regression, nonnegative=False),
        )
    }
)  # fmt: skip
"""FLAM's aggregatable measures, by contribution name."""

DECLARATIONS = types.MappingProxyType({**SPATIAL_DECLARATIONS, **FLAM_DECLARATIONS})
"""Every declared metric, by contribution name."""

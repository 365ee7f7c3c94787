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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dpledger.errors import InvalidInput
from dpledger.metrics import flam, flam_regression, spatial
from dpledger.metrics._segments import FloatArray
from dpledger.types import MetricKind

__all__ = [
    "DECLARATIONS",
    "FLAM_DECLARATIONS",
    "SPATIAL_DECLARATIONS",
    "Bounds",
    "MetricDeclaration",
    "Norm",
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

    def need(self, name: str, metric: str) -> Any:
        """The bound ``name``, or :class:`InvalidInput` naming the metric that needs it."""
        value = getattr(self, name)
        if value is None:
            raise InvalidInput(f"{metric} needs the bound {name!r} (from its policy)")
        return value


Data = Mapping[str, Any]
Params = Mapping[str, Any]
Compute = Callable[[Data, Bounds, Any, Params], FloatArray]


@dataclass(frozen=True)
class MetricDeclaration:
    """A releasable metric: its contribution function, inputs, policy kind and norm.

    ``nonnegative`` says every coordinate is ≥ 0 (histogram-like; it matters for the
    L2 sensitivity under ``replace`` and for the ledger's negative-count check).
    """

    metric: str
    kind: MetricKind
    norm: Norm
    summary: str
    inputs: tuple[str, ...]
    compute: Compute
    nonnegative: bool = True

    def contribute(
        self,
        data: Mapping[str, npt.ArrayLike],
        bounds: Bounds,
        *,
        offsets: npt.ArrayLike | None = None,
        **params: Any,
    ) -> FloatArray:
        """Each client's bounded contribution, one row per client: shape (clients, d).

        ``data`` holds the per-sample arrays named by :attr:`inputs`; ``offsets`` the
        start of each client's samples (None: one client). ``params`` are the function's
        own settings that no policy states (e.g. ``n_classes``).
        """
        missing = [k for k in self.inputs if k not in data]
        if missing:
            raise InvalidInput(f"{self.metric} reads {list(self.inputs)}; missing {missing}")
        arrays = {k: np.asarray(data[k]) for k in self.inputs}
        rows = np.asarray(self.compute(arrays, bounds, offsets, params), dtype=np.float64)
        if offsets is None:
            return rows.reshape(1, -1)  # one client: a scalar or a vector
        return rows[:, None] if rows.ndim == 1 else rows  # a scalar per client, or rows


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
    errors = spatial.error_magnitude(d["along"], d["across"])
    edges, cap = b.need("edges", "error_histogram"), b.need("cap", "error_histogram")
    return spatial.error_histogram(errors, edges=edges, cap=cap, offsets=offsets)


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


def _pooled(d: Data, b: Bounds, offsets: Any, p: Params) -> FloatArray:
    settings = {k: p[k] for k in ("error_bound", "max_samples") if k in p}
    codec = spatial.pooled_ratio_codec(cap=b.need("cap", "pooled_along_across_ratio"), **settings)
    rows = spatial.pooled_along_across_ratio(d["along"], d["across"], offsets=offsets, **settings)
    return codec.encode(rows)


def _confusion(d: Data, b: Bounds, offsets: Any, p: Params) -> FloatArray:
    counts = flam.confusion_matrix(
        d["y_true"], d["y_pred"], n_classes=p["n_classes"], cap=b.need("cap", "confusion_matrix"),
        offsets=offsets,
    )  # fmt: skip
    return flam.flatten_confusion(counts)


def _regression(d: Data, b: Bounds, offsets: Any, p: Params) -> FloatArray:
    settings = {k: p[k] for k in ("y_bounds", "residual_bound", "max_samples", "shift") if k in p}
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
                              ("along", "across"), _histogram),
            MetricDeclaration("calibration_gap", "vector_sum", "l1",
                              "[Σ(p−y) per confidence bucket, count per bucket], L1-capped",
                              ("prob", "outcome"), _calibration, nonnegative=False),
            MetricDeclaration("coverage", "histogram", "l1",
                              "one-hot of the client's distinct-cell count", ("cell",),
                              _coverage),
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
                              ("y_true", "y_pred"), _confusion),
            MetricDeclaration("regression_measures", "vector_sum", "l1",
                              "regression measures encoded by regression_codec (5 values)",
                              ("y_true", "y_pred"), _regression, nonnegative=False),
        )
    }
)  # fmt: skip
"""FLAM's aggregatable measures, by contribution name."""

DECLARATIONS = types.MappingProxyType({**SPATIAL_DECLARATIONS, **FLAM_DECLARATIONS})
"""Every declared metric, by contribution name."""

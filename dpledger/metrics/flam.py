"""FLAM aggregatable measures: per-client sums whose total gives the centralised metric.

A metric computed from the *sum* of per-client measures equals the metric computed
centrally on the concatenated data; a weighted average of per-client metrics does
not (for macro-F1, MCC, weighted precision, R², …). Classification: one C×C confusion
matrix per client (rows = true class, columns = predicted, scikit-learn's layout);
every classification metric is post-processing of the summed matrix. Regression:
``Σ(y−ŷ)², Σ|y−ŷ|, Σ(y−c), Σ(y−c)², n`` with a public shift ``c``, giving R², MSE,
RMSE and MAE in one round (no separate round for the global mean); those functions
live in :mod:`dpledger.metrics.flam_regression`.

Zero divisions follow scikit-learn's default ``zero_division="warn"``: a precision,
recall or F1 whose denominator is 0 counts as 0.0 (no warning is raised here).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.metrics._blockwise import blockwise
from dpledger.metrics._reading import FloatArray, as_real, check_positive
from dpledger.metrics._segments import (
    CellCounts,
    ClientOffsets,
    IntArray,
    Segments,
    as_finite,
    as_labels,
    cap_factor,
    check_same_length,
    segments_for,
)
from dpledger.metrics.flam_regression import regression_measures, regression_metrics_rows
from dpledger.types import MAX_DIMENSION, Labels

__all__ = [
    "CLASSIFICATION_KEYS",
    "MAX_CLASSES",
    "classification_metrics",
    "classification_metrics_rows",
    "confusion_cells",
    "confusion_matrix",
    "flatten_confusion",
    "participant_weighted_average",
    "participant_weighted_classification",
    "participant_weighted_regression",
    "project_confusion",
    "unflatten_confusion",
]


CLASSIFICATION_KEYS = (
    "accuracy",
    "balanced_accuracy",
    "precision_macro",
    "recall_macro",
    "f1_macro",
    "precision_micro",
    "recall_micro",
    "f1_micro",
    "precision_weighted",
    "recall_weighted",
    "f1_weighted",
    "mcc",
)
"""Keys of :func:`classification_metrics`, in order."""

# --------------------------------------------------------------------------- classification


@blockwise
def confusion_matrix(
    y_true: npt.ArrayLike,
    y_pred: npt.ArrayLike,
    *,
    n_classes: int,
    offsets: ClientOffsets | None = None,
    cap: float | None = None,
) -> FloatArray:
    """Per-client C×C confusion counts (row = true, column = predicted), float64.

    Labels are integers in ``[0, n_classes)``. With ``cap`` the matrix is scaled by
    ``min(1, cap / n)`` so its L1 norm (the sample count) is ≤ ``cap`` — what a
    ``vector_sum`` release of :func:`flatten_confusion` needs. Shape (C, C), or
    (clients, C, C) with ``offsets``.

    The cap holds to within 2·2⁻⁵³ relative, for any n: cells are counted in integers
    (exact) and scaled ONCE, each cell k·f with f = fl(cap/n), so Σ fl(k_i·f) ≤
    Σ k_i·(cap/n)·(1 + 2⁻⁵³)² = cap·(1 + 2⁻⁵²+ 2⁻¹⁰⁶). Adding cap/n per sample in a float
    running sum instead drifts with n (50.000000010 for cap 50 at 10⁷ samples), past the
    ledger's ``CLIENT_ROUNDING_SLACK``.
    """
    c, t, p, seg, factor = _checked(y_true, y_pred, n_classes, offsets, cap)
    flat = seg.tags(c)  # (client · C + true) · C + predicted, in place: no temporaries
    flat += t
    flat *= c
    flat += p
    rows = seg.tally(flat, c * c, factor).reshape(seg.n_clients, c, c)
    return rows[0] if offsets is None else rows


def confusion_cells(
    y_true: npt.ArrayLike,
    y_pred: npt.ArrayLike,
    *,
    n_classes: int,
    offsets: ClientOffsets | None = None,
    cap: float | None = None,
) -> CellCounts:
    """The flattened confusion matrices as cells (true · C + predicted), before any row.

    Same checks, and ``CellCounts.rows()`` the same rows bit for bit, as
    ``flatten_confusion(confusion_matrix(...))``; for per-region sums that need no
    uncapped client's row (:func:`dpledger.metrics.blocks.sums_in_blocks`).
    """
    c, t, p, seg, factor = _checked(y_true, y_pred, n_classes, offsets, cap)
    cells = t * c
    cells += p
    return CellCounts(seg, cells, c * c, factor)


MAX_CLASSES = math.isqrt(MAX_DIMENSION)
"""The most classes a confusion matrix may have (316): C² cells within a ``vector_sum``
metric's largest dimension, so a release of it can be declared at all."""


def _checked(
    y_true: npt.ArrayLike,
    y_pred: npt.ArrayLike,
    n_classes: int,
    offsets: ClientOffsets | None,
    cap: float | None,
) -> tuple[int, IntArray, IntArray, Segments, FloatArray | None]:
    """Validated (C, true labels, predicted labels, segments, cap factor or None)."""
    if isinstance(n_classes, bool) or not isinstance(n_classes, int | np.integer):
        raise InvalidInput(f"n_classes must be an integer, got {shown(n_classes)}")
    if not 1 <= n_classes <= MAX_CLASSES:
        raise InvalidInput(
            f"n_classes must lie in [1, {MAX_CLASSES}], got {n_classes}: a confusion matrix is "
            f"released as one vector of C² values, at most a policy's {MAX_DIMENSION:,}"
        )
    c = int(n_classes)
    t = as_labels(y_true, "y_true", c)
    p = as_labels(y_pred, "y_pred", c)
    n = check_same_length(y_true=t, y_pred=p)
    seg = segments_for(offsets, n)
    factor = None
    if cap is not None:  # a matrix's L1 norm is its sample count
        factor = cap_factor(seg.lengths.astype(np.float64), check_positive(cap, "cap"))
    return c, t, p, seg, factor


def flatten_confusion(confusion: npt.ArrayLike) -> FloatArray:
    """(…, C, C) → (…, C²) row-major: one vector per client for a ``vector_sum`` release."""
    m = as_real(confusion, "confusion")  # by type: no text, objects, bools (audit s29, F5)
    if m.ndim < 2 or m.shape[-1] != m.shape[-2]:
        raise InvalidInput(f"confusion must end in a square (C, C), got {m.shape}")
    return m.reshape(*m.shape[:-2], m.shape[-1] ** 2)


def unflatten_confusion(vector: npt.ArrayLike) -> FloatArray:
    """(…, C²) → (…, C, C): the inverse of :func:`flatten_confusion`."""
    v = as_real(vector, "vector")
    c = math.isqrt(v.shape[-1]) if v.ndim else 0
    if v.ndim == 0 or c * c != v.shape[-1] or c == 0:
        raise InvalidInput(f"a flattened confusion matrix has C² entries, got shape {v.shape}")
    return v.reshape(*v.shape[:-1], c, c)


def project_confusion(noisy: npt.ArrayLike) -> FloatArray:
    """Clamp a noisy (…, C, C) confusion matrix's negative entries to 0 (post-processing).

    Counts are non-negative, so the clamp moves the release toward the feasible set
    (e.g. for a chart of counts). Do NOT estimate metrics from it: the clamp adds an
    upward bias of the order of the noise scale to every near-zero cell, which for a good
    classifier (most error cells near 0) drags accuracy far down. Published metrics use
    :func:`dpledger.metrics.uncertainty.classification_estimates` on the unclamped release.
    """
    m = as_real(noisy, "noisy")
    if m.ndim == 1:
        m = unflatten_confusion(m)
    flatten_confusion(m)  # shape check, first: a number alone is no matrix
    if not np.all(np.isfinite(m)):
        raise InvalidInput("noisy confusion matrix holds NaN or inf")
    return np.maximum(m, 0.0)


def _check_labels(labels: object) -> None:
    """``labels`` is 'present' or 'all' (anything else was read as 'all' by the rows)."""
    if not isinstance(labels, str) or labels not in ("present", "all"):
        raise InvalidInput(f"labels must be 'present' or 'all', got {shown(labels)}")


def _div0(num: FloatArray, den: FloatArray) -> FloatArray:
    """num/den with 0.0 where den == 0 (scikit-learn's zero_division='warn' value)."""
    safe = np.where(den == 0, 1.0, den)
    return np.where(den == 0, 0.0, num / safe)


def classification_metrics_rows(
    confusion: npt.ArrayLike, *, labels: Labels = "present"
) -> dict[str, FloatArray]:
    """Every classification metric for each matrix of a (…, C, C) stack (vectorised).

    Same conventions as :func:`classification_metrics`; a matrix with no mass gives
    NaN everywhere instead of an error. The matrices are not validated here; ``labels``
    is (any other text was read as 'all': review 42 d2M).
    """
    _check_labels(labels)
    m = np.asarray(confusion, dtype=np.float64)
    tp = np.diagonal(m, axis1=-2, axis2=-1)
    true_sum = m.sum(axis=-1)
    pred_sum = m.sum(axis=-2)
    total = pred_sum.sum(axis=-1)
    mask = (true_sum + pred_sum > 0) if labels == "present" else np.ones(tp.shape, dtype=bool)
    n_labels = mask.sum(axis=-1).astype(np.float64)
    per_class = {
        "precision": _div0(tp, pred_sum),
        "recall": _div0(tp, true_sum),
        "f1": _div0(2.0 * tp, true_sum + pred_sum),
    }
    weights = np.where(mask, true_sum, 0.0)
    w_total = weights.sum(axis=-1)
    out: dict[str, FloatArray] = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = tp.sum(axis=-1) / total
        has_true = true_sum > 0
        out["accuracy"] = accuracy
        out["balanced_accuracy"] = (per_class["recall"] * has_true).sum(axis=-1) / has_true.sum(
            axis=-1
        )
        for name, v in per_class.items():
            out[f"{name}_macro"] = (v * mask).sum(axis=-1) / n_labels
        # micro sums over every class: an absent class adds 0 to each, so they are the
        # same for either ``labels``, and a noisy matrix's sums need no cut on the noise
        tp_m, pred_m, true_m = tp.sum(axis=-1), pred_sum.sum(axis=-1), true_sum.sum(axis=-1)
        out["precision_micro"] = _div0(tp_m, pred_m)
        out["recall_micro"] = _div0(tp_m, true_m)
        out["f1_micro"] = _div0(2.0 * tp_m, true_m + pred_m)
        for name, v in per_class.items():
            # scikit-learn falls back to the unweighted mean when every weight is 0.
            weighted = (v * weights).sum(axis=-1) / np.where(w_total > 0, w_total, 1.0)
            out[f"{name}_weighted"] = np.where(w_total > 0, weighted, out[f"{name}_macro"])
        # Σ t·(tp/t) / Σ t = Σ tp / Σ t: recall_micro for either ``labels`` (review stats)
        out["recall_weighted"] = out["recall_micro"]
        cov_tp = tp.sum(axis=-1) * total - (true_sum * pred_sum).sum(axis=-1)
        cov_pp = total * total - (pred_sum * pred_sum).sum(axis=-1)
        cov_tt = total * total - (true_sum * true_sum).sum(axis=-1)
        prod = cov_pp * cov_tt
        out["mcc"] = np.where(prod > 0, cov_tp / np.sqrt(np.where(prod > 0, prod, 1.0)), 0.0)
    empty = ~(total > 0)
    return {k: np.where(empty, np.nan, out[k]) for k in CLASSIFICATION_KEYS}


def classification_metrics(
    confusion: npt.ArrayLike, *, labels: Labels = "present"
) -> dict[str, float]:
    """Every classification metric from one summed C×C confusion matrix (post-processing).

    Equals scikit-learn on the concatenated data. ``labels="present"`` (default)
    averages macro metrics over the classes that occur as a true or a predicted label
    (row or column sum > 0) — scikit-learn's default ``labels``; ``labels="all"``
    averages over all C classes, as ``labels=range(C)``: an absent class then scores
    0.0 and lowers the macro averages. Micro and weighted averages (weights = true
    counts) are the same either way. ``balanced_accuracy`` is the mean recall over
    classes with a true sample, as ``balanced_accuracy_score``. ``mcc`` is Gorodkin's
    multiclass R_K, computed as scikit-learn does (0.0 when undefined). Accepts float
    (noisy) matrices; negative entries are refused: call :func:`project_confusion`
    first. After noise almost every class is "present", so for a noisy release
    ``labels="all"`` is the stable, data-independent choice. A 1-D input of length
    C² is read as :func:`flatten_confusion` output.
    """
    _check_labels(labels)
    m = as_real(confusion, "confusion")
    if m.ndim == 1:
        m = unflatten_confusion(m)
    m = as_finite(m, "confusion", ndim=2)
    if m.shape[0] != m.shape[1] or m.shape[0] == 0:
        raise InvalidInput(f"confusion must be a square C×C matrix, got shape {m.shape}")
    if np.any(m < 0):
        raise InvalidInput(
            "confusion holds negative entries; project a noisy release with "
            "project_confusion() before computing metrics"
        )
    if not m.sum() > 0:
        raise InvalidInput("confusion matrix has no mass: there is nothing to measure")
    rows = classification_metrics_rows(m, labels=labels)
    return {k: float(v) for k, v in rows.items()}


# --------------------------------------------------------------------------- naive baseline


def participant_weighted_average(
    per_client_metrics: Mapping[str, npt.ArrayLike] | Sequence[Mapping[str, float]],
    sample_counts: npt.ArrayLike,
) -> dict[str, float]:
    """The naive baseline: Σ n_i·metric_i / Σ n_i over clients (weighted by sample count).

    Shown for comparison only: it equals the centralised value for accuracy and
    weighted recall, and not for macro-F1, MCC, weighted precision, R², … . Clients
    with no samples or an undefined metric (NaN, e.g. R² of one sample) are skipped.
    ``per_client_metrics`` is a mapping of arrays (one entry per client) or a list
    of per-client dicts.
    """
    if isinstance(per_client_metrics, Mapping):
        table = {k: _as_finite_or_nan(v, k) for k, v in per_client_metrics.items()}
    else:
        rows = _metric_rows(per_client_metrics)
        keys = list(rows[0]) if rows else []
        table = {k: _as_finite_or_nan([row[k] for row in rows], k) for k in keys}
    w = as_finite(sample_counts, "sample_counts")
    if np.any(w < 0):
        raise InvalidInput("sample_counts must be ≥ 0")
    out: dict[str, float] = {}
    for key, values in table.items():
        if values.shape != w.shape:
            raise InvalidInput(f"{key}: {values.shape[0]} clients but {w.shape[0]} sample counts")
        ok = ~np.isnan(values) & (w > 0)
        den = float(w[ok].sum())
        out[key] = float((values[ok] * w[ok]).sum() / den) if den > 0 else float("nan")
    return out


def _metric_rows(rows: object) -> list[Mapping[str, float]]:
    """``per_client_metrics`` given as rows: a list or tuple of per-client dicts with the
    same keys; else :class:`InvalidInput` (text, an array or a number is neither form)."""
    if not isinstance(rows, list | tuple) or not all(isinstance(r, Mapping) for r in rows):
        raise InvalidInput(
            "per_client_metrics must be a mapping of metric name to per-client values, or a "
            f"list of per-client dicts, got {type(rows).__name__} {shown(rows, 40)}"
        )
    keys = set(rows[0]) if rows else set()
    for i, row in enumerate(rows):
        if set(row) != keys:
            raise InvalidInput(
                f"per_client_metrics rows must have the same metrics: row {i} has "
                f"{shown(sorted(map(str, row)), 60)}, row 0 {shown(sorted(map(str, keys)), 60)}"
            )
    return list(rows)


def _as_finite_or_nan(values: npt.ArrayLike, name: object) -> FloatArray:
    """A 1-D float array that may hold NaN (an undefined per-client metric) but no inf."""
    arr = as_real(values, f"per_client_metrics[{shown(name, 40)}]")
    if arr.ndim != 1 or np.any(np.isinf(arr)):
        raise InvalidInput(
            f"per_client_metrics[{shown(name, 40)}] must be a 1-D array without inf (one "
            f"value per client), got shape {arr.shape}"
        )
    return arr


def _need_offsets(offsets: object) -> None:
    """A per-client baseline needs the clients: ``offsets`` given (None is one client)."""
    if offsets is None:
        raise InvalidInput(
            "offsets must give each client's first sample index: the baseline averages "
            "per-client metrics (None would be one client)"
        )


def participant_weighted_classification(
    y_true: npt.ArrayLike,
    y_pred: npt.ArrayLike,
    *,
    n_classes: int,
    offsets: ClientOffsets,
    labels: Labels = "present",
) -> dict[str, float]:
    """Naive baseline: each client's classification metrics, averaged by sample count.

    ``labels="present"`` uses each client's own present classes, as scikit-learn
    would on that client's data alone.
    """
    _need_offsets(offsets)
    _check_labels(labels)  # review 42: "bogus" was averaged as "all"
    rows = confusion_matrix(y_true, y_pred, n_classes=n_classes, offsets=offsets)
    per_client = classification_metrics_rows(rows, labels=labels)
    return participant_weighted_average(per_client, rows.sum(axis=(1, 2)))


def participant_weighted_regression(
    y_true: npt.ArrayLike,
    y_pred: npt.ArrayLike,
    *,
    offsets: ClientOffsets,
    shift: float | None = None,
) -> dict[str, float]:
    """Naive baseline: each client's R², MSE, RMSE, MAE, averaged by sample count.

    Computed in the clear (not a release); ``shift`` defaults to the mean of y_true.
    """
    _need_offsets(offsets)
    y = as_finite(y_true, "y_true")
    c = float(y.mean()) if shift is None and y.size else shift
    rows = regression_measures(y, y_pred, offsets=offsets, shift=c)
    return participant_weighted_average(regression_metrics_rows(rows), rows[:, 4])

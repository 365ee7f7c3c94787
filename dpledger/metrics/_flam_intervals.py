"""Estimates and intervals for every FLAM metric of one noisy release (post-processing).

Classification: the 12 metrics of a noisy C×C confusion matrix. Regression: R², MSE,
RMSE and MAE of noisy codec-encoded measures. Point estimates are plug-ins on the
UNCLAMPED release, clipped to each metric's range (clipping a scalar to a range that
holds the truth never moves it away from the truth; clamping cells does, by up to the
noise scale per near-zero cell). Which interval each metric gets was chosen by measured
coverage (``/work/research/issue11/FINDINGS.md``; the acceptance tests re-measure it):

* classification: the delta method with the noise law's quantile (:mod:`._intervals`);
* MSE, MAE: the same; RMSE: the square root of MSE's interval (a monotone map keeps
  coverage; a delta interval on √MSE under-covers near 0);
* R² = 1 − SSE/SST: Fieller's interval for SSE/SST, which stays honest while SST's
  noise is a sizeable fraction of it, where the delta method covers 75–82%.

Each metric is unusable (whole range, reason in words) when one of its denominators is
not clearly positive: the total count (every metric), each class's true count (recall,
balanced accuracy), predicted count (precision), their sum (F1), the spread of true and
predicted classes (MCC); the sample count n (all regression metrics) and the total sum
of squares (R²). Public maxima (cohort × cap) keep a pure-noise release flagged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from dpledger.errors import InvalidInput
from dpledger.metrics._intervals import (
    Batch,
    Guard,
    batch_intervals,
    fieller,
    linearize,
    noise_std,
    quantile_factor,
)
from dpledger.metrics._segments import FloatArray, as_finite
from dpledger.metrics.codec import VectorSumCodec
from dpledger.metrics.flam import CLASSIFICATION_KEYS, classification_metrics_rows
from dpledger.metrics.flam_regression import REGRESSION_KEYS, REGRESSION_MEASURES
from dpledger.types import IntervalMethod, Labels, MechanismKind

__all__ = ["classification_batch", "regression_batch"]

_UNIT = (0.0, 1.0)
TOTAL = "total count"
# With labels="all" these equal Σ diagonal / Σ all: a ratio of two linear sums.
_ACCURACY_LIKE = ("accuracy", "precision_micro", "recall_micro", "f1_micro", "recall_weighted")


def _square(stack: FloatArray) -> FloatArray:
    c = math.isqrt(stack.shape[-1])
    return stack.reshape(*stack.shape[:-1], c, c)


def _confusion_batch(released: npt.ArrayLike) -> FloatArray:
    x = np.asarray(released, dtype=np.float64)
    if x.ndim != 2:
        raise InvalidInput(f"a batch of confusion releases has shape (R, C²), got {x.shape}")
    c = math.isqrt(x.shape[-1])
    if c == 0 or c * c != x.shape[-1]:
        raise InvalidInput(f"a confusion release has C² entries, got {x.shape[-1]}")
    return as_finite(x.reshape(-1), "released").reshape(x.shape)


def _spread(marg: FloatArray, total: FloatArray) -> FloatArray:
    with np.errstate(invalid="ignore", divide="ignore"):
        share = marg / total[..., None]
    spread: FloatArray = 1.0 - np.sum(share * share, axis=-1)
    return spread


def _confusion_denominators(stack: FloatArray) -> dict[str, FloatArray]:
    m = _square(stack)
    true, pred = m.sum(axis=-1), m.sum(axis=-2)
    total = true.sum(axis=-1)
    out = {TOTAL: total}
    for c in range(true.shape[-1]):
        out[f"true count of class {c}"] = true[..., c]
        out[f"predicted count of class {c}"] = pred[..., c]
        out[f"true + predicted count of class {c}"] = true[..., c] + pred[..., c]
    out["spread of true classes (1 − Σ share²)"] = _spread(true, total)
    out["spread of predicted classes (1 − Σ share²)"] = _spread(pred, total)
    return out


def _confusion_guards(c: int, max_total: float) -> dict[str, tuple[Guard, ...]]:
    total = (Guard(TOTAL, max_total),)

    def per_class(kind: str, factor: float = 1.0) -> tuple[Guard, ...]:
        return total + tuple(Guard(f"{kind} of class {k}", factor * max_total) for k in range(c))

    mcc = (Guard("spread of true classes (1 − Σ share²)", 1.0),
           Guard("spread of predicted classes (1 − Σ share²)", 1.0))  # fmt: skip
    guards: dict[str, tuple[Guard, ...]] = {k: total for k in CLASSIFICATION_KEYS}
    guards |= {k: per_class("true count") for k in ("balanced_accuracy", "recall_macro")}
    guards |= {k: per_class("predicted count") for k in ("precision_macro", "precision_weighted")}
    guards |= {k: per_class("true + predicted count", 2.0) for k in ("f1_macro", "f1_weighted")}
    guards["mcc"] = total + mcc
    return guards


def classification_batch(
    released: npt.ArrayLike,
    scale: float | npt.ArrayLike,
    *,
    labels: Labels = "all",
    level: float = 0.95,
    method: IntervalMethod = "delta",
    distribution: MechanismKind = "laplace",
    draws: int = 2000,
    seed: int = 0,
    max_total: float = math.inf,
) -> Batch:
    """Estimates and intervals of every classification metric for R noisy releases.

    ``released`` is (R, C²): R flattened noisy matrices; ``scale`` the public noise
    scale per coordinate; ``max_total`` a public bound on the true total count (cohort ×
    cap), used only to keep pure-noise releases flagged.
    """
    if labels not in ("present", "all"):
        raise InvalidInput(f"labels must be 'present' or 'all', got {labels!r}")
    x = _confusion_batch(released)
    c = math.isqrt(x.shape[-1])
    std = noise_std(scale, x.shape[-1], distribution)

    def rows(stack: FloatArray) -> Mapping[str, FloatArray]:
        return classification_metrics_rows(_square(stack), labels=labels)

    ranges = {k: _UNIT for k in CLASSIFICATION_KEYS} | {"mcc": (-1.0, 1.0)}
    override = None
    if method == "delta" and labels == "all":  # trace / total: Fieller's interval

        def parts(stack: FloatArray) -> dict[str, FloatArray]:
            m = _square(stack)
            return {"hits": np.trace(m, axis1=-2, axis2=-1), "total": m.sum(axis=(-2, -1))}

        centre, w = linearize(parts, x, std)
        lo, hi, bounded = fieller(
            centre["hits"], centre["total"], w["hits"], w["total"], level, distribution
        )
        override = dict.fromkeys(_ACCURACY_LIKE, (lo, hi, bounded))
    return batch_intervals(
        rows, x, std, level=level, method=method, distribution=distribution, ranges=ranges,
        denominators=_confusion_denominators, guards=_confusion_guards(c, float(max_total)),
        draws=draws, seed=seed, override=override,
    )  # fmt: skip


def _check_codec(codec: VectorSumCodec) -> float:
    if codec.names != REGRESSION_MEASURES:
        raise InvalidInput(
            f"a regression release needs the codec of regression_codec() with names "
            f"{REGRESSION_MEASURES}, got {codec.names}"
        )
    return codec.bounds[1] / codec.bounds[4]  # residual bound r: Σ|y−ŷ| ≤ m·r, n ≤ m


def _measures(codec: VectorSumCodec, stack: FloatArray) -> tuple[FloatArray, ...]:
    v = codec.decode(stack)
    return tuple(v[..., k] for k in range(5))


def regression_batch(
    released: npt.ArrayLike,
    codec: VectorSumCodec,
    scale: float | npt.ArrayLike,
    *,
    level: float = 0.95,
    method: IntervalMethod = "delta",
    distribution: MechanismKind = "laplace",
    draws: int = 2000,
    seed: int = 0,
    cohort: float = math.inf,
) -> Batch:
    """Estimates and intervals of R², MSE, RMSE, MAE for R noisy encoded releases (R, 5).

    ``cohort`` (public) bounds the true n by cohort·m and the total sum of squares by
    cohort·m·h² (the codec's per-client bounds), keeping pure-noise releases flagged.
    """
    r = _check_codec(codec)
    x = np.asarray(released, dtype=np.float64)
    if x.ndim != 2 or x.shape[-1] != codec.dimension:
        raise InvalidInput(f"a batch of releases has shape (R, {codec.dimension}), got {x.shape}")
    x = as_finite(x.reshape(-1), "released").reshape(x.shape)
    std = noise_std(scale, codec.dimension, distribution)

    def parts(stack: FloatArray) -> dict[str, FloatArray]:
        sse, sae, s1, s2, n = _measures(codec, stack)
        with np.errstate(invalid="ignore", divide="ignore"):
            return {"sse": sse, "sae": sae, "n": n, "sst": s2 - s1 * s1 / n}

    def rows(stack: FloatArray) -> dict[str, FloatArray]:
        p = parts(stack)
        with np.errstate(invalid="ignore", divide="ignore"):
            mse = p["sse"] / p["n"]
            return {
                "r2": 1.0 - p["sse"] / p["sst"],
                "mse": mse,
                "rmse": np.sign(mse) * np.sqrt(np.abs(mse)),  # signed: an interval below 0 shows
                "mae": p["sae"] / p["n"],
            }

    def denominators(stack: FloatArray) -> dict[str, FloatArray]:
        p = parts(stack)
        return {"sample count n": p["n"], "total sum of squares Σ(y−ȳ)²": p["sst"]}

    n_guard = Guard("sample count n", cohort * codec.bounds[4])
    guards: dict[str, tuple[Guard, ...]] = {k: (n_guard,) for k in REGRESSION_KEYS}
    guards["r2"] = (n_guard, Guard("total sum of squares Σ(y−ȳ)²", cohort * codec.bounds[3]))
    override = None
    if method == "delta":
        centre, w = linearize(parts, x, std)
        theta_lo, theta_hi, bounded = fieller(
            centre["sse"], centre["sst"], w["sse"], w["sst"], level, distribution
        )
        _, mse_w = linearize(lambda s: {"mse": rows(s)["mse"]}, x, std)
        se, q = quantile_factor(mse_w["mse"], level, distribution)
        mse = centre["sse"] / np.where(centre["n"] != 0, centre["n"], np.nan)
        lo, hi = mse - q * se, mse + q * se
        override = {
            "r2": (1.0 - theta_hi, 1.0 - theta_lo, bounded),
            "rmse": (np.sign(lo) * np.sqrt(np.abs(lo)), np.sign(hi) * np.sqrt(np.abs(hi)),
                     np.isfinite(lo) & np.isfinite(hi)),
        }  # fmt: skip
    ranges = {"r2": (-math.inf, 1.0), "mse": (0.0, r * r), "rmse": (0.0, r), "mae": (0.0, r)}
    return batch_intervals(
        rows, x, std, level=level, method=method, distribution=distribution, ranges=ranges,
        denominators=denominators, guards=guards, draws=draws, seed=seed, override=override,
    )  # fmt: skip

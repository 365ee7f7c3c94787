"""Case 2: FLAM metrics from summed per-client measures vs scikit-learn, centrally.

dpledger's side is the whole federated path: every client's confusion matrix and
regression measures (batch form, ``offsets=``), their sum (the secure aggregator's
stand-in), and the metrics as post-processing of the sums. scikit-learn computes the
same metrics on the concatenated samples, as a central evaluator holding all the data
would. Both sets must agree to 1e-12 (absolute) for the speed ratio to count.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks._harness import Row, Sizes, fmt_seconds, log, median_time
from dpledger.metrics import flam, flam_regression
from dpledger.sim.fleet import Fleet

__all__ = ["REGRESSION_SHIFT", "central_sklearn", "federated", "run"]

REGRESSION_SHIFT = 100.0
"""Public shift c of the regression measures: the target's nominal mean (see flam)."""

_KEYS = (
    "accuracy",
    "f1_macro",
    "f1_weighted",
    "precision_macro",
    "recall_macro",
    "mcc",
    "r2",
    "mse",
)


def secure_sum(rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Column sums of per-client rows, pairwise (what an accurate aggregator would add).

    ``rows.sum(axis=0)`` on a C-ordered (clients, k) array adds row after row, whose
    rounding error grows with the number of clients; summing each contiguous column
    lets numpy use pairwise summation.
    """
    flat = rows.reshape(rows.shape[0], -1)
    out: npt.NDArray[np.float64] = np.ascontiguousarray(flat.T).sum(axis=1)
    return out.reshape(rows.shape[1:])


def _metrics(
    confusion: npt.NDArray[np.float64], measures: npt.NDArray[np.float64]
) -> dict[str, float]:
    cls = flam.classification_metrics(confusion)
    reg = flam_regression.regression_metrics(measures)
    return {k: (cls | reg)[k] for k in _KEYS}


def federated(fleet: Fleet) -> dict[str, Any]:
    """Per-client measures, summed, then every metric: dpledger's federated path."""
    off = fleet.offsets
    cm_rows = flam.confusion_matrix(
        fleet.y_true, fleet.y_pred, n_classes=fleet.n_classes, offsets=off
    )
    reg_rows = flam_regression.regression_measures(
        fleet.y_reg, fleet.y_reg_pred, offsets=off, shift=REGRESSION_SHIFT
    )
    cm, reg = secure_sum(cm_rows), secure_sum(reg_rows)
    return {"metrics": _metrics(cm, reg), "reg_rows": reg_rows, "sums": (cm, reg)}


def central_sklearn(y_true: Any, y_pred: Any, y: Any, y_hat: Any) -> dict[str, float]:
    """The same metrics by scikit-learn on the concatenated samples (one call per family)."""
    from sklearn import metrics as skm

    p, r, f1, _ = skm.precision_recall_fscore_support(y_true, y_pred, average="macro")
    return {
        "accuracy": float(skm.accuracy_score(y_true, y_pred)),
        "f1_macro": float(f1),
        "f1_weighted": float(skm.f1_score(y_true, y_pred, average="weighted")),
        "precision_macro": float(p),
        "recall_macro": float(r),
        "mcc": float(skm.matthews_corrcoef(y_true, y_pred)),
        "r2": float(skm.r2_score(y, y_hat)),
        "mse": float(skm.mean_squared_error(y, y_hat)),
    }


def _max_diff(a: dict[str, float], b: dict[str, float]) -> tuple[float, str]:
    return max((abs(a[k] - b[k]), k) for k in _KEYS)


def run(fleet: Fleet, sizes: Sizes) -> list[Row]:
    """Time both sides over the whole fleet; one row with ratio and max difference."""
    log(f"case 2: FLAM measures over {fleet.n_clients:,} clients")
    ours: dict[str, Any] = {}
    t_ours, _ = median_time(lambda: ours.update(federated(fleet)), sizes.repeats, warmup=1)
    cm, reg = ours["sums"]
    t0 = time.perf_counter()
    _metrics(cm, reg)
    t_post = time.perf_counter() - t0
    log(f"case 2: scikit-learn on {fleet.n_samples:,} concatenated samples")
    theirs: dict[str, float] = {}
    args = (fleet.y_true, fleet.y_pred, fleet.y_reg, fleet.y_reg_pred)
    t_sk, _ = median_time(lambda: theirs.update(central_sklearn(*args)), sizes.central_repeats)
    diff, worst = _max_diff(ours["metrics"], theirs)
    naive = {**ours["metrics"], **flam_regression.regression_metrics(ours["reg_rows"].sum(axis=0))}
    naive_diff, naive_worst = _max_diff(naive, theirs)
    ratio = t_sk / t_ours
    exact = diff <= 1e-12
    return [
        Row(
            case=2,
            measured=(
                "FLAM: acc, F1 macro/weighted, precision, recall, MCC, R2, MSE "
                f"({fleet.n_samples / 1e6:.0f}M samples)"
            ),
            dpledger=f"{fmt_seconds(t_ours)}, max |diff| {diff:.1e}",
            baseline=f"{fmt_seconds(t_sk)} (scikit-learn, central)",
            ratio_text=f"{ratio:.1f}x faster",
            target=">= 5x, <= 1e-12",
            met="yes" if ratio >= 5 and exact else "NO",
            ratio=ratio,
            values={
                "dpledger_seconds": t_ours,
                "sklearn_seconds": t_sk,
                "postprocessing_seconds": t_post,
                "max_abs_difference": diff,
                "max_abs_difference_naive_sum": naive_diff,
                **{f"dpledger_{k}": v for k, v in ours["metrics"].items()},
                **{f"sklearn_{k}": v for k, v in theirs.items()},
            },
            note=(
                f"median of {sizes.repeats} after a warm-up (dpledger) and {sizes.central_repeats} "
                "(scikit-learn: one run is ~1 min at full size); dpledger = per-client measures "
                "+ pairwise sum "
                f"+ metrics, the metrics alone take "
                f"{fmt_seconds(t_post)}. Largest difference on {worst}. Summing the client rows "
                f"with rows.sum(axis=0) instead gives {naive_diff:.1e} (on {naive_worst})"
            ),
        )
    ]

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

from benchmarks._harness import Row, Sizes, fmt_seconds, log, median_time, read_seconds
from dpledger.metrics import blocks, flam, flam_regression
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


def _metrics(
    confusion: npt.NDArray[np.float64], measures: npt.NDArray[np.float64]
) -> dict[str, float]:
    cls = flam.classification_metrics(confusion)
    reg = flam_regression.regression_metrics(measures)
    return {k: (cls | reg)[k] for k in _KEYS}


def federated(fleet: Fleet) -> dict[str, Any]:
    """Per-client measures, summed, then every metric: dpledger's federated path.

    The sums are what an aggregator adds, taken block by block over the clients
    (:func:`dpledger.metrics.blocks.group_sums`): no per-client rows for the whole fleet,
    pairwise float sums (the counts are integers, so theirs are exact). The per-client
    regression rows of the naive row-after-row sum are computed separately (not timed).
    """
    seg = blocks.client_segments(fleet.offsets, fleet.n_samples)
    cm = blocks.group_sums(
        flam.confusion_matrix, fleet.y_true, fleet.y_pred, offsets=seg, grid=None,
        n_classes=fleet.n_classes,
    )  # fmt: skip
    reg = blocks.group_sums(
        flam_regression.regression_measures, fleet.y_reg, fleet.y_reg_pred, offsets=seg,
        grid=None, shift=REGRESSION_SHIFT,
    )  # fmt: skip
    return {"metrics": _metrics(cm, reg), "sums": (cm, reg)}


def _naive_regression(fleet: Fleet) -> dict[str, float]:
    """The regression metrics from rows.sum(axis=0): per-client rows added one after another."""
    rows = flam_regression.regression_measures(
        fleet.y_reg, fleet.y_reg_pred, offsets=fleet.offsets, shift=REGRESSION_SHIFT
    )
    return flam_regression.regression_metrics(rows.sum(axis=0))


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
    t_ours, _ = median_time(lambda: ours.update(federated(fleet)), sizes.repeats)
    cm, reg = ours["sums"]
    t0 = time.perf_counter()
    _metrics(cm, reg)
    t_post = time.perf_counter() - t0
    log(f"case 2: scikit-learn on {fleet.n_samples:,} concatenated samples")
    theirs: dict[str, float] = {}
    args = (fleet.y_true, fleet.y_pred, fleet.y_reg, fleet.y_reg_pred)
    t_read = read_seconds(args, sizes.repeats)
    t_sk, _ = median_time(lambda: theirs.update(central_sklearn(*args)), sizes.central_repeats)
    diff, worst = _max_diff(ours["metrics"], theirs)
    naive = {**ours["metrics"], **_naive_regression(fleet)}
    naive_diff, naive_worst = _max_diff(naive, theirs)
    ratio = t_sk / t_ours
    exact = diff <= 1e-12
    return [
        Row(
            case=2,
            measured=(
                "FLAM: acc, F1 macro/weighted, precision, recall, MCC, R2, MSE "
                f"({fleet.n_samples / 1e6:.3g}M samples)"
            ),
            dpledger=f"{fmt_seconds(t_ours)}, max |diff| {diff:.1e}",
            baseline=f"{fmt_seconds(t_sk)} (scikit-learn, central)",
            ratio_text=f"{ratio:.1f}x faster",
            target=">= 20x, <= 1e-12",
            met="yes" if ratio >= 20 and exact else "NO",
            ratio=ratio,
            limit=f"{fmt_seconds(t_read)} (numpy sum)",
            limit_ratio=t_read / t_ours,
            values={
                "dpledger_seconds": t_ours,
                "sklearn_seconds": t_sk,
                "postprocessing_seconds": t_post,
                "read_pass_seconds": t_read,
                "max_abs_difference": diff,
                "max_abs_difference_naive_sum": naive_diff,
                **{f"dpledger_{k}": v for k, v in ours["metrics"].items()},
                **{f"sklearn_{k}": v for k, v in theirs.items()},
            },
            note=(
                f"median of {sizes.repeats} runs, no warm-up (dpledger) and "
                f"{sizes.central_repeats} (scikit-learn: one run is ~1 min at full size); "
                "dpledger = per-client measures summed block by block (pairwise) + metrics, "
                "the metrics alone take "
                f"{fmt_seconds(t_post)}. Largest difference on {worst}. Summing the client rows "
                f"with rows.sum(axis=0) instead gives {naive_diff:.1e} (on {naive_worst}); the "
                "limit is one numpy sum over the four label/target arrays (memory bandwidth)"
            ),
        )
    ]

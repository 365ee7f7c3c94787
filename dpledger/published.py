"""One ledger release, every derived metric: confusion matrices and regression measures.

A summed C×C confusion matrix is released as ONE ``vector_sum`` (one ε), and every
classification metric — accuracy, balanced accuracy, precision/recall/F1 (macro, micro,
weighted), MCC — is post-processing of that noisy matrix; likewise R², MSE, RMSE and MAE
from one release of the encoded regression measures. Negative noisy counts are clamped to
0 before metrics (``project_confusion`` / ``project_regression_measures``: documented,
never silent), and each metric's interval is propagated from the public noise scale.
None of this costs further ε.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from dpledger.approval import ReleaseRequest
from dpledger.ledger import Ledger, Release
from dpledger.metrics.flam import (
    Labels,
    classification_metrics,
    flatten_confusion,
    project_confusion,
    project_regression_measures,
    regression_metrics,
)
from dpledger.metrics.release import VectorSumCodec
from dpledger.metrics.uncertainty import (
    Interval,
    Method,
    classification_intervals,
    regression_intervals,
)

__all__ = ["DerivedRelease", "release_confusion", "release_regression"]


@dataclass(frozen=True)
class DerivedRelease:
    """A committed release and the metrics derived from it, each with its interval."""

    release: Release
    metrics: MappingProxyType[str, float]
    intervals: MappingProxyType[str, Interval]
    projection: str  # what was done to infeasible noisy values before the metrics

    def table(self) -> str:
        """Aligned ``metric  value  [low, high]`` lines, ready to paste into a review."""
        width = max(len(k) for k in self.metrics)
        level = next(iter(self.intervals.values())).level if self.intervals else 0.95
        head = (
            f"entry {self.release.entry_id}: {self.release.request.metric} "
            f"({self.release.unit} {self.release.epsilon}), {level:.0%} intervals"
        )
        iv = self.intervals
        rows = [
            f"  {k:<{width}}  {v: .4f}  [{iv[k].low: .4f}, {iv[k].high: .4f}]"
            for k, v in self.metrics.items()
        ]
        return "\n".join([head, *rows, f"  ({self.projection})"])


def release_confusion(
    ledger: Ledger,
    request: ReleaseRequest,
    summed_confusion: npt.ArrayLike,
    *,
    labels: Labels = "all",
    level: float = 0.95,
    method: Method = "delta",
) -> DerivedRelease:
    """Release a summed (C, C) confusion matrix once; derive all classification metrics.

    The policy's metric must be a ``vector_sum`` of dimension C² whose cap bounds a
    client's (L1-capped) confusion counts. ``labels="all"`` averages macro metrics over
    all C classes: after noise almost every class looks present, so "all" is stable.
    """
    flat = flatten_confusion(np.asarray(summed_confusion, dtype=np.float64))
    rel = ledger.release(request, flat)
    projected = project_confusion(rel.noisy_sum)
    metrics = classification_metrics(projected, labels=labels)
    intervals = classification_intervals(
        rel.noisy_sum, rel.scale, labels=labels, level=level, method=method,
        distribution=rel.facts.mechanism,
    )  # fmt: skip
    return DerivedRelease(
        rel,
        MappingProxyType(dict(metrics)),
        MappingProxyType(dict(intervals)),
        "negative noisy counts clamped to 0 before the metrics",
    )


def release_regression(
    ledger: Ledger,
    request: ReleaseRequest,
    summed_encoded: npt.ArrayLike,
    codec: VectorSumCodec,
    *,
    level: float = 0.95,
    method: Method = "delta",
) -> DerivedRelease:
    """Release summed, codec-encoded regression measures once; derive R², MSE, RMSE, MAE.

    ``summed_encoded`` is the sum of clients' ``codec.encode(regression_measures(...))``;
    the policy's metric is a ``vector_sum`` of dimension 5 with ``cap = codec.cap``.
    """
    rel = ledger.release(request, np.asarray(summed_encoded, dtype=np.float64))
    measures = project_regression_measures(codec.decode(rel.noisy_sum))
    metrics = regression_metrics(measures)
    intervals = regression_intervals(
        rel.noisy_sum, codec, rel.scale, level=level, method=method,
        distribution=rel.facts.mechanism,
    )  # fmt: skip
    return DerivedRelease(
        rel,
        MappingProxyType(dict(metrics)),
        MappingProxyType(dict(intervals)),
        "noisy sums clamped to the feasible set (Σr², Σ|r|, n ≥ 0; Σ(y−c)² ≥ (Σ(y−c))²/n)",
    )

"""The client side: bounded contributions, and the server-side recombination of their sums.

``spatial`` holds the spatial metric set, ``flam`` and ``flam_regression`` the FLAM
aggregatable measures, ``codec`` one L1-capped vector from measures of different scales,
``declarations`` which function computes each releasable metric from which data,
``secure_sum`` the exact sum the aggregator owes the ledger (and a fixed-point stand-in),
and ``uncertainty`` the estimates, intervals and unusable flags of metrics derived from
a noisy release. This package imports only numpy, :mod:`dpledger.errors` and
:mod:`dpledger.types`: it runs on devices and in federated clients, without OpenDP, the
policy machinery or the ledger.
"""

from dpledger.metrics._slack import interval_scales
from dpledger.metrics.codec import VectorSumCodec
from dpledger.metrics.declarations import (
    DECLARATIONS,
    FLAM_DECLARATIONS,
    SPATIAL_DECLARATIONS,
    Bounds,
    MetricDeclaration,
)
from dpledger.metrics.flam import (
    CLASSIFICATION_KEYS,
    classification_metrics,
    classification_metrics_rows,
    confusion_matrix,
    flatten_confusion,
    participant_weighted_average,
    participant_weighted_classification,
    participant_weighted_regression,
    project_confusion,
    unflatten_confusion,
)
from dpledger.metrics.flam_regression import (
    REGRESSION_KEYS,
    REGRESSION_MEASURES,
    project_regression_measures,
    regression_codec,
    regression_measures,
    regression_metrics,
    regression_metrics_rows,
)
from dpledger.metrics.secure_sum import FixedPoint, exact_sum
from dpledger.metrics.spatial import (
    ALONG_RMSE_FLOOR,
    POOLED_MEASURES,
    along_across_ratio,
    calibration_gap,
    clipped_loss,
    coverage,
    distinct_cells,
    error_histogram,
    error_magnitude,
    mean_calibration_gaps,
    pooled_along_across_ratio,
    pooled_along_across_ratio_from_sums,
    pooled_ratio_codec,
)
from dpledger.metrics.uncertainty import (
    Guard,
    Interval,
    classification_batch,
    classification_estimates,
    classification_intervals,
    derived_interval,
    derived_intervals,
    mean_over_noisy_count,
    ratio_interval,
    regression_batch,
    regression_estimates,
    regression_intervals,
)

__all__ = [
    "ALONG_RMSE_FLOOR",
    "CLASSIFICATION_KEYS",
    "DECLARATIONS",
    "FLAM_DECLARATIONS",
    "POOLED_MEASURES",
    "REGRESSION_KEYS",
    "REGRESSION_MEASURES",
    "SPATIAL_DECLARATIONS",
    "Bounds",
    "FixedPoint",
    "Guard",
    "Interval",
    "MetricDeclaration",
    "VectorSumCodec",
    "along_across_ratio",
    "calibration_gap",
    "classification_batch",
    "classification_estimates",
    "classification_intervals",
    "classification_metrics",
    "classification_metrics_rows",
    "clipped_loss",
    "confusion_matrix",
    "coverage",
    "derived_interval",
    "derived_intervals",
    "distinct_cells",
    "error_histogram",
    "error_magnitude",
    "exact_sum",
    "flatten_confusion",
    "interval_scales",
    "mean_calibration_gaps",
    "mean_over_noisy_count",
    "participant_weighted_average",
    "participant_weighted_classification",
    "participant_weighted_regression",
    "pooled_along_across_ratio",
    "pooled_along_across_ratio_from_sums",
    "pooled_ratio_codec",
    "project_confusion",
    "project_regression_measures",
    "ratio_interval",
    "regression_batch",
    "regression_codec",
    "regression_estimates",
    "regression_intervals",
    "regression_measures",
    "regression_metrics",
    "regression_metrics_rows",
    "unflatten_confusion",
]

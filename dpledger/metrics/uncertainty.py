"""Error bars on metrics derived from a noisy release, by propagating the public noise scale.

A released vector is ``x̂ = x + η`` with η Laplace(b) (or Gaussian(σ)) per coordinate,
b public. A derived metric f(x̂) (macro-F1 from a noisy confusion matrix, R² from
noisy regression measures, …) is estimated on the *unclamped* release and gets an
interval at a confidence level; when noise swamps it (a denominator that is not
clearly positive) it is flagged unusable, with its whole range as the interval and a
reason in words (:attr:`Interval.reason`). :attr:`Interval.method` names the method
actually used for that release. The methods, the unusable rule and their measured
coverage are documented in :mod:`dpledger.metrics._assemble`,
:mod:`dpledger.metrics._flam_intervals` and :mod:`dpledger.metrics._regression_intervals`:

* ``"delta"`` (default, deterministic): f(x̂) ± q·se, se from the gradient at x̂ and the
  public noise s.d.; q is z for Gaussian noise and the Cornish–Fisher quantile of the
  linearised Laplace noise (never below z); accuracy-like ratios use Fieller's interval,
  R² a Fieller interval profiled over the unknown mean, RMSE the square root of MSE's;
  an interval whose denominator only just passed its guard is widened for that selection
  ("selection-adjusted"), and a per-class average bounds the classes within the noise.
* ``"monte_carlo"``: the percentile interval of f over noise redrawn at the public scale
  with ``numpy.random.default_rng`` seeded by ``seed`` and the released values (each
  release its own redraws; the same release and seed, the same interval; at least
  1,000 ``draws``); for the classification metrics it is
  shifted by twice the redraws' median bias (:mod:`dpledger.metrics._flam_monte_carlo`:
  the plain percentile interval doubles a per-class average's bias) and keeps every
  guard and class bound of the delta method; for regression it is the plain percentile
  interval of MSE, RMSE and MAE, and R² keeps its delta-method interval (its redraw
  percentiles lost the selection adjustment and the handling of a missing lower end,
  and covered 0.02–0.89 among published releases near the noise: review s30). This
  randomness is post-processing of public quantities for the error bar, never release
  noise (release noise is OpenDP's).

:func:`mean_over_noisy_count` is a scalar metric's mean over the clients who reported when
their number is itself a noisy release (``add_remove``): Fieller's interval for the ratio
of two independent noisy releases, flagged when the count is not clearly positive.

Everything here reads only the released vector and its public scale, so it costs no ε.
:func:`classification_batch` and :func:`regression_batch` are the vectorised forms
(R releases at once) that the coverage tests and notebook 04 measure.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.metrics._assemble import Batch, Estimates, batch_intervals, estimates, to_intervals
from dpledger.metrics._flam_intervals import CLASSIFICATION_RANGES, classification_batch
from dpledger.metrics._intervals import Guard, Interval, RowsFn, check_options, noise_std
from dpledger.metrics._ratio import MEAN, RATIO, linear_ratio_batch, mean_over_noisy_count_batch
from dpledger.metrics._reading import FloatArray, as_real, real_limit, real_pair
from dpledger.metrics._regression_intervals import (
    check_regression_codec,
    regression_batch,
    regression_ranges,
)
from dpledger.metrics._segments import as_finite
from dpledger.metrics.codec import VectorSumCodec
from dpledger.types import IntervalMethod, Labels, MechanismKind

__all__ = [
    "CLASSIFICATION_RANGES",
    "Batch",
    "Estimates",
    "Guard",
    "Interval",
    "check_options",
    "check_regression_codec",
    "classification_batch",
    "classification_estimates",
    "classification_intervals",
    "derived_interval",
    "derived_intervals",
    "mean_over_noisy_count",
    "mean_over_noisy_count_batch",
    "ratio_interval",
    "regression_batch",
    "regression_estimates",
    "regression_intervals",
    "regression_ranges",
]


def derived_intervals(
    f_rows: RowsFn,
    released: npt.ArrayLike,
    scale: float | npt.ArrayLike,
    *,
    level: float = 0.95,
    method: IntervalMethod = "delta",
    distribution: MechanismKind = "laplace",
    draws: int = 2000,
    seed: int = 0,
    ranges: Mapping[str, tuple[float, float]] | None = None,
    step: float = 1e-3,
    denominators: RowsFn | None = None,
    guards: Mapping[str, Sequence[Guard]] | None = None,
) -> dict[str, Interval]:
    """Intervals for several metrics computed together by a vectorised ``f_rows``.

    ``f_rows`` maps a (k, d) stack of released-vector candidates to a dict of (k,)
    metric arrays. ``scale`` is the public noise scale (Laplace b or Gaussian σ) of
    each released coordinate. ``step`` is the finite-difference step as a fraction of
    each coordinate's noise s.d. ``denominators`` (same calling convention) names the
    quantities that ``guards[metric]`` require to be clearly positive; a metric whose
    guard fails is unusable (whole range of ``ranges[metric]``, with a reason).
    """
    x = as_finite(as_real(released, "released").reshape(-1), "released").reshape(1, -1)
    if x.size == 0:
        raise InvalidInput("released must hold at least one coordinate: pass the released vector")
    std = noise_std(scale, x.shape[1], distribution)
    batch = batch_intervals(
        f_rows, x, std, level=level, method=method, distribution=distribution,
        ranges=ranges or {}, denominators=denominators, guards=guards, draws=draws,
        seed=seed, step=step,
    )  # fmt: skip
    return to_intervals(batch, level)


def derived_interval(
    f: Callable[[FloatArray], float],
    released: npt.ArrayLike,
    scale: float | npt.ArrayLike,
    *,
    level: float = 0.95,
    method: IntervalMethod = "delta",
    distribution: MechanismKind = "laplace",
    draws: int = 2000,
    seed: int = 0,
    bounds: tuple[float, float] = (-math.inf, math.inf),
    denominator: Callable[[FloatArray], float] | None = None,
    denominator_name: str = "denominator",
    denominator_max: float = math.inf,
) -> Interval:
    """Interval for one scalar metric ``f(released)`` (f called once per evaluation point).

    E.g. ``f = lambda z: pooled_along_across_ratio_from_sums(codec.decode(z))``. With
    ``denominator`` (e.g. ``lambda z: z[-1]`` for a share of a noisy count) the metric is
    unusable when that denominator is not clearly positive (see :class:`Guard`).

    The delta method assumes f nearly linear over the noise. Where f bends there — a
    square root of a sum within the noise, as in that pooled ratio √(A/B) with
    A = ΣΣacross² under ~20 noise scales — pass ``method="monte_carlo"``: at ratio 0.5
    the delta interval covered 0.74–0.86 there, the redraws 0.942–0.950 (outside audit
    stats3, S1; stats25: 3,000 releases per cell, both laws). A per-release switch to
    Monte Carlo, or a flag, where f leaves its straight line within the interval selects
    on the noise: in those cells the switch covered 0.66–0.92 and the flag 0.25–0.89
    among the releases it kept (stats25), so the method is the caller's choice, made
    before the release. For that pooled ratio use
    :func:`~dpledger.metrics.spatial.pooled_ratio_interval` (the square root of A/B's
    conditional Fieller interval: 0.943–0.978), and for a ratio of fixed linear
    combinations (a share) :func:`ratio_interval`.
    """

    if not callable(f) or (denominator is not None and not callable(denominator)):
        raise InvalidInput(
            "f and denominator must be functions of the released vector, got "
            f"{type(f).__name__} and {type(denominator).__name__}"
        )
    # the metric's range: ±inf allowed; low = high a degenerate range (its interval unusable)
    bounds = real_pair(bounds, "bounds", finite=False, strict=False)
    denominator_max = real_limit(denominator_max, "denominator_max")
    denominator_name = _name(denominator_name)

    def rows(stack: FloatArray) -> dict[str, FloatArray]:
        return {"f": np.asarray([_one_value(f(row), "f") for row in stack], dtype=np.float64)}

    dens: RowsFn | None = None
    guards: dict[str, tuple[Guard, ...]] | None = None
    if denominator is not None:
        den = denominator

        def dens(stack: FloatArray) -> dict[str, FloatArray]:
            values = [_one_value(den(row), "denominator") for row in stack]
            return {denominator_name: np.asarray(values, dtype=np.float64)}

        guards = {"f": (Guard(denominator_name, denominator_max),)}
    return derived_intervals(
        rows, released, scale, level=level, method=method, distribution=distribution,
        draws=draws, seed=seed, ranges={"f": bounds}, denominators=dens, guards=guards,
    )["f"]  # fmt: skip


def ratio_interval(
    released: npt.ArrayLike,
    scale: float | npt.ArrayLike,
    num: npt.ArrayLike,
    den: npt.ArrayLike,
    *,
    bounds: tuple[float, float],
    level: float = 0.95,
    distribution: MechanismKind = "laplace",
    denominator_name: str = "denominator",
    denominator_max: float = math.inf,
) -> Interval:
    """Interval for the ratio (num·x̂)/(den·x̂) of one release x̂, with fixed weights.

    E.g. a histogram bucket's share (``num`` the bucket's indicator, ``den`` all ones) or
    a bucket's mean (two indicators). As accuracy's: Fieller's interval, conditional on
    the denominator's guard where it only just passed; unusable when the denominator is
    not clearly positive (``denominator_max``: a public bound on its true value). Prefer
    it to :func:`derived_interval`'s delta method for such ratios: that under-covered a
    dominant share (0.886–0.938 among published releases; stats25, B1).
    """
    check_options(level, "delta", distribution=distribution)
    guard = Guard(_name(denominator_name), real_limit(denominator_max, "denominator_max"))
    x = as_finite(as_real(released, "released"), "released", ndim=1)
    if x.size == 0:
        raise InvalidInput("released must hold at least one coordinate: pass the released vector")
    w = [as_finite(_weights(v, name, x.shape[0]), name) for v, name in ((num, "num"), (den, "den"))]
    batch = linear_ratio_batch(
        x, noise_std(scale, x.shape[0], distribution), w[0], w[1], bounds=bounds,
        guard=guard, level=level, distribution=distribution,
    )  # fmt: skip
    return to_intervals(batch, level)[RATIO]


def _one_value(value: object, name: str) -> float:
    """What ``f`` or ``denominator`` returned, as one real number (NaN or ±inf allowed: the
    metric is then flagged); else InvalidInput. ``np.asarray`` read None as NaN (flagged
    with a reason about denominators), and an array, text, a complex or an integer past a
    double reached numpy's or float()'s ValueError, TypeError or OverflowError (review 39)."""
    v = value.item() if isinstance(value, np.ndarray) and value.size == 1 else value
    if isinstance(v, np.generic) and not isinstance(v, np.bool_ | np.complexfloating):
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, numbers.Real | Decimal):  # Fraction too
        raise InvalidInput(
            f"{name} must return one real number per released vector, got "
            f"{type(value).__name__} {shown(value, 40)}"
        )
    if isinstance(v, Decimal) and v.is_nan():  # float() raises for a signalling NaN
        return math.nan
    try:
        return float(v)
    except OverflowError:  # an integer or Fraction past a double (a Decimal reads as ±inf)
        return math.inf if Fraction(v) > 0 else -math.inf  # type: ignore[arg-type]


def _name(text: object) -> str:
    """A denominator's name (it labels the reason a metric is unusable): text."""
    if not isinstance(text, str):
        raise InvalidInput(f"denominator_name must be text, got {shown(text, 40)}")
    return text


def _weights(values: npt.ArrayLike, name: str, d: int) -> FloatArray:
    """``values`` as ``d`` real weights (one number is broadcast to all; booleans, an
    indicator, as 0/1); else InvalidInput."""
    v = as_real(values, name, flags=True)
    if v.ndim > 1 or v.size not in (1, d):
        raise InvalidInput(
            f"{name} must be one weight per coordinate of released ({d}), got shape {v.shape}"
        )
    return np.broadcast_to(v, (d,))


def classification_estimates(
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
) -> Estimates:
    """Point estimates and intervals of every classification metric of one noisy release.

    ``released`` is the noisy (C, C) matrix or its C² flattening, NOT clamped; estimates
    are plug-ins on it, clipped to each metric's range. ``max_total`` is a public bound
    on the true total count (cohort × cap per client); pass it so a cohort too small to
    measure anything is always flagged. ``labels="all"`` is the stable choice under noise.
    """
    flat = as_finite(as_real(released, "released").reshape(-1), "released")
    batch = classification_batch(
        flat.reshape(1, -1), scale, labels=labels, level=level, method=method,
        distribution=distribution, draws=draws, seed=seed, max_total=max_total,
    )  # fmt: skip
    return estimates(batch, level)


def classification_intervals(
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
) -> dict[str, Interval]:
    """Intervals for every classification metric of a noisy confusion-matrix release.

    As :func:`classification_estimates` (which also returns the point estimates).
    """
    return classification_estimates(
        released, scale, labels=labels, level=level, method=method,
        distribution=distribution, draws=draws, seed=seed, max_total=max_total,
    )[1]  # fmt: skip


def regression_estimates(
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
) -> Estimates:
    """Point estimates and intervals of R², MSE, RMSE, MAE of one noisy encoded release.

    ``released`` is in encoded units (what the ledger noised, with scale ``scale``) and
    ``codec`` the :func:`~dpledger.metrics.flam.regression_codec` that encoded it.
    ``cohort`` (public) keeps a cohort too small to measure anything always flagged, and
    under Laplace noise bounds a one-sided R² (without it, that R² is "≤ 1").
    """
    x = as_finite(as_real(released, "released").reshape(-1), "released")
    batch = regression_batch(
        x.reshape(1, -1), codec, scale, level=level, method=method, distribution=distribution,
        draws=draws, seed=seed, cohort=cohort,
    )  # fmt: skip
    return estimates(batch, level)


def regression_intervals(
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
) -> dict[str, Interval]:
    """Intervals for R², MSE, RMSE, MAE (see :func:`regression_estimates`)."""
    return regression_estimates(
        released, codec, scale, level=level, method=method, distribution=distribution,
        draws=draws, seed=seed, cohort=cohort,
    )[1]  # fmt: skip


def mean_over_noisy_count(
    noisy_sum: float,
    sum_scale: float,
    noisy_count: float,
    count_scale: float,
    *,
    bounds: tuple[float, float],
    max_count: float,
    level: float = 0.95,
    sum_distribution: MechanismKind = "laplace",
    count_distribution: MechanismKind = "laplace",
) -> tuple[float, Interval]:
    """The mean over the clients who reported, from a noisy sum and a noisy count of them.

    ``noisy_sum`` is the released sum of the reporters' clipped values (metric units,
    noise scale ``sum_scale``), ``noisy_count`` the released number of the same reporters
    (clients, noise scale ``count_scale``), with independent noise; ``bounds`` the
    metric's clip range, ``max_count`` a public upper bound on the count (the planned
    cohort). Returns the estimate (clipped to ``bounds``) and its interval at ``level``:
    Fieller's, conditional on the count's guard where it only just passed; unusable (the
    whole range, with a reason) when the count is not clearly positive
    (:func:`~dpledger.metrics._ratio.mean_over_noisy_count_batch`). Post-processing.
    """
    for name, value in (("noisy_sum", noisy_sum), ("noisy_count", noisy_count)):
        if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
            raise InvalidInput(
                f"{name} must be one real number (one release; call once per release), "
                f"got {shown(value, 60)}"
            )
    batch = mean_over_noisy_count_batch(
        [noisy_sum], sum_scale, [noisy_count], count_scale, bounds=bounds,
        max_count=max_count, level=level, sum_distribution=sum_distribution,
        count_distribution=count_distribution,
    )  # fmt: skip
    values, intervals = estimates(batch, level)
    return values[MEAN], intervals[MEAN]

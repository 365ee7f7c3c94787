"""Error bars on metrics derived from a noisy release, by propagating the public noise scale.

A released vector is ``x̂ = x + η`` with η Laplace(b) (or Gaussian(σ)) per coordinate,
b public. A derived metric f(x̂) (macro-F1 from a noisy confusion matrix, R² from
noisy regression measures, …) gets an interval at a confidence level:

* ``"delta"`` (default, deterministic): f(x̂) ± z·sqrt(Σ (∂f/∂x_i)²·Var η_i), with
  the gradient by central differences at x̂ and Var η_i = 2b_i² (Laplace) or σ_i².
  A normal approximation: when one Laplace coordinate dominates, a 95% bar covers
  ≈ 93.7% (Laplace tails are heavier); ``"monte_carlo"`` keeps the noise's shape.
* ``"monte_carlo"``: redraw noise at the public scale around x̂ with a seeded
  ``numpy.random.default_rng(seed)`` and take the basic-bootstrap interval
  ``[2f̂ − q_hi, 2f̂ − q_lo]``. This randomness is post-processing of public
  quantities for the error bar, never release noise (release noise is OpenDP's).

Both are post-processing: they read only the released vector and its public scale,
so they cost no ε. Intervals are clipped to the metric's known range.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

import numpy as np
import numpy.typing as npt

from dpledger.errors import InvalidInput
from dpledger.metrics._segments import FloatArray, as_finite
from dpledger.metrics.flam import (
    CLASSIFICATION_KEYS,
    Labels,
    classification_metrics_rows,
    project_confusion,
    project_regression_measures,
    regression_metrics_rows,
)
from dpledger.metrics.release import VectorSumCodec

__all__ = [
    "Distribution",
    "Interval",
    "Method",
    "classification_intervals",
    "derived_interval",
    "derived_intervals",
    "regression_intervals",
]

Distribution = Literal["laplace", "gaussian"]
Method = Literal["delta", "monte_carlo"]
RowsFn = Callable[[FloatArray], Mapping[str, FloatArray]]

_BLOCK = 256
_CLASSIFICATION_RANGE = (0.0, 1.0)
_MCC_RANGE = (-1.0, 1.0)
_REGRESSION_RANGES = {"r2": (-math.inf, 1.0)}


@dataclass(frozen=True)
class Interval:
    """A confidence interval ``[low, high]`` at ``level`` for a derived metric."""

    low: float
    high: float
    level: float
    method: str

    def __post_init__(self) -> None:
        if not 0.0 < self.level < 1.0:
            raise InvalidInput(f"level must lie in (0, 1), got {self.level!r}")
        if self.low > self.high:
            raise InvalidInput(f"interval low {self.low!r} > high {self.high!r}")

    @property
    def half_width(self) -> float:
        """Half the interval's width (the ± of a symmetric bar)."""
        return 0.5 * (self.high - self.low)

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in the closed interval."""
        return self.low <= value <= self.high


def _noise_std(scale: npt.ArrayLike, d: int, distribution: Distribution) -> FloatArray:
    try:
        b = as_finite(np.broadcast_to(np.asarray(scale, dtype=np.float64), (d,)), "scale")
    except ValueError as e:
        if isinstance(e, InvalidInput):
            raise
        raise InvalidInput(f"scale must be a number or one per coordinate ({d}): {e}") from e
    if np.any(b < 0):
        raise InvalidInput("noise scale must be ≥ 0")
    if distribution == "laplace":
        return math.sqrt(2.0) * b
    if distribution == "gaussian":
        return b
    raise InvalidInput(f"distribution must be 'laplace' or 'gaussian', got {distribution!r}")


def _z(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise InvalidInput(f"level must lie in (0, 1), got {level!r}")
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def derived_intervals(
    f_rows: RowsFn,
    released: npt.ArrayLike,
    scale: float | npt.ArrayLike,
    *,
    level: float = 0.95,
    method: Method = "delta",
    distribution: Distribution = "laplace",
    draws: int = 2000,
    seed: int = 0,
    ranges: Mapping[str, tuple[float, float]] | None = None,
    step: float = 1e-3,
) -> dict[str, Interval]:
    """Intervals for several metrics computed together by a vectorised ``f_rows``.

    ``f_rows`` maps a (k, d) stack of released-vector candidates to a dict of (k,)
    metric arrays. ``scale`` is the public noise scale (Laplace b or Gaussian σ)
    of each released coordinate. ``step`` is the finite-difference step as a
    fraction of each coordinate's noise standard deviation.
    """
    x = as_finite(released, "released").reshape(-1)
    d = x.shape[0]
    std = _noise_std(scale, d, distribution)
    z = _z(level)
    ranges = ranges or {}
    if method == "delta":
        h = step * np.where(std > 0, std, 1.0)
        center: dict[str, float] = {}
        sq: dict[str, float] = {}
        for start in range(0, d, _BLOCK):  # blocks of coordinates bound the memory, O(_BLOCK·d)
            idx = np.arange(start, min(d, start + _BLOCK))
            k = idx.shape[0]
            points = np.repeat(x[None, :], 2 * k + 1, axis=0)
            points[1 + np.arange(k), idx] += h[idx]
            points[1 + k + np.arange(k), idx] -= h[idx]
            vals = f_rows(points)  # one vectorised call: centre, k steps up, k steps down
            for key, v in vals.items():
                center[key] = float(v[0])
                grad = (v[1 : k + 1] - v[k + 1 :]) / (2.0 * h[idx])
                sq[key] = sq.get(key, 0.0) + float(np.sum((grad * std[idx]) ** 2))
        out: dict[str, Interval] = {}
        for key, total in sq.items():
            f0, half = center[key], z * math.sqrt(total)
            out[key] = _clipped(f0 - half, f0 + half, level, method, key, ranges)
        return out
    if method == "monte_carlo":
        if isinstance(draws, bool) or not isinstance(draws, int) or draws < 10:
            raise InvalidInput(f"draws must be an integer ≥ 10, got {draws!r}")
        rng = np.random.default_rng(seed)
        if distribution == "laplace":
            noise = rng.laplace(0.0, std / math.sqrt(2.0), size=(draws, d))
        else:
            noise = rng.normal(0.0, std, size=(draws, d))
        centre_rows = f_rows(x[None, :])
        sims = f_rows(x + noise)
        alpha = (1.0 - level) / 2.0
        out = {}
        for key, v in sims.items():
            f0 = float(centre_rows[key][0])
            if np.isnan(f0) or np.all(np.isnan(v)):
                out[key] = _clipped(math.nan, math.nan, level, method, key, ranges)
                continue
            q_lo, q_hi = np.nanquantile(v, [alpha, 1.0 - alpha])
            out[key] = _clipped(
                2 * f0 - float(q_hi), 2 * f0 - float(q_lo), level, method, key, ranges
            )
        return out
    raise InvalidInput(f"method must be 'delta' or 'monte_carlo', got {method!r}")


def _clipped(
    low: float,
    high: float,
    level: float,
    method: str,
    key: str,
    ranges: Mapping[str, tuple[float, float]],
) -> Interval:
    lo_r, hi_r = ranges.get(key, (-math.inf, math.inf))
    if not (math.isnan(low) or math.isnan(high)):
        low, high = min(max(low, lo_r), hi_r), max(min(high, hi_r), lo_r)
    return Interval(low, high, level, method)


def derived_interval(
    f: Callable[[FloatArray], float],
    released: npt.ArrayLike,
    scale: float | npt.ArrayLike,
    *,
    level: float = 0.95,
    method: Method = "delta",
    distribution: Distribution = "laplace",
    draws: int = 2000,
    seed: int = 0,
    bounds: tuple[float, float] = (-math.inf, math.inf),
) -> Interval:
    """Interval for one scalar metric ``f(released)`` (f called once per evaluation point).

    E.g. ``f = lambda z: pooled_along_across_ratio_from_sums(codec.decode(z))``.
    """

    def rows(stack: FloatArray) -> dict[str, FloatArray]:
        return {"f": np.asarray([f(row) for row in stack], dtype=np.float64)}

    return derived_intervals(
        rows,
        released,
        scale,
        level=level,
        method=method,
        distribution=distribution,
        draws=draws,
        seed=seed,
        ranges={"f": bounds},
    )["f"]


def classification_intervals(
    released: npt.ArrayLike,
    scale: float | npt.ArrayLike,
    *,
    labels: Labels = "present",
    level: float = 0.95,
    method: Method = "delta",
    distribution: Distribution = "laplace",
    draws: int = 2000,
    seed: int = 0,
) -> dict[str, Interval]:
    """Intervals for every classification metric of a noisy confusion-matrix release.

    ``released`` is the noisy (C, C) matrix or its C² flattening; each candidate is
    projected (negatives clamped to 0) before metrics, as the point estimate should be.
    """
    flat = as_finite(np.asarray(released, dtype=np.float64).reshape(-1), "released")
    project_confusion(flat)  # shape check: C² entries

    def rows(stack: FloatArray) -> Mapping[str, FloatArray]:
        return classification_metrics_rows(project_confusion(_square(stack)), labels=labels)

    ranges = {k: _CLASSIFICATION_RANGE for k in CLASSIFICATION_KEYS}
    ranges["mcc"] = _MCC_RANGE
    return derived_intervals(
        rows,
        flat,
        scale,
        level=level,
        method=method,
        distribution=distribution,
        draws=draws,
        seed=seed,
        ranges=ranges,
    )


def _square(stack: FloatArray) -> FloatArray:
    c = math.isqrt(stack.shape[-1])
    return stack.reshape(*stack.shape[:-1], c, c)


def regression_intervals(
    released: npt.ArrayLike,
    codec: VectorSumCodec,
    scale: float | npt.ArrayLike,
    *,
    level: float = 0.95,
    method: Method = "delta",
    distribution: Distribution = "laplace",
    draws: int = 2000,
    seed: int = 0,
) -> dict[str, Interval]:
    """Intervals for R², MSE, RMSE, MAE from a noisy encoded regression release.

    ``released`` is in encoded units (what the ledger noised, with scale ``scale``);
    each candidate is decoded with ``codec`` and projected before computing metrics.
    """

    def rows(stack: FloatArray) -> Mapping[str, FloatArray]:
        return regression_metrics_rows(project_regression_measures(codec.decode(stack)))

    ranges = {"r2": _REGRESSION_RANGES["r2"], "mse": (0.0, math.inf)}
    ranges |= {"rmse": (0.0, math.inf), "mae": (0.0, math.inf)}
    return derived_intervals(
        rows,
        released,
        scale,
        level=level,
        method=method,
        distribution=distribution,
        draws=draws,
        seed=seed,
        ranges=ranges,
    )

"""Interval primitives: the Interval value, guards, noise s.d., quantiles, linearisation.

A released vector is ``x̂ = x + η``, η independent per coordinate with a PUBLIC law:
Laplace(b) (pure DP) or Gaussian(σ) (zCDP). A derived metric f(x̂) is estimated by the
plug-in f(x̂) on the *unclamped* release (clamping negative noisy counts to 0 biases
every near-zero cell upward). Its noise is linearised — weights w_i = ∂f/∂x_i · sd_i,
by central differences here (:func:`linearize`) or analytically for confusion matrices
(:mod:`._confusion_linear`) — and the quantile of the linearised noise Σ w_i·η_i is
the normal z for Gaussian noise and, for Laplace noise, ``max(z, z + γ₂/24·(z³ − 3z))``
(Cornish–Fisher with the sum's excess kurtosis γ₂ = 3·Σw⁴/(Σw²)²): a bare z
under-covers when one Laplace coordinate dominates (93.7% for a 95% bar); this quantile
covers 94.99–95.3% for every weight mix measured, never more than 2.3% wider than the
exact one at 95%. :func:`fieller` is the exact-for-Gaussian interval of a ratio.

How these combine into published intervals (guards, selection adjustment, ranges) is
:mod:`._assemble`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.metrics._reading import FloatArray, as_real
from dpledger.metrics._segments import as_finite
from dpledger.types import MechanismKind

__all__ = [
    "MAX_DRAWS",
    "MIN_DRAWS",
    "Guard",
    "Interval",
    "RowsFn",
    "check_options",
    "fieller",
    "fieller_spread",
    "linearize",
    "method_name",
    "noise_std",
    "quantile_factor",
    "z_value",
]

RowsFn = Callable[[FloatArray], Mapping[str, FloatArray]]
BoolArray = npt.NDArray[np.bool_]

_BLOCK_FLOATS = 1 << 22  # points evaluated per vectorised call: bounds memory at ~32 MB


@dataclass(frozen=True)
class Interval:
    """A confidence interval ``[low, high]`` at ``level`` for a derived metric.

    ``reason`` is None for a usable interval. When it is set the metric is UNUSABLE
    (noise swamps it): ``[low, high]`` is then the metric's whole range and ``reason``
    says why in words. Do not publish the point value of an unusable metric. A usable
    interval with ``low = -inf`` is :attr:`one_sided` (R² whose Σ(y−ȳ)² is too near the
    noise to bound it below): publish "≤ high", not the point value.
    """

    low: float
    high: float
    level: float
    method: str
    reason: str | None = None

    def __post_init__(self) -> None:
        z_value(self.level)  # the one home of what a valid level is
        if self.low > self.high:
            raise InvalidInput(f"interval low {self.low!r} > high {self.high!r}")
        if self.reason is not None and not self.reason:
            raise InvalidInput("an unusable interval needs a non-empty reason")

    @property
    def usable(self) -> bool:
        """False when noise swamps the metric (see :attr:`reason`)."""
        return self.reason is None

    @property
    def one_sided(self) -> bool:
        """A usable upper bound only (``low`` is −inf): quote "≤ high", not the value."""
        return self.usable and self.low == -math.inf and math.isfinite(self.high)

    @property
    def half_width(self) -> float:
        """Half the interval's width (the ± of a symmetric bar; inf when one-sided)."""
        return 0.5 * (self.high - self.low)

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in the closed interval."""
        return self.low <= value <= self.high


@dataclass(frozen=True)
class Guard:
    """A denominator that must be clearly positive for a metric to be usable.

    ``key`` names it in the denominators' rows; ``maximum`` is a public upper bound on
    its true value (``inf`` when none is known). The denominator is clearly positive when
    ``min(D̂, maximum) > factor · q · se`` (q, se its own noise quantile and s.e.).
    """

    key: str
    maximum: float = math.inf
    factor: float = 1.0


def noise_std(scale: npt.ArrayLike, d: int, distribution: MechanismKind) -> FloatArray:
    """Per-coordinate noise standard deviation: √2·b (Laplace) or σ (Gaussian)."""
    given = as_real(scale, "scale")  # by type: text, objects, None refused (audit s29, F5)
    try:
        b = as_finite(np.broadcast_to(given, (d,)), "scale")
    except ValueError as e:
        if isinstance(e, InvalidInput):
            raise
        raise InvalidInput(
            f"scale must be a number or one per coordinate ({d}), got shape {given.shape}"
        ) from e
    if np.any(b < 0):
        raise InvalidInput("noise scale must be ≥ 0")
    b = b + 0.0  # a scale of -0.0 is 0 (numpy's samplers refuse a negative zero's sign)
    if not isinstance(distribution, str):  # an array's == is an array: ambiguous truth
        raise InvalidInput(
            f"distribution must be 'laplace' or 'gaussian', got {shown(distribution)}"
        )
    if distribution == "laplace":
        return math.sqrt(2.0) * b
    if distribution == "gaussian":
        return b
    raise InvalidInput(f"distribution must be 'laplace' or 'gaussian', got {shown(distribution)}")


def z_value(level: float) -> float:
    """The two-sided normal quantile z of ``level``, refusing levels with no usable z.

    A level must be a real number in (0, 1) whose z is finite and positive: 1 − 1e-16
    rounds 0.5 + level/2 to 1 (z = ∞) and 1e-300 rounds it to 0.5 (z = 0, zero-width
    intervals), so both are refused.
    """
    if isinstance(level, bool) or not isinstance(level, int | float) or not 0.0 < level < 1.0:
        raise InvalidInput(f"level must be a number in (0, 1), got {shown(level)}")
    p = 0.5 + level / 2.0
    if not 0.5 < p < 1.0:
        raise InvalidInput(
            f"level {level!r} is too close to {round(level)} for a finite, non-zero interval"
        )
    return NormalDist().inv_cdf(p)


MIN_DRAWS = 1000
"""The fewest redraws ``method="monte_carlo"`` takes (stats6, F-DRAWS): its interval's
percentiles and its 2 × median-bias shift are estimated from the redraws and not widened
for that, so few draws under-cover — 3 balanced classes, accuracy 0.9, noise 0.05 of a
cell, 4,000 releases per cell: balanced accuracy 0.74–0.76 at 10 draws, 0.93 at 100,
0.939–0.946 at 200, 0.943–0.951 at 500, 0.949–0.951 at 1,000 and 0.945–0.954 at the
default 2,000 (± 0.0035), with redraw noise that differs between releases — as it does
since the redraws are seeded from the released values too (``_assemble.redraws``; one
call per release at 1,000 draws: 0.954–0.958)."""


MAX_DRAWS = 10_000_000
"""The most redraws ``method="monte_carlo"`` takes: 10⁷ redraws of a 4-coordinate release
already hold 320 MB (a count past an array's size raised numpy's bare ValueError)."""


def check_options(
    level: float,
    method: object,
    *,
    distribution: object = "laplace",
    draws: object = 2000,
    labels: object = "all",
    seed: object = 0,
) -> None:
    """Refuse bad interval options with :class:`InvalidInput` (callers run it before a spend).

    ``draws`` and ``seed`` are integers of any integer type (numpy's too), not a bool;
    a float seed is refused, not truncated (review s30)."""
    z_value(level)
    # `in` on an array compares elementwise (a bare ValueError): text is checked first
    if not isinstance(method, str) or method not in ("delta", "monte_carlo"):
        raise InvalidInput(f"method must be 'delta' or 'monte_carlo', got {shown(method)}")
    if not isinstance(distribution, str) or distribution not in ("laplace", "gaussian"):
        raise InvalidInput(
            f"distribution must be 'laplace' or 'gaussian', got {shown(distribution)}"
        )
    if isinstance(seed, bool | np.bool_) or not isinstance(seed, numbers.Integral):
        raise InvalidInput(f"seed must be an integer, got {shown(seed)}")
    if (
        isinstance(draws, bool | np.bool_)
        or not isinstance(draws, numbers.Integral)
        or int(draws) < MIN_DRAWS
    ):
        raise InvalidInput(
            f"draws must be an integer ≥ {MIN_DRAWS:,}, got {shown(draws)}: the Monte Carlo "
            "interval's quantiles and bias shift come from the redraws, and fewer leave it "
            "short of its level"
        )
    if int(draws) > MAX_DRAWS:
        raise InvalidInput(
            f"draws must be at most {MAX_DRAWS:,}, got {shown(draws)}: each redraw holds a "
            "whole released vector, so more would not fit in memory; the default 2,000 "
            "suffices"
        )
    if not isinstance(labels, str) or labels not in ("present", "all"):
        raise InvalidInput(f"labels must be 'present' or 'all', got {shown(labels)}")


def method_name(base: str, distribution: MechanismKind) -> str:
    """The recorded name of an interval ``base`` ("delta", "fieller", …) as computed.

    Under Laplace noise its quantile is the Cornish–Fisher one (never below z), so the
    name says so: a reader must be able to tell which interval was actually computed.
    """
    return base if distribution == "gaussian" else f"{base}, Cornish–Fisher quantile"


def quantile_factor(
    weights: FloatArray, level: float, distribution: MechanismKind
) -> tuple[FloatArray, FloatArray]:
    """``(se, q)`` of Σ w_i·η_i for weights (…, d) already in noise-s.d. units.

    se = ‖w‖₂; q is z for Gaussian noise, and for Laplace noise the Cornish–Fisher
    quantile with the sum's excess kurtosis 3·Σw⁴/(Σw²)², never below z.
    """
    z = z_value(level)
    w2 = weights * weights
    var = np.sum(w2, axis=-1)
    se = np.sqrt(var)
    if distribution == "gaussian":
        return se, np.full(se.shape, z)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        kurt = 3.0 * np.sum(w2 * w2, axis=-1) / (var * var)
    kurt = np.where(var > 0, kurt, 0.0)
    return se, np.maximum(z, z + kurt / 24.0 * (z**3 - 3.0 * z))


def linearize(
    f_rows: RowsFn, x: FloatArray, std: FloatArray, step: float = 1e-3
) -> tuple[dict[str, FloatArray], dict[str, FloatArray]]:
    """Centre values (R,) and noise weights (R, d) = ∂f/∂x_i · sd_i of every key of f_rows.

    ``x`` is a batch (R, d) of released vectors; derivatives by central differences with
    step ``step``·sd_i, in blocks so that each vectorised call sees ≤ ~4M floats.
    """
    r, d = x.shape
    h = step * np.where(std > 0, std, 1.0)
    centre: dict[str, FloatArray] = {}
    weights: dict[str, FloatArray] = {}
    per = min(d, 256)  # coordinates differentiated per call
    rows = max(1, _BLOCK_FLOATS // ((2 * per + 1) * d))  # releases per call
    for r0 in range(0, r, rows):
        xs = x[r0 : r0 + rows]
        k_r = xs.shape[0]
        for start in range(0, d, per):
            idx = np.arange(start, min(d, start + per))
            k = idx.shape[0]
            points = np.repeat(xs[:, None, :], 2 * k + 1, axis=1)
            points[:, 1 + np.arange(k), idx] += h[idx]
            points[:, 1 + k + np.arange(k), idx] -= h[idx]
            vals = f_rows(points.reshape(-1, d))
            for key, v in vals.items():
                v2 = np.asarray(v, dtype=np.float64).reshape(k_r, 2 * k + 1)
                if key not in weights:
                    centre[key] = np.empty(r)
                    weights[key] = np.zeros((r, d))
                centre[key][r0 : r0 + k_r] = v2[:, 0]
                with np.errstate(invalid="ignore", over="ignore"):  # f's inf: NaN, flagged
                    grad = (v2[:, 1 : k + 1] - v2[:, k + 1 :]) / (2.0 * h[idx])
                weights[key][r0 : r0 + k_r, idx] = grad * std[idx]
    return centre, weights


def fieller(
    num: FloatArray,
    den: FloatArray,
    w_num: FloatArray,
    w_den: FloatArray,
    level: float,
    distribution: MechanismKind,
) -> tuple[FloatArray, FloatArray, BoolArray]:
    """Fieller's interval for θ = N/D from noisy N, D with linear noise weights (R, d).

    {θ : (N̂ − θD̂)² ≤ q²·Var(N̂ − θD̂)}, q the quantile of the pivot at θ̂ = N̂/D̂. It
    is bounded iff D̂² > q²·Var D̂ (the third array); exact for Gaussian noise, and it
    widens and skews as the denominator nears the noise, unlike the delta method.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        theta = num / den
    _, q = quantile_factor(w_num - np.nan_to_num(theta)[:, None] * w_den, level, distribution)
    q2 = q * q
    vd, c = np.sum(w_den**2, axis=-1), np.sum(w_num * w_den, axis=-1)
    a = den * den - q2 * vd
    b = num * den - q2 * c
    spread = fieller_spread(num, den, w_num, w_den, q2)
    bounded = a > 0
    safe = np.where(bounded, a, 1.0)
    return (b - spread) / safe, (b + spread) / safe, bounded


def fieller_spread(
    num: FloatArray, den: FloatArray, w_num: FloatArray, w_den: FloatArray, q2: FloatArray | float
) -> FloatArray:
    """√ of Fieller's discriminant b² − a·(N̂² − q²·vn) (a = D̂² − q²·vd, b = N̂D̂ − q²·c),
    in the equal form q²·Σᵢ(D̂·w_Nᵢ − N̂·w_Dᵢ)² − q⁴·(vn·vd − c²), ≥ 0 by construction.

    The textbook form subtracts two products of ~N̂²D̂² whose difference is the whole
    signal: with the noise ≲ 1e-9 of D̂ it rounded to 0 and the interval was a point
    (covering 0.29 at 95%; review stats). ``num``, ``den`` (R,); weights (R, d) or (d,).
    """
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    if w_num.ndim == 1 and w_den.ndim == 1:  # weights shared by every row: O(R)
        # w_N = α·w_D + w_⊥ (w_⊥ ⊥ w_D): Σ(D̂w_N − N̂w_D)² = (α·D̂ − N̂)²·vd + D̂²·|w_⊥|²
        vd0 = float(w_den @ w_den)
        alpha = float(w_num @ w_den) / vd0 if vd0 > 0 else 0.0
        perp = w_num - alpha * w_den
        squares = (alpha * den - num) ** 2 * vd0 + den * den * float(perp @ perp)
    else:
        d = w_num.shape[-1]
        wn = np.broadcast_to(w_num, (*num.shape, d))
        wd = np.broadcast_to(w_den, (*num.shape, d))
        squares = np.empty(num.shape)
        step = max(1, _BLOCK_FLOATS // max(d, 1))  # rows per block: ~32 MB at most
        for r0 in range(0, num.shape[0], step):
            at = slice(r0, r0 + step)
            lin = den[at][..., None] * wn[at] - num[at][..., None] * wd[at]
            squares[at] = np.sum(lin * lin, axis=-1)
    vn, vd = np.sum(w_num * w_num, axis=-1), np.sum(w_den * w_den, axis=-1)
    c = np.sum(w_num * w_den, axis=-1)
    disc = q2 * squares - q2 * q2 * np.maximum(vn * vd - c * c, 0.0)
    spread: FloatArray = np.sqrt(np.maximum(disc, 0.0))
    return spread

"""The interval engine: delta method (or seeded bootstrap) on an unclamped noisy release.

A released vector is ``x̂ = x + η``, η independent per coordinate with a PUBLIC law:
Laplace(b) (pure DP) or Gaussian(σ) (zCDP). A derived metric f(x̂) is estimated by the
plug-in f(x̂) on the *unclamped* release (clamping negative noisy counts to 0 biases
every near-zero cell upward) and given an interval at a confidence level:

* ``"delta"``: f(x̂) ± q·se with se² = Σ (∂f/∂x_i · sd_i)² (central differences at x̂)
  and q the quantile of the linearised noise Σ w_i·η_i: the normal z for Gaussian noise;
  for Laplace noise ``max(z, z + γ₂/24·(z³ − 3z))`` (Cornish–Fisher with the sum's excess
  kurtosis γ₂ = 3·Σw⁴/(Σw²)²). A bare normal z under-covers when one Laplace coordinate
  dominates (93.7% for a 95% bar); this quantile covers 94.99–95.3% for every weight mix
  measured, never more than 2.3% wider than the exact one at 95%.
* ``"monte_carlo"``: the percentile interval of f(x̂ + η*), η* redrawn from the public
  law with ``numpy.random.default_rng(seed)``: post-processing of public values for the
  error bar, never release noise (release noise is OpenDP's).

**Unusable metrics.** A ratio whose denominator the noise can make ≤ 0 has no usable
interval. A metric names its denominators (:class:`Guard`); each is *clearly positive*
when ``min(D̂, D_max) > q_D·se_D``, with se_D and q_D its own noise s.e. and quantile and
D_max a public upper bound on its true value (e.g. cohort × cap). The first condition is
Fieller's: the ratio's confidence set is bounded. The second keeps a pure-noise release
(a cohort whose largest possible count is itself within the noise) flagged whatever the
draw. A metric with an unclear denominator, undefined at x̂, or whose interval falls
entirely outside the metric's range is returned with the WHOLE range as its interval and
a reason in words. Every rule reads only the release and its public scale.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from dpledger.errors import InvalidInput
from dpledger.metrics._segments import FloatArray, as_finite
from dpledger.types import IntervalMethod, MechanismKind

__all__ = [
    "Batch",
    "Guard",
    "Interval",
    "RowsFn",
    "batch_intervals",
    "fieller",
    "linearize",
    "noise_std",
    "quantile_factor",
    "to_intervals",
]

RowsFn = Callable[[FloatArray], Mapping[str, FloatArray]]
BoolArray = npt.NDArray[np.bool_]

_BLOCK_FLOATS = 1 << 22  # points evaluated per vectorised call: bounds memory at ~32 MB
_UNDEFINED = -1
_OUTSIDE = -2


@dataclass(frozen=True)
class Interval:
    """A confidence interval ``[low, high]`` at ``level`` for a derived metric.

    ``reason`` is None for a usable interval. When it is set the metric is UNUSABLE
    (noise swamps it): ``[low, high]`` is then the metric's whole range and ``reason``
    says why in words. Do not publish the point value of an unusable metric.
    """

    low: float
    high: float
    level: float
    method: str
    reason: str | None = None

    def __post_init__(self) -> None:
        if not 0.0 < self.level < 1.0:
            raise InvalidInput(f"level must lie in (0, 1), got {self.level!r}")
        if self.low > self.high:
            raise InvalidInput(f"interval low {self.low!r} > high {self.high!r}")
        if self.reason is not None and not self.reason:
            raise InvalidInput("an unusable interval needs a non-empty reason")

    @property
    def usable(self) -> bool:
        """False when noise swamps the metric (see :attr:`reason`)."""
        return self.reason is None

    @property
    def half_width(self) -> float:
        """Half the interval's width (the ± of a symmetric bar)."""
        return 0.5 * (self.high - self.low)

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in the closed interval."""
        return self.low <= value <= self.high


@dataclass(frozen=True)
class Guard:
    """A denominator that must be clearly positive for a metric to be usable.

    ``key`` names it in the denominators' rows; ``maximum`` is a public upper bound on
    its true value (``inf`` when none is known).
    """

    key: str
    maximum: float = math.inf


def noise_std(scale: npt.ArrayLike, d: int, distribution: MechanismKind) -> FloatArray:
    """Per-coordinate noise standard deviation: √2·b (Laplace) or σ (Gaussian)."""
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
        return b.copy()
    raise InvalidInput(f"distribution must be 'laplace' or 'gaussian', got {distribution!r}")


def _z(level: float) -> float:
    if not (isinstance(level, int | float) and 0.0 < level < 1.0):
        raise InvalidInput(f"level must lie in (0, 1), got {level!r}")
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def quantile_factor(
    weights: FloatArray, level: float, distribution: MechanismKind
) -> tuple[FloatArray, FloatArray]:
    """``(se, q)`` of Σ w_i·η_i for weights (…, d) already in noise-s.d. units.

    se = ‖w‖₂; q is z for Gaussian noise, and for Laplace noise the Cornish–Fisher
    quantile with the sum's excess kurtosis 3·Σw⁴/(Σw²)², never below z.
    """
    z = _z(level)
    var = np.sum(weights * weights, axis=-1)
    se = np.sqrt(var)
    if distribution == "gaussian":
        return se, np.full(se.shape, z)
    with np.errstate(invalid="ignore", divide="ignore"):
        kurt = 3.0 * np.sum(weights**4, axis=-1) / (var * var)
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
    vn, vd = np.sum(w_num**2, axis=-1), np.sum(w_den**2, axis=-1)
    c = np.sum(w_num * w_den, axis=-1)
    a = den * den - q * q * vd
    b = num * den - q * q * c
    disc = np.maximum(b * b - a * (num * num - q * q * vn), 0.0)
    bounded = a > 0
    safe = np.where(bounded, a, 1.0)
    return (b - np.sqrt(disc)) / safe, (b + np.sqrt(disc)) / safe, bounded


@dataclass(frozen=True)
class Batch:
    """Intervals of several metrics over a batch of R releases (arrays of shape (R,)).

    ``code[key]`` is 0 for a usable interval, i + 1 when ``guards[key][i]`` failed, −1
    when the metric is undefined at the release, −2 when its interval lies outside its
    range. ``den``/``den_se``/``den_q`` hold each denominator's value, s.e. and quantile.
    """

    estimate: dict[str, FloatArray]
    low: dict[str, FloatArray]
    high: dict[str, FloatArray]
    code: dict[str, npt.NDArray[np.int64]]
    guards: dict[str, tuple[Guard, ...]]
    den: dict[str, FloatArray]
    den_se: dict[str, FloatArray]
    den_q: dict[str, FloatArray]
    ranges: dict[str, tuple[float, float]]

    def usable(self, key: str) -> BoolArray:
        """Which releases give ``key`` a usable interval."""
        ok: BoolArray = np.equal(self.code[key], 0)
        return ok


def _clear(value: FloatArray, se: FloatArray, q: FloatArray, maximum: float) -> BoolArray:
    """Clearly positive: min(value, public maximum) > q·se (or > 0 with no noise)."""
    capped = np.minimum(value, maximum)
    clear: BoolArray = np.where(se > 0, capped > q * se, capped > 0)
    return clear


def batch_intervals(
    f_rows: RowsFn,
    x: FloatArray,
    std: FloatArray,
    *,
    level: float,
    method: IntervalMethod,
    distribution: MechanismKind,
    ranges: Mapping[str, tuple[float, float]],
    denominators: RowsFn | None = None,
    guards: Mapping[str, Sequence[Guard]] | None = None,
    draws: int = 2000,
    seed: int = 0,
    step: float = 1e-3,
    override: Mapping[str, tuple[FloatArray, FloatArray, BoolArray]] | None = None,
) -> Batch:
    """Vectorised core: intervals of every key of ``f_rows`` for each row of ``x`` (R, d).

    ``override`` replaces the delta interval of some keys with a precomputed
    ``(low, high, defined)`` (e.g. Fieller's for a ratio, or a transformed interval).
    """
    if method not in ("delta", "monte_carlo"):
        raise InvalidInput(f"method must be 'delta' or 'monte_carlo', got {method!r}")
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 10:
        raise InvalidInput(f"draws must be an integer ≥ 10, got {draws!r}")
    _z(level)
    centre, weights = linearize(f_rows, x, std, step)
    guard_map = {k: tuple(v) for k, v in (guards or {}).items()}
    den: dict[str, FloatArray] = {}
    den_se: dict[str, FloatArray] = {}
    den_q: dict[str, FloatArray] = {}
    if denominators is not None and guard_map:
        d_centre, d_weights = linearize(denominators, x, std, step)
        for key, value in d_centre.items():
            den[key] = value
            den_se[key], den_q[key] = quantile_factor(d_weights[key], level, distribution)
    low: dict[str, FloatArray] = {}
    high: dict[str, FloatArray] = {}
    if method == "monte_carlo":
        rng = np.random.default_rng(seed)
        r, d = x.shape
        chunk = max(1, _BLOCK_FLOATS // (draws * d))  # releases redrawn per vectorised call
        for r0 in range(0, r, chunk):
            xs = x[r0 : r0 + chunk]
            shape = (xs.shape[0], draws, d)
            if distribution == "laplace":
                noise = rng.laplace(0.0, std / math.sqrt(2.0), size=shape)
            else:
                noise = rng.normal(0.0, std, size=shape)
            sims = f_rows((xs[:, None, :] + noise).reshape(-1, d))
            alpha = (1.0 - level) / 2.0
            for key, v in sims.items():
                vv = np.asarray(v, dtype=np.float64).reshape(xs.shape[0], draws)
                with np.errstate(invalid="ignore"):
                    lo_q, hi_q = np.nanquantile(vv, [alpha, 1.0 - alpha], axis=1)
                low.setdefault(key, np.empty(r))[r0 : r0 + xs.shape[0]] = lo_q
                high.setdefault(key, np.empty(r))[r0 : r0 + xs.shape[0]] = hi_q
    else:
        for key, w in weights.items():
            se, q = quantile_factor(w, level, distribution)
            low[key], high[key] = centre[key] - q * se, centre[key] + q * se
    codes: dict[str, npt.NDArray[np.int64]] = {}
    out_ranges = {k: ranges.get(k, (-math.inf, math.inf)) for k in centre}
    for key in centre:
        lo, hi = low[key], high[key]
        defined = np.isfinite(centre[key]) & ~np.isnan(lo) & ~np.isnan(hi)
        if override and key in override:
            lo, hi, ok = override[key]
            defined = defined & ok
        r_lo, r_hi = out_ranges[key]
        code = np.where(defined, 0, _UNDEFINED).astype(np.int64)
        code = np.where((code == 0) & ((lo > r_hi) | (hi < r_lo)), _OUTSIDE, code)
        for i, g in reversed(list(enumerate(guard_map.get(key, ())))):
            ok = _clear(den[g.key], den_se[g.key], den_q[g.key], g.maximum)
            code = np.where(ok, code, i + 1)
        bad = code != 0
        with np.errstate(invalid="ignore"):
            low[key] = np.where(bad, r_lo, np.clip(lo, r_lo, r_hi))
            high[key] = np.where(bad, r_hi, np.clip(hi, r_lo, r_hi))
        codes[key] = code
    estimate = {k: np.clip(v, *out_ranges[k]) for k, v in centre.items()}
    return Batch(estimate, low, high, codes, guard_map, den, den_se, den_q, out_ranges)


def _words(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _reason(batch: Batch, key: str, row: int) -> str | None:
    code = int(batch.code[key][row])
    if code == 0:
        return None
    lo, hi = batch.ranges[key]
    if code == _UNDEFINED:
        return "undefined at the released values (a denominator is 0 or negative)"
    if code == _OUTSIDE:
        return f"its interval lies entirely outside the metric's range [{lo:g}, {hi:g}]"
    g = batch.guards[key][code - 1]
    value, se, q = (float(a[g.key][row]) for a in (batch.den, batch.den_se, batch.den_q))
    if g.maximum <= q * se:
        return (
            f"noise swamps it: even the largest possible {g.key} ({_words(g.maximum)}) is "
            f"within {q:.2f} × its noise s.e. ({_words(se)}) of 0"
        )
    return (
        f"noise swamps it: the noisy {g.key} ({_words(value)}) is not clearly positive "
        f"(needs > {q:.2f} × its noise s.e. {_words(se)})"
    )


def to_intervals(batch: Batch, level: float, method: str, row: int = 0) -> dict[str, Interval]:
    """The :class:`Interval` of every key for one release of the batch."""
    return {
        key: Interval(
            float(batch.low[key][row]),
            float(batch.high[key][row]),
            level,
            method,
            _reason(batch, key, row),
        )
        for key in batch.code
    }

"""Estimates and intervals for R², MSE, RMSE and MAE of noisy regression measures.

Post-processing of a released ``regression_codec`` vector (Σ(y−ŷ)², Σ|y−ŷ|, Σ(y−c),
Σ(y−c)², n). Point estimates are plug-ins, clipped to each metric's range. Intervals,
chosen by measured coverage (``tests/test_coverage.py`` re-measures it):

* MSE, MAE: the delta method with the noise law's quantile; RMSE: the square root of
  MSE's interval (a monotone map keeps coverage; a delta interval on √MSE under-covers
  near 0);
* R² = 1 − SSE/SST: Fieller's interval for SSE/L_μ, L_μ = Σ(y−c)² − 2μΣ(y−c) + μ²n,
  over the means μ in the mean's own interval (:func:`_r2_interval`), and where
  Σ(y−ȳ)² only just passed its guard, the selection-adjusted bound of
  :func:`_r2_selected`. Where that interval has no lower end (Σ(y−ȳ)² too near the
  noise to bound R² below), R² is published one-sided, ``(−∞, high]``, its upper end
  conditioned on that event: publication then rests on the guard alone, the event the
  selection adjustment conditions on (flagging those releases instead was a second
  selection on the same noisy Σ(y−ȳ)²; the intervals left covered 0.70–0.93 among
  published: audit s30, F3).

Flags: the sample count n not clear of the noise (every metric) and Σ(y−ȳ)² not clear of
it at the least favourable mean (R²). Public maxima (cohort × per-client bounds) keep a
pure-noise release flagged.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import numpy.typing as npt

from dpledger.errors import InvalidInput
from dpledger.metrics._assemble import Batch, BoolArray, Linear, assemble, monte_carlo
from dpledger.metrics._intervals import (
    Guard,
    check_options,
    fieller,
    linearize,
    method_name,
    noise_std,
    quantile_factor,
    z_value,
)
from dpledger.metrics._reading import FloatArray, as_real, real_limit
from dpledger.metrics._segments import as_finite
from dpledger.metrics._selective import selective_bounds
from dpledger.metrics.codec import VectorSumCodec
from dpledger.metrics.flam_regression import REGRESSION_KEYS, REGRESSION_MEASURES
from dpledger.types import IntervalMethod, MechanismKind

__all__ = ["check_regression_codec", "regression_batch", "regression_ranges"]

_NOTICE = 0.01  # a bound moved by < 1% of its half-width was not moved by selection


def check_regression_codec(codec: object) -> VectorSumCodec:
    """``codec`` if it is :func:`~dpledger.metrics.flam.regression_codec`'s, else InvalidInput."""
    if not isinstance(codec, VectorSumCodec) or codec.names != REGRESSION_MEASURES:
        names = getattr(codec, "names", type(codec).__name__)
        raise InvalidInput(
            f"a regression release needs the codec of regression_codec() with names "
            f"{REGRESSION_MEASURES}, got {names}"
        )
    return codec


def regression_ranges(codec: VectorSumCodec) -> dict[str, tuple[float, float]]:
    """The range of R², MSE, RMSE and MAE under ``codec``'s residual bound r."""
    r = codec.bounds[1] / codec.bounds[4]  # residual bound r: Σ|y−ŷ| ≤ m·r, n ≤ m
    return {"r2": (-math.inf, 1.0), "mse": (0.0, r * r), "rmse": (0.0, r), "mae": (0.0, r)}


_N, _SST = "sample count n", "total sum of squares Σ(y−ȳ)²"
_MONTE_CARLO = ("mse", "rmse", "mae")
"""The metrics ``method="monte_carlo"`` redraws. Not R²: its percentiles dropped the
selection adjustment and the handling of a missing lower end, and where Σ(y−ȳ)² is
within the noise covered 0.02–0.89 among the releases it published (review s30 F2)."""
_BETA = 0.01  # the mean's share of the miss rate in R²'s union interval (α/2 above 0.98)
_GRID = 17  # means tried across the mean's interval


def _r2_interval(
    measures: FloatArray, sd: FloatArray, level: float, distribution: MechanismKind
) -> tuple[FloatArray, FloatArray, BoolArray, Linear, FloatArray]:
    """R²'s interval, profiling the unknown mean; Σ(y−ȳ)²'s moments at the worst mean, and
    the largest Laplace scale among its noise terms over the means tried.

    For a fixed μ, L_μ = Σ(y−c)² − 2μ·Σ(y−c) + μ²·n is LINEAR in the released measures,
    and at μ = the true mean of y − c it equals Σ(y−ȳ)² exactly. So at the true mean
    the ratio SSE/L_μ has Fieller's interval with exact linear noise — no linearisation
    at the noisy Σy (which inflates Σ(y−ȳ)² and shrinks its s.e. together when the noise
    lowers |Σy|). The mean is unknown: the interval is the union of Fieller's over the
    means in the mean's own interval (Berger & Boos 1994): levels 1 − β for the mean
    and 1 − α + β for the ratio, coverage ≥ 1 − α (β = min(0.01, α/2)). ``measures``
    (R, 5) are decoded, ``sd`` their noise s.d. per measure.
    """
    sse, _, s1, s2, n = (measures[:, k] for k in range(5))
    r = measures.shape[0]
    one = np.zeros((r, 5))

    def w(k: int) -> FloatArray:
        out = one.copy()
        out[:, k] = sd[k]
        return out

    # the mean's share of the miss rate: β < α keeps both levels in (0, 1) at any level
    # (β = α would put the ratio's at 1: level 0.99 failed, review s30 F1)
    beta = min(_BETA, (1.0 - level) / 2.0)
    mu_lo, mu_hi, mu_ok = fieller(s1, n, w(2), w(4), 1.0 - beta, distribution)
    frac = np.linspace(0.0, 1.0, _GRID)
    with np.errstate(invalid="ignore", divide="ignore"):
        mu_hat = np.where(n != 0, s1 / n, 0.0)
    span = np.where(mu_ok[:, None], mu_lo[:, None] + (mu_hi - mu_lo)[:, None] * frac, 0.0)
    mus = np.concatenate([mu_hat[:, None], span], axis=1)  # (R, G + 1)
    g = mus.shape[1]
    mu = mus.reshape(-1)
    s1_g, s2_g, n_g, sse_g = (np.repeat(a, g) for a in (s1, s2, n, sse))
    den = s2_g - 2.0 * mu * s1_g + mu * mu * n_g
    w_den = np.zeros((r * g, 5))
    w_den[:, 3], w_den[:, 2], w_den[:, 4] = sd[3], -2.0 * mu * sd[2], mu * mu * sd[4]
    w_num = np.zeros((r * g, 5))
    w_num[:, 0] = sd[0]
    lo, hi, ok = fieller(sse_g, den, w_num, w_den, level + beta, distribution)
    lo, hi = lo.reshape(r, g), hi.reshape(r, g)
    bounded: BoolArray = mu_ok & ok.reshape(r, g).all(axis=1)
    se, q = quantile_factor(w_den.reshape(r, g, 5), level, distribution)
    sst = Linear(den.reshape(r, g)[:, 0], se.max(axis=1), q[np.arange(r), se.argmax(axis=1)])
    b_max = np.abs(w_den).max(axis=1).reshape(r, g).max(axis=1) / math.sqrt(2.0)  # Laplace b
    return 1.0 - hi.max(axis=1), 1.0 - lo.min(axis=1), bounded, sst, b_max


def _r2_selected(
    r2: tuple[FloatArray, FloatArray], sse: FloatArray, sd_sse: float, sst: Linear, level: float,
    distribution: MechanismKind, sst_max: float, b_max: FloatArray,
) -> tuple[FloatArray, FloatArray, BoolArray, FloatArray]:  # fmt: skip
    """R²'s interval among the releases whose Σ(y−ȳ)² passed its guard.

    Passing near the threshold selects releases whose noise inflated Σ(y−ȳ)² (and R²).
    SSE's noise is independent of that selection (its own coordinate), and Σ(y−ȳ)²'s
    selective interval (:mod:`._selective`, its guard being a truncation of its own
    noise) is exact for Gaussian noise: with both at level 1 − α/2,
    ``R² ∈ [1 − SSE_hi/SST_lo, 1 − SSE_lo/SST_hi]`` covers at ≥ 1 − α among the
    selected. It joins the profiled Fieller interval where the selection moves
    Σ(y−ȳ)²'s lower bound (the third array), which it leaves alone elsewhere.

    The fourth array is R²'s upper end where it is published one-sided: the same
    projection, with Σ(y−ȳ)² conditioned on the one-sided event too — its noisy value
    between the guard and the point past which its selective lower bound is positive
    (:func:`_one_sided_depth`). Conditioned on the guard alone, a release made one-sided
    by a low draw got a low SST_hi and a bound below the truth (review s31, F1: 0.00–0.60
    among one-sided releases where Σ(y−ȳ)² is 5–8 s.d.). Under Laplace noise that window
    bounds Σ(y−ȳ)² above only near the guard (the tail is memoryless: landing in it says
    little about how far above it the truth is, and the truncated-Gaussian bound missed
    from ~8 s.d., review s31b), so there SST_hi is at least ``sst_max``, the public
    maximum cohort × cap that no true Σ(y−ȳ)² exceeds; SSE's noise is independent of the
    event, so the bound holds given it.

    Under Laplace noise the lower end too: given that Σ(y−ȳ)² passed its guard t by u,
    P(noisy ≥ observed | passed) tends to e^{−u/b} for a true value far below t (b the
    largest Laplace scale among its terms; the same window as a ratio's Laplace sum below,
    :func:`~._ratio._laplace_sum_window`), so where e^{−u/b} > α/2 no true Σ(y−ȳ)² down to
    0 is excluded and R² has no lower end. The truncated-Gaussian bound gave one there:
    with y constant (true Σ(y−ȳ)² = 0, R² −1e5 to −1e12) those two-sided releases, 9% of
    the published, all missed, and R² covered 0.88–0.93 among published (review 40).
    """
    half = 1.0 - (1.0 - level) / 2.0
    z, z_half = z_value(level), z_value(half)
    _, q_sse = quantile_factor(np.array([[sd_sse]]), half, distribution)
    sse_lo, sse_hi = sse - q_sse[0] * sd_sse, sse + q_sse[0] * sd_sse
    s_eff = sst.se * sst.q / z
    slack = np.maximum(sst.value - sst.q * sst.se, 0.0)
    far = sst.value + np.array([[-1e3], [1e3]]) * s_eff
    lo, hi = selective_bounds(sst.value, s_eff, slack, np.full(slack.shape, np.inf), half,
                              (far[0], far[1]))  # fmt: skip
    near = np.zeros(slack.shape, dtype=bool)
    if distribution == "laplace":  # no lower bound above 0 within the window (see above)
        near = sst.value - sst.q * sst.se <= b_max * math.log(2.0 / (1.0 - level))
        lo = np.where(near, 0.0, lo)
    moved = near | (lo < sst.value - (1.0 + _NOTICE) * z_half * s_eff)
    top = sst.q * sst.se + _one_sided_depth(level) * s_eff  # past it: a lower end
    room = np.maximum(top - sst.value, 0.0)  # 0 (one-sided by Fieller alone): unbounded
    _, hi_one = selective_bounds(sst.value, s_eff, slack, room, half, (far[0], far[1]))
    if distribution == "laplace":
        hi_one = np.maximum(hi_one, sst_max)
    with np.errstate(divide="ignore", invalid="ignore"):
        proj_lo = np.where(lo > 0, 1.0 - sse_hi / np.where(lo > 0, lo, 1.0), -np.inf)
        proj_hi = 1.0 - np.maximum(sse_lo, 0.0) / hi
        upper_one = 1.0 - np.maximum(sse_lo, 0.0) / np.maximum(hi_one, hi)
    return (np.where(moved, np.minimum(r2[0], proj_lo), r2[0]),
            np.where(moved, np.maximum(r2[1], proj_hi), r2[1]), moved, upper_one)  # fmt: skip


@functools.lru_cache(maxsize=64)
def _one_sided_depth(level: float) -> float:
    """How far past its guard, in s.d. s_eff, a noisy Σ(y−ȳ)² lies where its selective
    lower bound at 1 − α/2 (truncated at the guard) reaches 0: closer, R² has no lower end.

    Scale-free: the guard is q·se = z·s_eff (s_eff = se·q/z), so the depth is a function
    of the level alone (≈ 1.46 at 0.95, 1.64 at 0.99); found once per level by bisection.
    """
    half = 1.0 - (1.0 - level) / 2.0
    z, one, inf = z_value(level), np.ones(1), np.full(1, np.inf)

    def lower(d: float) -> float:
        x = np.array([z + d])
        lo, _ = selective_bounds(x, one, np.array([d]), inf, half, (x - 1e3, x + 1e3))
        return float(lo[0])

    a, b = 0.0, 40.0
    for _ in range(60):
        m = 0.5 * (a + b)
        a, b = (m, b) if lower(m) <= 0.0 else (a, m)
    return b


def _r2_one_sided(
    r2: tuple[FloatArray, FloatArray], bounded: BoolArray, upper: FloatArray
) -> tuple[FloatArray, FloatArray, BoolArray]:
    """R²'s interval with ``(−∞, high]`` wherever it has no finite lower end.

    Fieller's set unbounded at some mean, or Σ(y−ȳ)²'s selective lower bound at or below
    0: R² is then bounded above only. The upper end is the larger of Fieller's (where it
    is bounded) and ``upper`` = 1 − SSE_lo/SST_hi (SSE's and Σ(y−ȳ)²'s bounds at
    1 − α/2 each, the latter conditioned on the one-sided event: :func:`_r2_selected`),
    which holds whatever Fieller's set is.
    The third array marks the interval defined (its upper end is a number).
    """
    lo, hi = r2
    one = ~(bounded & np.isfinite(lo))
    hi = np.where(one, np.where(bounded, np.maximum(hi, upper), upper), hi)
    defined: BoolArray = bounded | (one & ~np.isnan(hi))
    return np.where(one, -np.inf, lo), hi, defined


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
    cohort·m·h² (the codec's per-client bounds), keeping pure-noise releases flagged;
    under Laplace noise that maximum is also a one-sided R²'s upper end for Σ(y−ȳ)², so
    without ``cohort`` such an R² is "≤ 1" (``release_regression`` passes the release's).
    """
    codec = check_regression_codec(codec)
    check_options(level, method, distribution=distribution, draws=draws, seed=seed)
    cohort = real_limit(cohort, "cohort")
    x = as_real(released, "released")  # by type: no text or objects (audit s29, F5)
    if x.ndim != 2 or x.shape[-1] != codec.dimension:
        raise InvalidInput(f"a batch of releases has shape (R, {codec.dimension}), got {x.shape}")
    x = as_finite(x.reshape(-1), "released").reshape(x.shape)
    std = noise_std(scale, codec.dimension, distribution)

    def rows(stack: FloatArray) -> dict[str, FloatArray]:
        sse, sae, s1, s2, n = (codec.decode(stack)[..., k] for k in range(5))
        with np.errstate(invalid="ignore", divide="ignore"):
            mse = sse / n
            return {
                "r2": 1.0 - sse / (s2 - s1 * s1 / n),
                "mse": mse,
                "rmse": np.sign(mse) * np.sqrt(np.abs(mse)),  # signed: an interval below 0 shows
                "mae": sae / n,
                _N: n,
                _SST: s2 - s1 * s1 / n,
            }

    centre, weights = linearize(rows, x, std)
    lin = {k: Linear.of(centre[k], weights[k], level, distribution) for k in centre}
    sd = codec.decode(std)  # each measure's noise s.d. (decoding is a per-coordinate scale)
    r2_lo, r2_hi, bounded, sst, b_max = _r2_interval(codec.decode(x), sd, level, distribution)
    dens = {_N: lin.pop(_N), _SST: sst}
    lin.pop(_SST)
    n_guard = Guard(_N, cohort * codec.bounds[4])
    guards: dict[str, tuple[Guard, ...]] = {k: (n_guard,) for k in REGRESSION_KEYS}
    guards["r2"] = (n_guard, Guard(_SST, cohort * codec.bounds[3]))
    cov = {k: {g.key: np.sum(weights[k] * weights[g.key], axis=-1) for g in gs}
           for k, gs in guards.items()}  # fmt: skip
    cov["r2"][_SST] = np.zeros(len(x))  # R²'s selection on Σ(y−ȳ)²: _r2_selected
    sse = codec.decode(x)[:, 0]
    r2_lo, r2_hi, moved, upper = _r2_selected(
        (r2_lo, r2_hi), sse, float(sd[0]), sst, level, distribution, cohort * codec.bounds[3],
        b_max,
    )  # fmt: skip
    r2_lo, r2_hi, bounded = _r2_one_sided((r2_lo, r2_hi), bounded, upper)
    mse = lin["mse"]
    lo, hi = mse.value - mse.q * mse.se, mse.value + mse.q * mse.se
    base: dict[str, tuple[FloatArray, FloatArray, BoolArray]] = {
        "r2": (r2_lo, r2_hi, bounded),
        "rmse": (np.sign(lo) * np.sqrt(np.abs(lo)), np.sign(hi) * np.sqrt(np.abs(hi)),
                 np.isfinite(lo) & np.isfinite(hi)),
    }  # fmt: skip
    names = {
        "r2": "fieller for SSE/SST with SST's own noise, profiled over the mean",
        "rmse": "square root of MSE's delta interval",
        "mse": "delta",
        "mae": "delta",
    }
    methods = {k: method_name(v, distribution) for k, v in names.items()}
    if method == "monte_carlo":  # for MSE, RMSE and MAE; R² keeps its own interval

        def metric_rows(stack: FloatArray) -> dict[str, FloatArray]:
            return {k: v for k, v in rows(stack).items() if k in _MONTE_CARLO}

        redrawn = monte_carlo(metric_rows, x, std, level=level, distribution=distribution,
                              draws=draws, seed=seed)  # fmt: skip
        base = {**redrawn, "r2": base["r2"]}
        methods = {**methods, **dict.fromkeys(_MONTE_CARLO, "monte_carlo")}
    return assemble(lin, dens, cov, level=level, ranges=regression_ranges(codec),
                    guards=guards, methods=methods, base=base, adjusted={"r2": moved},
                    one_sided=("r2",))  # fmt: skip

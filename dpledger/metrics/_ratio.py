"""Ratios of two independent noisy releases: Fieller's interval, conditional on its guard.

A ratio θ = N/D published from a noisy numerator N̂ and a noisy denominator D̂ (two
coordinates of one release, or two releases with independent noise) is estimated by the
plug-in N̂/D̂ and bounded by Fieller's interval, which widens and skews as D̂ nears the
noise (:func:`~._intervals.fieller`). It is published only when D̂ passes its guard
(clearly positive: ``min(D̂, D_max) > q·se``, :class:`~._intervals.Guard`); where D̂ only
just passed, the releases that pass are those whose denominator noise was large, so the
interval is joined with the one conditional on that selection
(:func:`~._selective.selective_ratio`). Accuracy-like classification metrics (trace /
total of a confusion matrix, :mod:`._flam_intervals`) and the mean of a scalar metric over
a noisy count of the clients who reported (:func:`mean_over_noisy_count_batch`: Flower
rounds under ``add_remove``, where how many reported is private) are both built here.

Every input is a released value, a public noise scale or a public bound: post-processing.
"""

from __future__ import annotations

import math
from dataclasses import replace
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from dpledger.errors import InvalidInput
from dpledger.metrics._assemble import Base, Batch, BoolArray, Linear, assemble, clear
from dpledger.metrics._intervals import (
    Guard,
    check_options,
    fieller,
    method_name,
    noise_std,
    quantile_factor,
    z_value,
)
from dpledger.metrics._reading import FloatArray, as_real, check_positive, real_pair
from dpledger.metrics._segments import as_finite
from dpledger.metrics._selective import selective_ratio
from dpledger.types import MechanismKind

__all__ = [
    "MEAN",
    "RATIO",
    "REPORTED",
    "conditional_fieller",
    "linear_ratio_batch",
    "mean_over_noisy_count_batch",
]

MEAN = "mean"
"""The key of the mean in :func:`mean_over_noisy_count_batch`'s batch."""
REPORTED = "reported count"
"""The name of the denominator (the noisy count of the clients who reported)."""
RATIO = "ratio"
"""The key of the ratio in :func:`linear_ratio_batch`'s batch."""


def conditional_fieller(
    num: FloatArray,
    den: Linear,
    w_num: FloatArray,
    w_den: FloatArray,
    guard: Guard,
    level: float,
    distribution: MechanismKind,
    search: tuple[float, float],
) -> tuple[Base, BoolArray]:
    """N/D's interval: Fieller's, joined with the one conditional on D's guard.

    ``num`` (R,) and ``den`` (its value, s.e. and quantile) are the released numerator and
    denominator, ``w_num``/``w_den`` (R, d) their linear noise weights in noise-s.d. units,
    ``search`` the ratio's range. Where D̂ passed its guard by less than 10 of its noise
    s.e., the interval is the union of Fieller's and
    :func:`~._selective.selective_ratio`'s (conditional on the guard having passed: the
    releases that pass near the threshold are those whose noise inflated D̂); elsewhere
    the two agree to < 1e-20 and Fieller's is used. The second array marks the releases
    whose interval the conditioning moved.
    """
    lo, hi, ok = fieller(num, den.value, w_num, w_den, level, distribution)
    passed = clear(den, guard)
    t = guard.factor * den.q * den.se
    near = np.flatnonzero(passed & (den.value - t < 10.0 * den.se * den.q / z_value(level)))
    moved = np.zeros(num.shape, dtype=bool)
    if near.size:
        theta = num[near] / den.value[near]
        _, q = quantile_factor(w_num[near] - theta[:, None] * w_den[near], level, distribution)
        s_lo, s_hi, found = selective_ratio(
            num[near], den.value[near], w_num[near], w_den[near], t[near], level, q,
            search=search,
        )  # fmt: skip
        f_lo, f_hi = lo[near], hi[near]
        lo, hi = lo.copy(), hi.copy()
        # no θ in the range kept: the interval lies wholly outside the range (flagged)
        new_lo = np.where(found, np.minimum(f_lo, s_lo), np.inf)
        new_hi = np.where(found, np.maximum(f_hi, s_hi), np.inf)
        half = np.maximum(0.5 * (f_hi - f_lo), 1e-300)
        with np.errstate(invalid="ignore"):
            moved[near] = found & (np.maximum(f_lo - new_lo, new_hi - f_hi) > 0.01 * half)
        lo[near], hi[near] = new_lo, new_hi
    return (lo, hi, ok), moved


def mean_over_noisy_count_batch(
    noisy_sum: npt.ArrayLike,
    sum_scale: float | npt.ArrayLike,
    noisy_count: npt.ArrayLike,
    count_scale: float | npt.ArrayLike,
    *,
    bounds: tuple[float, float],
    max_count: float,
    level: float = 0.95,
    sum_distribution: MechanismKind = "laplace",
    count_distribution: MechanismKind = "laplace",
) -> Batch:
    """The mean over the clients who reported, N̂/D̂, for R releases (key :data:`MEAN`).

    ``noisy_sum`` (R,) is the released sum of the reporters' clipped values (in the
    metric's units) with noise scale ``sum_scale`` (Laplace b or Gaussian σ, same units);
    ``noisy_count`` (R,) the released count of those same reporters (clients) with scale
    ``count_scale``; the two noises independent. ``bounds`` is the metric's public clip
    range (the mean's range); ``max_count`` a public upper bound on the true count (the
    planned cohort: no more can report than were asked). The interval is Fieller's,
    conditional on the count's guard where it only just passed
    (:func:`conditional_fieller`); the mean is UNUSABLE, with a reason, when the count is
    not clearly positive: ``min(D̂, max_count) > q·se`` fails (D̂ within the noise, or
    even ``max_count`` reporters too few to tell from it). Mixed noise laws use the
    Laplace quantile (never below the Gaussian one). Under a Laplace count the upper end
    is at least the bound of :func:`_laplace_count_bound`, which takes the true count to
    be a whole number of reporters, ≥ 1 wherever the mean is defined.
    """
    lo_b, hi_b = real_pair(bounds, "bounds")
    max_count = check_positive(max_count, "max_count")  # an integer past a double: refused
    check_options(level, "delta", distribution=sum_distribution)
    check_options(level, "delta", distribution=count_distribution)
    n_hat = as_finite(_reals(noisy_sum, "noisy_sum"), "noisy_sum")
    r = n_hat.shape[0]
    d_hat = as_finite(_reals(noisy_count, "noisy_count"), "noisy_count")
    if d_hat.shape != (r,):
        raise InvalidInput(f"one noisy count per noisy sum ({r}), got {d_hat.shape[0]}")
    sd_n = noise_std(sum_scale, r, sum_distribution)  # one scale, or one per release
    sd_d = noise_std(count_scale, r, count_distribution)
    dist: MechanismKind = (
        "gaussian" if sum_distribution == count_distribution == "gaussian" else "laplace"
    )
    zero = np.zeros(r)
    w_num = np.stack([sd_n, zero], axis=1)
    w_den = np.stack([zero, sd_d], axis=1)
    den = Linear.of(d_hat, w_den, level, dist)
    guard = Guard(REPORTED, float(max_count))
    base, moved = conditional_fieller(n_hat, den, w_num, w_den, guard, level, dist, (lo_b, hi_b))
    if count_distribution == "laplace":  # its exponential tail: the model above is too light
        base, moved = _laplace_count_bound(
            base, moved, n_hat, sd_n, sum_distribution, d_hat, sd_d / math.sqrt(2.0),
            guard.factor * den.q * den.se, float(max_count), level,
        )  # fmt: skip
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = n_hat / d_hat
        w = (w_num - theta[:, None] * w_den) / d_hat[:, None]  # ∂θ/∂x · sd, at the release
    mean = Linear.of(theta, np.nan_to_num(w), level, dist)
    cov = {MEAN: {REPORTED: np.sum(np.nan_to_num(w) * w_den, axis=-1)}}
    return assemble(
        {MEAN: mean}, {REPORTED: den}, cov, level=level, ranges={MEAN: (lo_b, hi_b)},
        guards={MEAN: (guard,)}, methods={MEAN: method_name("fieller", dist)},
        base={MEAN: base}, adjusted={MEAN: moved}, conditional=(MEAN,),
    )  # fmt: skip


_SPLIT = 0.8
"""Share of the upper side's α/2 spent on the count's conditional bound (the rest on the
sum's): a count that only just passed is the weak part; with α_D = α/4 (even split) a
count at 60 reporters (scale 10, 97% published) was bounded at 1 more often."""


def _laplace_count_bound(
    base: Base, moved: BoolArray, n_hat: FloatArray, sd_n: FloatArray,
    sum_distribution: MechanismKind, d_hat: FloatArray, b: FloatArray, t: FloatArray,
    max_count: float, level: float, floor: float = 1.0,
) -> tuple[Base, BoolArray]:  # fmt: skip
    """The mean's upper end where a Laplace count passed its guard D̂ > t: at least N₊/D₋.

    ``floor``: the least true denominator the ratio is defined at — 1 for a count of
    reporters (a mean over none is undefined), 0 where nothing is known (a ratio of two
    coordinates, :func:`linear_ratio_batch`: the bound then reaches the range's edge).

    Why (stats25, B2): :func:`~._selective.selective_ratio` models the count's noise as a
    truncated Gaussian. A Laplace tail is exponential: for a true count D ≤ t the
    overshoot D̂ − t is Exp(b) whatever D, so a count that only just passed says little
    about how far below t it lies, and the mean was deflated beyond that model (among
    published releases 0.93 at 11% published, 0.86–0.91 at 3–4%; every miss below).

    Selection inflates D̂ and so shrinks |N̂/D̂| toward 0: it moves the truth above the
    interval of a positive mean, and below that of a negative one (review s25: the lower
    end, left as Fieller's, covered 0.88–0.93 for a negative mean). The upper end is
    raised to N₊/D₋, and for a negative N₋ the lower end lowered to N₋/D₋ (the mirror
    image, at the same α_D and α_N, so the interval misses with probability ≤ α_D + 2α_N
    ≤ α over both sides), with N₊ the sum's one-sided 1 − α_N
    upper bound (its noise is independent of the selection) and D₋ the count's EXACT
    one-sided α_D lower bound conditional on D̂ > t under Laplace(b), α_D + α_N = α/2
    (:data:`_SPLIT`):
    P(D̂ ≥ d | D̂ > t; D) = e^{−(d−t)/b} for D ≤ t (then every D ≤ t is kept: D₋ = 1,
    the fewest reporters a mean has: ``floor``), else D₋ = t − b·ln u, where u = e^{−(D−t)/b}
    solves ½(k/u)/(1 − u/2) = α_D with k = e^{−(d−t)/b}: u = 1 − √(1 − k/α_D).
    Then P(θ above the interval | passed) ≤ α_D + α_N = α/2 (union bound), and below it
    likewise. Applied only where
    conditioning moves D₋ below its unconditional value by > 0.01·b (elsewhere the
    selection is immaterial and Fieller's interval is kept, unwidened).
    """
    lo, hi, ok = base
    a_d, a_n = _SPLIT * (1.0 - level) / 2.0, (1.0 - _SPLIT) * (1.0 - level) / 2.0
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        k = np.exp(-(d_hat - t) / b)
        u = 1.0 - np.sqrt(np.maximum(1.0 - k / a_d, 0.0))
        d_lo = np.where(k >= a_d, floor, np.maximum(t - b * np.log(u), floor))
        free = d_hat - b * math.log(1.0 / (2.0 * a_d))  # the unconditional bound
        b_n = sd_n / math.sqrt(2.0)
        z = NormalDist().inv_cdf(1.0 - a_n)
        margin = b_n * math.log(1.0 / (2.0 * a_n)) if sum_distribution == "laplace" else z * sd_n
        n_hi, n_lo = n_hat + margin, n_hat - margin
        # D₋ = 0 (floor 0): ±inf, clipped to the ratio's range by the caller
        top = np.where(n_hi > 0, n_hi / np.minimum(d_lo, max_count), n_hi / max_count)
        bottom = np.where(n_lo < 0, n_lo / np.minimum(d_lo, max_count), lo)  # the mirror
        use = (d_hat > t) & (d_lo < free - 0.01 * b) & np.isfinite(hi)
    new_hi = np.where(use, np.maximum(hi, top), hi)
    new_lo = np.where(use & (n_lo < 0), np.minimum(lo, bottom), lo)
    with np.errstate(invalid="ignore"):  # inf − inf: no θ in the range was kept (flagged)
        half = np.maximum(0.5 * (hi - lo), 1e-300)
        moved = moved | (use & ((new_hi - hi > 0.01 * half) | (lo - new_lo > 0.01 * half)))
    return (new_lo, new_hi, ok), moved


def linear_ratio_batch(
    released: npt.ArrayLike,
    std: FloatArray,
    num: FloatArray,
    den: FloatArray,
    *,
    bounds: tuple[float, float],
    guard: Guard,
    level: float = 0.95,
    distribution: MechanismKind = "laplace",
) -> Batch:
    """The ratio (num·x̂)/(den·x̂) of R releases x̂ (R, d), key :data:`RATIO`.

    ``std`` (d,) is each coordinate's noise s.d., ``num``/``den`` (d,) fixed weights (a
    bucket's share: an indicator of the bucket over one of all buckets; a bucket's mean:
    two indicators), ``bounds`` the ratio's range, ``guard`` the denominator's (its
    public maximum). As accuracy's trace / total: Fieller's interval, joined with the one
    conditional on the guard where the denominator only just passed it
    (:func:`conditional_fieller`); unusable when the denominator is not clearly positive.
    Numerator and denominator may share coordinates (a share): the weights carry that.

    Why (stats25, B1): the delta interval on a dominant bucket's share (80–100% of the
    counts, the total at 8–16 noise scales) covered 0.886–0.938 among published
    releases, its upper end short of the truth (N/(N + rest) is concave near 1); this
    one covers ≥ 0.95 there and is narrower.

    Why (stats4, F1/F4): where the denominator is ONE Laplace coordinate that the
    numerator does not share (a calibration bucket's gap sum over its count; the pooled
    ratio's ΣΣacross² over ΣΣalong²) and it only just passed its guard, the truncated-
    Gaussian model of the selection is too light, as for a reporter count (stats25, B2):
    0.889–0.931 among published releases (4–17% published). Its upper end (a negative
    ratio's lower end) is then at least :func:`_laplace_count_bound`'s, with no whole-
    number floor: the range's edge within ~4 noise scales of the guard, wider than before
    up to ~10 (review s26; docs/intervals.md). A denominator summing two or more Laplace
    coordinates, or one the numerator shares, is the whole range where it only just
    passed (:func:`_laplace_sum_window`; review s28s: (A + D)/D covered 0.91–0.92 there):
    for a share of a total (stats4, F3: a small share covered 0.92–0.94 there) and for
    any other numerator (stats6, F-RATIO2: a mean gap over 2–3 calibration buckets, the
    counts not in the numerator, covered 0.921–0.945 among published releases).
    """
    bounds = real_pair(bounds, "bounds", finite=False)  # by type: no text, None, NaN
    x = as_finite(as_real(released, "released").reshape(-1), "released")
    d = std.shape[0]
    if d == 0 or x.size == 0 or x.size % d:
        raise InvalidInput(
            f"released must hold {d} coordinates per release (one per weight of num and "
            f"den), got {x.size}"
        )
    x = x.reshape(-1, std.shape[0])
    r = x.shape[0]
    w_num = np.broadcast_to(num * std, (r, std.shape[0]))
    w_den = np.broadcast_to(den * std, (r, std.shape[0]))
    n_hat, d_hat = x @ num, x @ den
    lin_den = Linear.of(d_hat, w_den, level, distribution)
    base, moved = conditional_fieller(
        n_hat, lin_den, w_num, w_den, guard, level, distribution, bounds
    )
    below = np.flatnonzero(den)
    t = guard.factor * lin_den.q * lin_den.se  # the guard's threshold on the denominator
    if distribution == "laplace" and below.size == 1 and num[below[0]] == 0.0:
        # one Laplace coordinate below, independent of the numerator (see the doc)
        j = int(below[0])
        sd_n = np.full(r, math.sqrt(float(np.sum((num * std) ** 2))))
        b_d = np.full(r, abs(float(den[j])) * float(std[j]) / math.sqrt(2.0))
        base, moved = _laplace_count_bound(
            base, moved, n_hat, sd_n, "laplace", d_hat, b_d, t, guard.maximum, level, floor=0.0
        )
    elif distribution == "laplace" and below.size >= 1:
        # a sum of Laplace coordinates below (a share's total, a gap over several buckets),
        # or one the numerator shares ((A + D)/D: review s28s, 0.91 among published)
        b_max = float(np.max(np.abs(den[below]) * std[below])) / math.sqrt(2.0)
        base, moved = _laplace_sum_window(base, moved, d_hat, t, b_max, level)
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = n_hat / d_hat
        w = np.nan_to_num((w_num - theta[:, None] * w_den) / d_hat[:, None])
    cov = {RATIO: {guard.key: np.sum(w * w_den, axis=-1)}}
    batch = assemble(
        {RATIO: Linear.of(theta, w, level, distribution)}, {guard.key: lin_den}, cov,
        level=level, ranges={RATIO: bounds}, guards={RATIO: (guard,)},
        methods={RATIO: method_name("fieller", distribution)},
        base={RATIO: base}, adjusted={RATIO: moved}, conditional=(RATIO,),
    )  # fmt: skip
    # Fieller's set is skewed, not centred: at an edge it is clipped (the truth lies in
    # the range, so clipping keeps its coverage), not kept at half its width, which
    # stretched a dominant share's [0.53, 1.97] to [0.28, 1] (median width 1.0, not 0.6)
    ok = batch.code[RATIO] == 0
    low = np.where(ok, np.clip(base[0], *bounds), batch.low[RATIO])
    high = np.where(ok, np.clip(base[1], *bounds), batch.high[RATIO])
    return replace(batch, low={RATIO: low}, high={RATIO: high},
                   edge={RATIO: np.zeros(r, dtype=bool)})  # fmt: skip


def _laplace_sum_window(
    base: Base, moved: BoolArray, d_hat: FloatArray, t: FloatArray, b: float, level: float
) -> tuple[Base, BoolArray]:
    """A ratio N/T whose denominator, a sum of Laplace coordinates (a share's total, a
    gap's counts over several buckets), passed its guard by < b·ln(1/α_D): the whole range.

    Why (stats4, F3): the guard selects totals whose noise lifted them, and under
    Laplace that lift often comes from one coordinate, the share's own with probability
    ~k/n: a small share was inflated past its interval (0.923–0.94 among published
    releases at a total of 1–2 noise scales, every miss below the interval).

    Given T̂ > t, the true total's exact one-sided 1 − α_D lower bound is
    inf{T ≥ 0 : P(T̂ ≥ observed | T̂ > t; T) > α_D}. For T ≤ t that probability is
    S(x + u)/S(x) (S the noise's survival function, x = t − T, u = T̂ − t), which is
    nonincreasing in x (the noise, a sum of Laplace terms, is log-concave) and tends to
    e^{−u/b} (b the largest term's scale): where e^{−u/b} > α_D every T down to 0 is
    kept, the bound is 0, and N/T is bounded by nothing (a share: N ≤ N₊ and M = T − N ≤
    M₊ give [1 − M₊/T₋, N₊/T₋]; any other N: [N₋/T₋, N₊/T₋]; the whole range at T₋ = 0;
    stats6, F-RATIO2, for the second). Further from the guard the interval
    is left as it was. Measured among all published releases at level 0.95: ≥ 0.954
    (3–50 buckets, shares 0–1, totals 0.6–32 noise scales, unequal scales, level 0.9
    too). Known shortfalls (review s27): among releases whose total passed just beyond
    the window the small-share intervals cover less (0.83–0.93 at 0.95), and at level
    0.99 the small-share cells cover 0.980–0.984 overall. The total's exact conditional
    bound T₋ > 0 beyond the window would close them, at a large width cost.
    α_D is :func:`_laplace_count_bound`'s.
    """
    lo, hi, ok = base
    a_d = _SPLIT * (1.0 - level) / 2.0
    near = (d_hat > t) & (d_hat - t <= b * math.log(1.0 / a_d)) & np.isfinite(hi)
    new_lo, new_hi = np.where(near, -np.inf, lo), np.where(near, np.inf, hi)
    return (new_lo, new_hi, ok), moved | near


def _reals(values: npt.ArrayLike, name: str) -> npt.NDArray[np.float64]:
    """``values`` as a flat float64 array, or :class:`InvalidInput` naming ``name`` (by
    type: :func:`~dpledger.metrics._reading.as_real`; an integer past a double is inf)."""
    return as_real(values, name).reshape(-1)

"""Published intervals from linearised noise: guards, selection adjustment, ranges, reasons.

Every metric arrives as :class:`Linear` moments over a batch of R releases — its plug-in
value on the UNCLAMPED release, the s.e. and quantile of its linearised noise — with a
base interval (``value ± q·se`` by default; Fieller's, a transformed or a Monte Carlo
interval where the caller measured that it covers better). Then, per release:

1. **Guards.** A metric names its denominators (:class:`~._intervals.Guard`); each must
   be *clearly positive*: ``min(D̂, D_max) > factor·q_D·se_D``, with se_D, q_D its own
   noise s.e. and quantile and D_max a public upper bound on its true value (cohort ×
   cap). The first condition is Fieller's (the ratio's confidence set is bounded) made
   stricter by ``factor`` where the delta method needs a denominator well clear of the
   noise; the second keeps a pure-noise release flagged whatever the draw. A metric
   with a failed guard, or undefined at the release, is UNUSABLE: its interval is the
   whole range, with a reason in words.
2. **Selection adjustment.** A usable metric was published because its guards passed;
   near a threshold that selects releases whose noise pushed a denominator up, and the
   metric with it. The interval is widened to the selective (truncated-Gaussian) one of
   :mod:`._selective`, so coverage holds among the published releases too.
3. **Range.** The interval is clipped to the metric's range, but one crossing an edge
   (accuracy 0.999, R² near 1) keeps at least half its width, ending at that edge
   (clipping alone left intervals 5e-4 wide when the estimate lay past the edge; the
   truth is on the range's side, so widening toward it only adds coverage). One lying
   wholly outside the range (an extreme noise draw) is flagged unusable, and so is one
   with an infinite end, unless the metric may be one-sided (``one_sided``: R², whose
   upper end alone is published where its lower one is −∞; flagging those would select
   on the same noisy denominator the selection adjustment conditions on, audit s30 F3).

Every rule reads only the release, its public scale and public bounds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dpledger.metrics._intervals import (
    Guard,
    Interval,
    RowsFn,
    check_options,
    linearize,
    method_name,
    quantile_factor,
    z_value,
)
from dpledger.metrics._redraws import draw_interval, redraws
from dpledger.metrics._segments import FloatArray
from dpledger.metrics._selective import selective_bounds
from dpledger.types import IntervalMethod, MechanismKind

__all__ = [
    "FEW_CLASSES",
    "FLAT",
    "OUTSIDE",
    "TOO_NOISY",
    "UNBOUNDED",
    "Base",
    "Batch",
    "BoolArray",
    "Estimates",
    "Linear",
    "assemble",
    "batch_intervals",
    "clear",
    "estimates",
    "method_of",
    "monte_carlo",
    "to_intervals",
]

BoolArray = npt.NDArray[np.bool_]
Base = tuple[FloatArray, FloatArray, BoolArray]  # (low, high, defined) per release
_UNDEFINED = -1
OUTSIDE = -2
"""Code of an interval lying wholly outside the metric's range (an extreme noise draw)."""
FEW_CLASSES = -3
"""Code of a per-class average with fewer than half of its classes clear of the noise (or,
for a macro average over 3 or more classes, a class within the noise and at most 2
measured, except at 3–16 classes (:mod:`._simultaneous`); at 2 classes, both classes bounded)."""
UNBOUNDED = -4
"""Code of an interval with an infinite end (R²'s low end at −∞): the metric's whole range."""
TOO_NOISY = -5
"""Code of a macro average at 2–6 classes (or MCC at 2) whose noise is too large for the
class rule, by a public rule (``_two_class.max_noise``): it reads no released value."""
FLAT = -6
"""Code of an interval of zero width (its metric flat at the release: no slope, or redraws
without spread): it would claim the true value exactly (review 40)."""
_NOTICE = 0.01  # a widening below 1% of the half-width is not worth naming
_ONE_SIDED = (
    "an upper bound only, its denominator too near the noise to bound the metric below; "
    "quote the bound, not the point value"
)
"""What a one-sided interval's method says (its low end is −∞; see :class:`Batch`)."""


@dataclass(frozen=True)
class Linear:
    """A quantity's plug-in value, linearised-noise s.e. and quantile over R releases."""

    value: FloatArray
    se: FloatArray
    q: FloatArray

    @classmethod
    def of(
        cls, value: FloatArray, weights: FloatArray, level: float, dist: MechanismKind
    ) -> Linear:
        """From noise weights (R, d) in noise-s.d. units (see ``quantile_factor``)."""
        se, q = quantile_factor(weights, level, dist)
        return cls(np.asarray(value, dtype=np.float64), se, q)


@dataclass(frozen=True)
class Batch:
    """Intervals of several metrics over a batch of R releases (arrays of shape (R,)).

    ``code[key]`` is 0 for a usable interval, i + 1 when ``guards[key][i]`` failed, −1 when
    the metric is undefined at the release, −2 (:data:`OUTSIDE`) when its interval lies
    wholly outside the range, −3 (:data:`FEW_CLASSES`) when a per-class average has fewer
    than half of its classes clear of the noise, −4 (:data:`UNBOUNDED`) when an end of its
    interval is infinite (the metric's whole range), except the low end of a metric allowed
    one-sided (R²: code 0, marked in ``one_sided``). ``den``, ``den_se`` and ``den_q`` hold
    each denominator's value, s.e. and quantile. ``method[key]`` names the base interval;
    ``adjusted[key]`` marks releases widened for selection, ``edge[key]`` those made
    one-sided at an edge of the range, ``bounded[key]`` counts the classes within the noise
    that a per-class average bounds rather than measures (``classes[key]`` of them in all; 0
    for a metric that is not a per-class average); ``per_class[key]`` names the releases
    whose interval is the simultaneous per-class one (:mod:`._simultaneous`);
    ``one_sided[key]`` marks usable releases published as an upper bound only (low −∞).
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
    method: dict[str, str]
    adjusted: dict[str, BoolArray]
    edge: dict[str, BoolArray]
    bounded: dict[str, npt.NDArray[np.int64]]
    classes: dict[str, int]
    per_class: dict[str, tuple[str, BoolArray]] = field(default_factory=dict)
    one_sided: dict[str, BoolArray] = field(default_factory=dict)

    def usable(self, key: str) -> BoolArray:
        """Which releases give ``key`` a usable interval."""
        ok: BoolArray = np.equal(self.code[key], 0)
        return ok


def _threshold(d: Linear, g: Guard) -> FloatArray:
    return g.factor * d.q * d.se


def clear(d: Linear, g: Guard) -> BoolArray:
    """Clearly positive: min(value, public maximum) > factor·q·se (or > 0 with no noise)."""
    capped = np.minimum(d.value, g.maximum)
    clear: BoolArray = np.where(d.se > 0, capped > _threshold(d, g), capped > 0)
    return clear


def _selection(
    m: Linear,
    dens: Mapping[str, Linear],
    cov: Mapping[str, FloatArray],
    guards: Sequence[Guard],
    rows: BoolArray,
    level: float,
    search: tuple[float, float],
) -> tuple[FloatArray, FloatArray]:
    """Widening (below, above) ≥ 0 of ``value ± q·se`` to the selective interval."""
    zero = np.zeros(m.value.shape)
    idx = np.flatnonzero(rows & (m.se > 0))
    if not guards or idx.size == 0:
        return zero, zero
    theta, se, q = m.value[idx], m.se[idx], m.q[idx]
    below = np.full(idx.size, np.inf)
    above = np.full(idx.size, np.inf)
    for g in guards:
        d = dens[g.key]
        gamma = cov[g.key][idx] / (se * se)  # D̂ = U + γ·θ̂, U independent of θ̂
        with np.errstate(over="ignore", divide="ignore"):
            slack = (d.value[idx] - _threshold(d, g)[idx]) / np.abs(gamma)
        below = np.where(gamma > 0, np.minimum(below, slack), below)
        above = np.where(gamma < 0, np.minimum(above, slack), above)
    s_eff = se * q / z_value(level)  # Laplace: reproduce q·se far from the threshold
    far = 1e3 * s_eff
    lo_s = np.maximum(search[0], theta - far) if math.isfinite(search[0]) else theta - far
    hi_s = np.minimum(search[1], theta + far) if math.isfinite(search[1]) else theta + far
    lo, hi = selective_bounds(theta, s_eff, below, above, level, (lo_s, hi_s))
    out_lo, out_hi = zero.copy(), zero.copy()
    out_lo[idx] = np.maximum(theta - q * se - lo, 0.0)
    out_hi[idx] = np.maximum(hi - theta - q * se, 0.0)
    return out_lo, out_hi


def assemble(
    lin: Mapping[str, Linear],
    dens: Mapping[str, Linear],
    cov: Mapping[str, Mapping[str, FloatArray]],
    *,
    level: float,
    ranges: Mapping[str, tuple[float, float]],
    guards: Mapping[str, Sequence[Guard]],
    methods: Mapping[str, str],
    base: Mapping[str, Base] | None = None,
    adjusted: Mapping[str, BoolArray] | None = None,
    select: Mapping[str, Sequence[Guard]] | None = None,
    conditional: Sequence[str] = (),
    one_sided: Sequence[str] = (),
) -> Batch:
    """Intervals, codes and estimates of every metric in ``lin`` (see the module doc).

    ``cov[key][g]`` is Cov(metric, denominator g) of the linearised noise (R,) for every
    guard g of ``key``; ``base[key]`` replaces ``value ± q·se`` as the base interval;
    ``adjusted[key]`` marks base intervals the caller already adjusted for selection;
    the base interval of a key in ``conditional`` already conditions on its guards
    having passed (:func:`~._selective.selective_ratio`), so it is not widened again; a
    key in ``one_sided`` may be published with a low end of −∞ (an upper bound only).
    """
    out_ranges = {k: ranges.get(k, (-math.inf, math.inf)) for k in lin}
    guard_map = {k: tuple(guards.get(k, ())) for k in lin}
    low: dict[str, FloatArray] = {}
    high: dict[str, FloatArray] = {}
    codes: dict[str, npt.NDArray[np.int64]] = {}
    flagged: dict[str, BoolArray] = {}
    edge: dict[str, BoolArray] = {}
    upper_only: dict[str, BoolArray] = {}
    for key, m in lin.items():
        r_lo, r_hi = out_ranges[key]
        if base and key in base:
            lo, hi, ok = base[key]
        else:
            lo, hi, ok = m.value - m.q * m.se, m.value + m.q * m.se, np.ones(m.value.shape, bool)
        defined = np.isfinite(m.value) & np.isfinite(m.se) & ~np.isnan(lo) & ~np.isnan(hi) & ok
        code = np.where(defined, 0, _UNDEFINED).astype(np.int64)
        for i, g in reversed(list(enumerate(guard_map[key]))):
            code = np.where(clear(dens[g.key], g), code, i + 1)
        usable = code == 0
        chosen = () if key in conditional else guard_map[key] + tuple((select or {}).get(key, ()))
        wide_lo, wide_hi = _selection(
            m, dens, cov.get(key, {}), chosen, usable, level, (r_lo, r_hi)
        )
        half = np.maximum(m.q * m.se, 1e-300)
        pre = (adjusted or {}).get(key, np.zeros(usable.shape, dtype=bool))
        flagged[key] = usable & (pre | (np.maximum(wide_lo, wide_hi) > _NOTICE * half))
        with np.errstate(invalid="ignore"):
            lo, hi = lo - wide_lo, hi + wide_hi
            outside = usable & ((lo > r_hi) | (hi < r_lo))
            code = np.where(outside, OUTSIDE, code)
            usable = code == 0
            half = 0.5 * (hi - lo)  # at least half the width survives at an edge
            cross_hi, cross_lo = usable & (hi > r_hi), usable & (lo < r_lo)
            lo = np.where(cross_hi, np.minimum(lo, r_hi - half), lo)
            hi = np.where(cross_lo, np.maximum(hi, r_lo + half), hi)
            lo, hi = np.clip(lo, r_lo, r_hi), np.clip(hi, r_lo, r_hi)
            # an end at ±∞ (only where the range is unbounded, e.g. R² ≤ 1): the whole range,
            # except a low end of a one-sided metric (R² ≤ high: still a statement)
            ends = np.isfinite(hi) if key in one_sided else np.isfinite(lo) & np.isfinite(hi)
            code = np.where(usable & ~ends, UNBOUNDED, code)
            code = np.where((code == 0) & ~(hi > lo), FLAT, code)  # zero width: says "exactly"
            usable = code == 0
            upper_only[key] = usable & ~np.isfinite(lo)
            low[key] = np.where(usable, lo, r_lo)
            high[key] = np.where(usable, hi, r_hi)
        edge[key] = usable & (cross_hi | cross_lo) & ~upper_only[key]  # −∞: nothing kept
        codes[key] = code
    estimate = {k: np.clip(m.value, *out_ranges[k]) for k, m in lin.items()}
    return Batch(
        estimate, low, high, codes, guard_map,
        {k: d.value for k, d in dens.items()}, {k: d.se for k, d in dens.items()},
        {k: d.q for k, d in dens.items()}, out_ranges,
        {k: methods.get(k, "delta") for k in lin}, flagged, edge,
        {k: np.zeros(len(m.value), dtype=np.int64) for k, m in lin.items()},
        dict.fromkeys(lin, 0), one_sided=upper_only,
    )  # fmt: skip


def monte_carlo(
    f_rows: RowsFn,
    x: FloatArray,
    std: FloatArray,
    *,
    level: float,
    distribution: MechanismKind,
    draws: int,
    seed: int,
) -> dict[str, Base]:
    """Percentile intervals of f(x̂ + η*), η* redrawn at the public scale (:func:`redraws`)."""
    r = x.shape[0]
    low: dict[str, FloatArray] = {}
    high: dict[str, FloatArray] = {}
    for rows, stack in redraws(x, std, distribution=distribution, draws=draws, seed=seed):
        for key, v in f_rows(stack).items():
            vv = np.asarray(v, dtype=np.float64).reshape(-1, draws)
            lo_q, hi_q = draw_interval(vv, level)
            low.setdefault(key, np.empty(r))[rows] = lo_q
            high.setdefault(key, np.empty(r))[rows] = hi_q
    return {k: (low[k], high[k], np.ones(r, dtype=bool)) for k in low}


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
    override: Mapping[str, Base] | None = None,
    methods: Mapping[str, str] | None = None,
) -> Batch:
    """Intervals of every key of ``f_rows`` for each row of ``x`` (R, d), by central differences.

    ``override`` replaces the delta interval of some keys (named in ``methods``) with a
    precomputed ``(low, high, defined)`` (e.g. Fieller's for a ratio).
    """
    check_options(level, method, distribution=distribution, draws=draws, seed=seed)
    centre, weights = linearize(f_rows, x, std, step)
    lin = {k: Linear.of(centre[k], weights[k], level, distribution) for k in centre}
    guard_map = {k: tuple(v) for k, v in (guards or {}).items()}
    dens: dict[str, Linear] = {}
    cov: dict[str, dict[str, FloatArray]] = {}
    if denominators is not None and guard_map:
        d_centre, d_weights = linearize(denominators, x, std, step)
        dens = {k: Linear.of(v, d_weights[k], level, distribution) for k, v in d_centre.items()}
        for key, gs in guard_map.items():
            cov[key] = {g.key: np.sum(weights[key] * d_weights[g.key], axis=-1) for g in gs}
    names = {k: method_name("delta", distribution) for k in centre} | dict(methods or {})
    base = dict(override or {})
    if method == "monte_carlo":
        base = monte_carlo(f_rows, x, std, level=level, distribution=distribution,
                           draws=draws, seed=seed)  # fmt: skip
        names = dict.fromkeys(centre, "monte_carlo")
    return assemble(lin, dens, cov, level=level, ranges=ranges, guards=guard_map,
                    methods=names, base=base)  # fmt: skip


def _words(x: float) -> str:
    """A number for a reason string: grouped digits up to 10¹⁵, then 3 significant digits."""
    if not math.isfinite(x):
        return "not finite"
    return f"{x:,.0f}" if 100 <= abs(x) < 1e15 else f"{x:.3g}"


def _reason(batch: Batch, key: str, row: int) -> str | None:
    code = int(batch.code[key][row])
    if code == 0:
        return None
    if code == OUTSIDE:
        lo, hi = batch.ranges[key]
        return (
            f"the interval lies wholly outside the metric's range [{lo:g}, {hi:g}]: the "
            f"noise draw was extreme, or (where that range is a chosen clip) the true value "
            f"lies beyond it — then widen the clip; this release says nothing about the metric"
        )
    if code == UNBOUNDED:
        lo, hi = batch.ranges[key]
        end = "lower" if not math.isfinite(lo) else "upper"
        return (
            f"noise swamps it: the interval has no {end} bound, so it is the metric's whole "
            f"range [{lo:g}, {hi:g}] and says nothing about the metric"
        )
    if code == _UNDEFINED:
        return (
            "undefined at the released values: a denominator is 0, negative or too small to "
            "divide by, or no value in the metric's range is consistent with them at this level"
        )
    if code == FLAT:
        return (
            "the interval has zero width: the metric is flat at the released values (no "
            "slope, or no spread over the redraws), so no spread of the noise was measured, "
            "yet the true value may differ; a metric clipped inside f (e.g. min(ratio, 1)) "
            "past its clip does this: compute it unclipped and pass bounds instead"
        )
    if code == TOO_NOISY:
        from dpledger.metrics._two_class import max_noise  # imports this module

        c = batch.classes[key]
        return (
            f"noise swamps it: at {c} classes the noise scale is above {max_noise(c) or 0:.3g} "
            f"of a cell of the largest matrix the cohort allows (cohort × cap / {c * c}); "
            f"there a good model's per-class counts pass their rules mostly by noise and the "
            f"published releases under-covered (0.80-0.94), so none is published (a public "
            f"rule: it reads no released value)"
        )
    if code == FEW_CLASSES:
        u, c = int(batch.bounded[key][row]), batch.classes[key]
        if c == 2 and u == 2:
            return (
                "noise swamps it: neither of its 2 classes has a count whose interval lies "
                "above its threshold, so both are bounded in [0, 1] and so is the average"
            )
        if 2 * u > c:
            return (
                f"noise swamps it: {u} of its {c} classes have a count within the noise "
                f"(more than half), so the average would be mostly the bound [0, 1] of "
                f"those classes"
            )
        if c == 1:
            return (
                "noise swamps it: its one class's count is not clear of twice its threshold; "
                "a class that only just passed did so because noise inflated its count"
            )
        return (
            f"noise swamps it: {u} of its {c} classes have a count within the noise and at "
            f"most 2 are measured; a class that only just passed did so because noise "
            f"inflated its count, and one or two are too few to average that selection out "
            f"(such averages covered 0.55-0.88)"
        )
    g = batch.guards[key][code - 1]
    value, se, q = (float(a[g.key][row]) for a in (batch.den, batch.den_se, batch.den_q))
    need = g.factor * q
    if not (math.isfinite(need) and math.isfinite(se)):
        return f"the noisy {g.key} ({_words(value)}) is beyond floating-point range"
    if g.maximum <= need * se:
        return (
            f"noise swamps it: even the largest possible {g.key} ({_words(g.maximum)}) is "
            f"within {need:.2f} × its noise s.e. ({_words(se)}) of 0"
        )
    return (
        f"noise swamps it: the noisy {g.key} ({_words(value)}) is not clearly positive "
        f"(needs > {need:.2f} × its noise s.e. {_words(se)})"
    )


def method_of(batch: Batch, key: str, row: int) -> str:
    """The interval method actually used for ``key`` at release ``row``, in words."""
    name, rows = batch.per_class.get(key, ("", np.zeros(row + 1, dtype=bool)))
    words = [name if rows[row] else batch.method[key]]
    if batch.adjusted[key][row]:
        words.append("selection-adjusted")
    if batch.edge[key][row]:
        words.append("clipped at the range's edge, keeping half its width")
    u = int(batch.bounded[key][row])
    if u and key == "mcc":  # 2 classes, one bounded: see _two_class.mcc_two_classes
        words = ["hull of sign·√(J·Mk) over balanced accuracy's and precision_macro's "
                 "intervals, a class bounded in [0, 1]"]  # fmt: skip
    elif u:
        words.append(f"{u} class{'es' if u > 1 else ''} within the noise bounded, not measured")
    one = batch.one_sided.get(key)
    if one is not None and one[row]:
        whole = batch.high[key][row] >= batch.ranges[key][1]
        words.append(f"one-sided: {_ONE_SIDED}" + (" (here the whole range)" if whole else ""))
    return ", ".join(words)


def to_intervals(batch: Batch, level: float, row: int = 0) -> dict[str, Interval]:
    """The :class:`Interval` of every key for one release of the batch."""
    out = {}
    for key in batch.code:
        reason = _reason(batch, key, row)
        out[key] = Interval(
            float(batch.low[key][row]),
            float(batch.high[key][row]),
            level,
            method_of(batch, key, row) if reason is None else batch.method[key],
            reason,
        )
    return out


Estimates = tuple[dict[str, float], dict[str, Interval]]
"""Point estimates and intervals of every derived metric of one release."""


def estimates(batch: Batch, level: float, row: int = 0) -> Estimates:
    """The point estimates and :class:`Interval` of every key for one release."""
    return {k: float(v[row]) for k, v in batch.estimate.items()}, to_intervals(batch, level, row)

"""Estimates and intervals for the 12 classification metrics of noisy confusion matrices.

Post-processing of a released C×C matrix (UNCLAMPED: clamping negative cells biases every
near-zero cell upward). Point estimates are plug-ins, clipped to each metric's range.
Intervals were chosen by measured coverage (``tests/test_coverage.py`` re-measures it,
overall and among the releases not flagged; docs/intervals.md):

* accuracy and the metrics equal to it under either ``labels`` (micro P/R/F1, weighted
  recall): Fieller's interval for trace/total, joined, where the total only just passed
  its guard, with the interval conditional on its having passed
  (:func:`~._ratio.conditional_fieller`: releases passing in the marginal zone are those
  whose noise inflated the total; unconditional intervals covered 0.88 among them);
* the other metrics: the delta method with the noise law's quantile, gradients analytic
  (:mod:`._confusion_linear`), each per-class ratio of an average corrected for its
  second-order bias from the public cell variances (0.77–0.91 covered at 50–100
  classes without it: ``tests/test_coverage_many_classes.py``);
* every other interval widened for selection where a guard only just passed
  (:mod:`._assemble`);
* with ``method="monte_carlo"``, the metrics other than accuracy's get the redraws'
  percentile interval corrected for its median bias (:mod:`._flam_monte_carlo`), with
  the same guards, class bounds and selection widening.

Which classes a per-class average measures is decided by a public rule on the release:
class k is measured when its count (true count for recall and balanced accuracy,
predicted count for precision, their sum for F1) is clear of the noise — above
:data:`CLASS_FACTOR` × q·se, and its public maximum (cohort × cap) above that too. Below
that the delta method on a ratio over that count under-covers (0.86–0.91 at 1.5–2 × with
no bound on the other classes; the bound below makes 2 × enough, measured among usable
releases in every regime of ``tests/test_coverage.py``). A class that is not measured —
rare, absent from the cohort, or lost in the noise — is BOUNDED: its per-class value
lies in [0, 1], so a macro average or balanced accuracy over C classes, K measured with
interval [μ₋, μ₊], lies in [K·μ₋/C, (K·μ₊ + C − K)/C] whether or not that class occurs
(scikit-learn's ``labels=range(C)`` scores an absent class 0, its default ``labels`` and
balanced accuracy leave it out: the bound holds for either); a weighted average's terms
are bounded by their classes' true counts. Flags: the total count not clear of the
noise (every metric); fewer than half of the classes measured (a per-class average: it
would be mostly bound, and the few classes that pass are those whose noise inflated
their count — measured among such releases, 0.83–0.86 covered), or, for a macro
average at 3 or more classes, a class bounded with at most :data:`FEW_MEASURED` classes
measured — never for a macro average since review stats (2026-12-03; at 3–16 classes
before): at any class count (either ``labels``) the macro averages are never flagged by a
class's count, and where a class is not far clear of the noise
take the extreme averages of simultaneous per-class Fieller intervals over the class
sets that may be present instead (:mod:`._simultaneous`; that flag was a cut on a rare
class's noisy count, 0.62–0.93 covered among published releases, 0.55–0.82 with a class
absent and ``labels="present"``) — (at 3–6 classes the macro averages are not published
at all above a public noise limit, :data:`~._two_class.FEW_CLASS_MAX_NOISE`); and, for
MCC, either term of its denominator product, N² − Σp² and N² − Σt², not above 3 × q·se
of its own noise (:data:`SPREAD_FACTOR`; a 2-class model with a 10% minority class within
2–4 s.e. of the noise covered 0.87–0.92 among usable releases with per-class count guards
alone) — from 17 classes only: at 3–16 classes the spread guards flag nothing, and where a
spread is not far clear MCC's interval is Fieller's set for A / √(B·D)
(:mod:`._mcc_fieller`; the guard was a cut, 0.91–0.94 covered among the 7–17% it
published with a weak model and a rare class at 3 classes, Laplace noise 0.15 of a cell).

At 2 classes a hard cut selects (cls2, cls3): a macro average measures a class only
when its count's own interval lies above its threshold (:data:`TWO_CLASS_FACTOR`) and
BOUNDS every other class, published with that bound rather than flagged (flagged only
when both classes are bounded); MCC there is the hull of √(J·Mk) over the intervals of
balanced accuracy and precision_macro, which carry those bounds
(:func:`_two_class_measured`, :func:`~._two_class.mcc_two_classes`). Since s26c that
rule's flag (both classes bounded) no longer decides publication either: wherever a
class is not far clear of the noise the 2-class macro averages take the simultaneous
per-class sets of :mod:`._simultaneous`, as at 3–6 classes (stats4, F5: with a public
maximum 2–3 × the true total the flag selected, 0.70–0.94 covered among published). MCC
no longer needs every class's count clear (statistics review, D5): that flagged it
whenever a class was absent or never predicted, at any noise, although MCC is defined
and measured there; without it every cell of a 960-cell grid (2–10 classes; rare,
dominant, absent, never-predicted and balanced classes; noise 0.1%–300% of a cell;
Laplace and Gaussian; 1,000 releases) covered ≥ 0.93 overall and among usable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from dpledger.errors import InvalidInput
from dpledger.metrics._assemble import (
    FEW_CLASSES,
    Base,
    Batch,
    BoolArray,
    Linear,
    assemble,
    clear,
)
from dpledger.metrics._confusion_linear import FAMILY, cell_weights, classification_gradients
from dpledger.metrics._flam_monte_carlo import MONTE_CARLO, classification_monte_carlo
from dpledger.metrics._intervals import (
    Guard,
    check_options,
    method_name,
    noise_std,
    quantile_factor,
)
from dpledger.metrics._mcc_fieller import MCC_FIELLER_CLASSES, mcc_fieller
from dpledger.metrics._ratio import conditional_fieller
from dpledger.metrics._reading import FloatArray, as_real, real_limit
from dpledger.metrics._segments import as_finite
from dpledger.metrics._simultaneous import SIMULTANEOUS_CLASSES, simultaneous_macro
from dpledger.metrics._two_class import (
    FEW_CLASS_MAX_NOISE,
    MACRO_KEYS,
    TWO_CLASS_MAX_NOISE,
    mcc_two_classes,
    too_noisy,
)
from dpledger.metrics.flam import CLASSIFICATION_KEYS
from dpledger.types import IntervalMethod, Labels, MechanismKind

__all__ = [
    "CLASSIFICATION_RANGES",
    "CLASS_FACTOR",
    "FEW_CLASS_MAX_NOISE",
    "FEW_MEASURED",
    "SECURE",
    "SPREAD_FACTOR",
    "TWO_CLASS_FACTOR",
    "TWO_CLASS_MAX_NOISE",
    "classification_batch",
]

CLASSIFICATION_RANGES: Mapping[str, tuple[float, float]] = {
    **{k: (0.0, 1.0) for k in CLASSIFICATION_KEYS},
    "mcc": (-1.0, 1.0),
}
"""The range of every classification metric (an unusable one's interval)."""

TOTAL = "total count"
CLASS_FACTOR = 2.0
"""A class is measured in a per-class average when its count exceeds this many times q·se."""
SPREAD_FACTOR = 3.0
"""MCC needs each term of its denominator's product, N² − Σp² and N² − Σt², above this
many times q·se of its own linearised noise."""
FEW_MEASURED = 2
"""At 3 or more classes a macro average (or balanced accuracy) is unusable when a class
is bounded and at most this many are measured (at 3–16 classes the rule of
:mod:`._simultaneous` replaces it: this flag is itself a cut, and among published
releases a rare class near its threshold covered 0.62–0.93). A class that only just passed was
selected by noise that inflated its count, which deflates its ratio, and one or two such
ratios are not averaged out: among published releases they covered 0.84–0.88 (2
classes, one bounded), 0.90–0.93 (3 classes, one bounded), 0.92 (4 classes, two bounded)
and 0.55–0.85 (2 classes, the minority class only just measured), against 0.93–0.95
with 3 measured (4 classes, one bounded) and ≥ 0.957 at 10 classes (statistics review,
D2). At 2 classes the rule is :data:`TWO_CLASS_FACTOR`'s instead: flagging there was
itself a cut that selected (cls2). A weighted average bounds its unmeasured terms by
their classes' counts and covered ≥ 0.999 there."""
SECURE = 2.0
"""A 1-class matrix's macro averages need its count clear of this many times its
threshold (at 2 classes this cut, with a flag below it, selected deflated precision:
0.61–0.90 covered among published releases; cls2)."""
TWO_CLASS_FACTOR = CLASS_FACTOR + 1.0
"""At 2 classes a macro average (and balanced accuracy) measures a class only when its
count exceeds this many times q·se, that is when the count's own interval (at the
metric's level) lies wholly above its threshold :data:`CLASS_FACTOR` × q·se; every other
class is bounded in [0, 1], not flagged (see :func:`_two_class_measured`)."""
SPREAD_P = "MCC's predicted-class spread N² − Σp²"
SPREAD_T = "MCC's true-class spread N² − Σt²"
"""A class is measured when its count exceeds this many times q·se (see the module doc)."""
# With either labels these equal Σ diagonal / Σ all (an absent class adds 0 to every micro
# sum and weighs 0): a ratio of two linear sums.
_ACCURACY_LIKE = ("accuracy", "precision_micro", "recall_micro", "f1_micro", "recall_weighted")
_BLOCK = 1 << 21  # floats per (R, C, C) weight array: bounds memory at ~16 MB


def _confusion_batch(released: npt.ArrayLike) -> FloatArray:
    x = as_real(released, "released")  # by type: no text or objects (audit s29, F5)
    if x.ndim != 2:
        raise InvalidInput(f"a batch of confusion releases has shape (R, C²), got {x.shape}")
    c = math.isqrt(x.shape[-1])
    if c == 0 or c * c != x.shape[-1]:
        raise InvalidInput(f"a confusion release has C² entries, got {x.shape[-1]}")
    return as_finite(x.reshape(-1), "released").reshape(x.shape)


def _class_guard(family: str, k: int, max_total: float, factor: float = CLASS_FACTOR) -> Guard:
    """Class k's count of a family ("true", "predicted", "true + predicted") must be clear."""
    most = (2.0 if family == "true + predicted" else 1.0) * max_total
    return Guard(f"{family} count of class {k}", most, factor)


def _class_guards(
    c: int, max_total: float
) -> tuple[dict[str, tuple[Guard, ...]], dict[str, tuple[Guard, ...]]]:
    """(guards that flag, guards that only select) of every classification metric.

    Every metric needs the total clearly positive. MCC needs both terms of its
    denominator's product clear. A
    per-class average measures the classes whose count is clear and bounds the rest, so
    its per-class guards flag nothing: passing one selects the class, which the
    selection adjustment accounts for.
    """
    total = (Guard(TOTAL, max_total),)
    flag: dict[str, tuple[Guard, ...]] = dict.fromkeys(CLASSIFICATION_KEYS, total)
    flag["mcc"] = total + tuple(
        Guard(key, max_total * max_total, SPREAD_FACTOR) for key in (SPREAD_P, SPREAD_T)
    )
    select = {key: tuple(_class_guard(f, k, max_total) for k in range(c))
              for key, f in FAMILY.items()}  # fmt: skip
    return flag, select


def _spread_weights(n: FloatArray, margin: FloatArray, axis: int) -> FloatArray:
    """∂(N² − Σ m_k²)/∂M_ij (R, C, C): 2N − 2·m_j (predicted, axis 1) or 2N − 2·m_i (true)."""
    g = 2.0 * n[:, None] - 2.0 * margin
    out: FloatArray = g[:, None, :] if axis == 1 else g[:, :, None]
    return np.broadcast_to(out, (*margin.shape, margin.shape[-1]))


def _guard_moments(
    m: FloatArray, std: FloatArray, level: float, distribution: MechanismKind
) -> dict[str, Linear]:
    """Value, s.e. and quantile of the total and of each class's true/predicted counts."""
    r, c = m.shape[0], m.shape[-1]
    t, p = m.sum(axis=-1), m.sum(axis=-2)

    def fixed(value: FloatArray, w: FloatArray) -> Linear:
        se, q = quantile_factor(w.reshape(1, -1), level, distribution)
        return Linear(value, np.full(r, se[0]), np.full(r, q[0]))

    out = {TOTAL: fixed(t.sum(axis=-1), std)}
    n = t.sum(axis=-1)
    for key, margin, axis in ((SPREAD_P, p, 1), (SPREAD_T, t, 2)):
        w = _spread_weights(n, margin, axis) * std
        se, q = quantile_factor(w.reshape(r, -1), level, distribution)
        out[key] = Linear(n * n - (margin * margin).sum(axis=-1), se, q)
    for k in range(c):
        row, col = np.zeros((c, c)), np.zeros((c, c))
        row[k], col[:, k] = 1.0, 1.0
        out[f"true count of class {k}"] = fixed(t[:, k], std * row)
        out[f"predicted count of class {k}"] = fixed(p[:, k], std * col)
        out[f"true + predicted count of class {k}"] = fixed(t[:, k] + p[:, k], std * (row + col))
    return out


def _classification_moments(
    m: FloatArray, std: FloatArray, labels: Labels, level: float, distribution: MechanismKind,
    guards: Mapping[str, tuple[Guard, ...]], include: Mapping[str, FloatArray],
) -> tuple[dict[str, Linear], dict[str, dict[str, FloatArray]]]:  # fmt: skip
    """Each metric's :class:`Linear` and its noise covariance with each of its guards.

    A per-class average's covariance with the guard of a class it leaves out is 0: that
    class's guard did not pass, so it selected nothing.
    """
    r, c = m.shape[0], m.shape[-1]
    value = {k: np.empty(r) for k in CLASSIFICATION_KEYS}
    se = {k: np.empty(r) for k in CLASSIFICATION_KEYS}
    q = {k: np.empty(r) for k in CLASSIFICATION_KEYS}
    cov = {k: {g.key: np.zeros(r) for g in guards[k]} for k in CLASSIFICATION_KEYS}
    chunk = max(1, _BLOCK // (c * c))
    for r0 in range(0, r, chunk):
        sl = slice(r0, min(r, r0 + chunk))
        parts = classification_gradients(
            m[sl], labels, {f: v[sl] for f, v in include.items()}, var=std * std
        )
        for key, (v, g) in parts.items():
            w = cell_weights(g, std)
            value[key][sl] = v
            se[key][sl], q[key][sl] = quantile_factor(w.reshape(len(v), -1), level, distribution)
            ws = w * std
            rows, cols = ws.sum(axis=-1), ws.sum(axis=-2)
            for guard in guards[key]:
                fam, _, k = guard.key.rpartition(" count of class ")
                if guard.key == TOTAL:
                    cov[key][guard.key][sl] = ws.sum(axis=(-2, -1))
                    continue
                if guard.key in (SPREAD_P, SPREAD_T):
                    ms = m[sl]
                    margin = ms.sum(axis=-2) if guard.key == SPREAD_P else ms.sum(axis=-1)
                    g_w = _spread_weights(ms.sum(axis=(-2, -1)), margin,
                                          1 if guard.key == SPREAD_P else 2)  # fmt: skip
                    cov[key][guard.key][sl] = (ws * g_w).sum(axis=(-2, -1))
                    continue
                j = int(k)
                both = rows[:, j] + cols[:, j]
                term = rows[:, j] if fam == "true" else cols[:, j] if fam == "predicted" else both
                kept = include[fam][sl, j] if key in FAMILY else 1.0
                cov[key][guard.key][sl] = term * kept
    return {k: Linear(value[k], se[k], q[k]) for k in CLASSIFICATION_KEYS}, cov


def _two_class_measured(
    dens: Mapping[str, Linear], select: Mapping[str, tuple[Guard, ...]]
) -> dict[str, BoolArray]:
    """At 2 classes, per family (R, C): the classes a macro average measures.

    Class k is measured when its count D̂ (capped at its public maximum) passed its
    threshold s = CLASS_FACTOR·q·se by more than q·se, its own noise quantile at the
    metric's level: the count's interval lies above s (:data:`TWO_CLASS_FACTOR`). Every
    other class is BOUNDED in [0, 1] and the average published with that bound.

    Why (cls2, cls3): at 2 classes a hard cut on a class's count publishes, where the
    true count lies below the cut, only the releases whose noise carried it over, and
    Laplace noise (memoryless) carries that excess in ONE cell; when that is the
    false-positive cell the class's precision is deflated far beyond its delta interval
    (precision_macro covered 0.61–0.90 among published releases under the former
    SECURE cut at 2 × this threshold, flagged below it; a higher cut only moved the
    failure). Given that the count passed s, its overshoot o = D̂ − s carries little
    evidence against a true count far below s: for a true count D ≤ s and a log-concave
    noise law (Laplace, Gaussian, their sums) P(o > m | D̂ > s) is largest at D = s,
    where it is P(η > m)/P(η > 0) = α for m = q·se (one-sided α/2 quantile, α = 1 −
    level: 5% at level 0.95; under Laplace in one cell m = b·ln(1/α), the memoryless
    tail's; sums of cells are dominated by the largest weight × scale, 2b for F1's t + p,
    and q is their Cornish–Fisher quantile; Gaussian: m = z·σ_D). A class below s + m is
    therefore consistent with any ratio in [0, 1] and is bounded; at most α of the
    releases in which a class whose true count is ≤ s passes s measure it. Bounding,
    not flagging, matters: a flag is another cut, and the releases passing it would be
    selected again. The average is flagged only when both classes are bounded (its
    interval would be [0, 1]). Measured (cls3, 2 balanced classes, accuracy 0.55–0.7,
    noise 0.06–0.15 of a cell, both laws, 3,000 releases per cell): every macro average
    covers 0.946–1.00 among published releases and precision_macro is published in
    ≥ 99% of releases (was 0–2% at noise ≥ 0.1); its interval is 0.26–0.6 wide where
    its minority class is bounded. Where almost every release has both classes bounded
    (a good model, noise ~0.2–0.3 of a cell) the flag selects again, also below the public
    rule :data:`TWO_CLASS_MAX_NOISE` when the public maximum exceeds the true total (F5);
    so since s26c the macro averages' intervals and codes come from :mod:`._simultaneous`
    wherever a class is not far clear, and this rule decides only where MCC takes its hull.
    """
    return {
        fam: np.stack([clear(dens[g.key], replace(g, factor=TWO_CLASS_FACTOR))
                       for g in select[key]], axis=1)
        for key, fam in FAMILY.items()
    }  # fmt: skip


def _bound_unclear(
    batch: Batch, m: FloatArray, include: Mapping[str, Mapping[str, FloatArray]],
    dens: Mapping[str, Linear], labels: Labels, secure: Mapping[str, BoolArray],
) -> Batch:  # fmt: skip
    """Widen each per-class average by the classes within the noise (a bound, not a guess).

    A class whose count is not clear of the noise has an unknown per-class value in
    [0, 1] (and, for balanced accuracy or ``labels="present"``, may not count at all).
    With K classes measured (mean μ, interval [μ₋, μ₊]) and u = C − K unclear, the
    average over every class lies in [K·μ₋/C, (K·μ₊ + u)/C] (and the mean over only the
    classes present in the same range). A weighted average's left-out terms t_c·v_c lie
    in [0, t_c]: the upper end grows by a 3-s.e. upper bound on their classes' total
    true count over the total weight. The estimate stays the measured classes' average.
    """
    c = m.shape[-1]
    t = m.sum(axis=-1)
    weight = (((t + m.sum(axis=-2)) > 0) if labels == "present" else np.ones(t.shape)) * t
    low, high, est = dict(batch.low), dict(batch.high), dict(batch.estimate)
    code, bounded = dict(batch.code), dict(batch.bounded)
    for key, fam in FAMILY.items():
        inc = include[key][fam]
        u = c - inc.sum(axis=-1)
        ok = batch.code[key] == 0
        if key.endswith("_weighted"):
            se2 = sum(
                (1.0 - inc[:, k]) * dens[f"true count of class {k}"].se ** 2 for k in range(c)
            )
            left = np.maximum(((1.0 - inc) * t).sum(axis=-1) + 3.0 * np.sqrt(se2), 0.0)
            with np.errstate(divide="ignore", invalid="ignore"):
                share = np.where(u > 0, left / weight.sum(axis=-1), 0.0)
                kept = (inc * weight).sum(axis=-1) / weight.sum(axis=-1)
                est[key] = np.where(u > 0, batch.estimate[key] / kept, batch.estimate[key])
            high[key] = np.where(ok, batch.high[key] + share, batch.high[key])
        else:
            k_in = c - u
            low[key] = np.where(ok, batch.low[key] * k_in / c, batch.low[key])
            high[key] = np.where(ok, (batch.high[key] * k_in + u) / c, batch.high[key])
        few = 2 * u > c
        if key.endswith("_weighted") or c == 2:
            pass  # 2 classes: a class not measured is bounded (_two_class_measured)
        elif c == 1:  # its class must be clear of SECURE × its threshold
            few = few | (u > 0) | (secure[fam].sum(axis=-1) < c)
        else:  # see FEW_MEASURED
            few = few | ((u > 0) & (c - u <= FEW_MEASURED))
        code[key] = np.where((batch.code[key] <= 0) & few, FEW_CLASSES, batch.code[key])
        low[key], high[key] = np.clip(low[key], 0.0, 1.0), np.clip(high[key], 0.0, 1.0)
        usable = code[key] == 0
        low[key] = np.where(usable, low[key], 0.0)
        high[key] = np.where(usable, high[key], 1.0)
        est[key] = np.clip(np.nan_to_num(est[key]), low[key], high[key])
        bounded[key] = u.astype(np.int64)
    classes = {**batch.classes, **dict.fromkeys(FAMILY, int(c))}
    return replace(batch, low=low, high=high, estimate=est, code=code, bounded=bounded,
                   classes=classes)  # fmt: skip


def classification_batch(
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
) -> Batch:
    """Estimates and intervals of every classification metric for R noisy releases.

    ``released`` is (R, C²): R flattened noisy matrices; ``scale`` the public noise
    scale per coordinate; ``max_total`` a public bound on the true total count (cohort ×
    cap), used only to keep pure-noise releases flagged. Gradients are analytic
    (:mod:`._confusion_linear`): O(C²) per metric and release.

    At 2 classes MCC's hull (:func:`~._two_class.mcc_two_classes`) takes balanced
    accuracy's and precision_macro's intervals at level 1 − α/2 (Bonferroni), computed
    by the same rules at that level: the hull misses on a side only if one of the two
    misses on that side.
    """
    check_options(level, method, distribution=distribution, draws=draws, labels=labels, seed=seed)
    max_total = real_limit(max_total, "max_total")
    x = _confusion_batch(released)
    c = math.isqrt(x.shape[-1])

    def at(lv: float) -> tuple[Batch, dict[str, FloatArray]]:
        return _classification_batch(x, scale, lv, labels=labels, method=method,
                                     distribution=distribution, draws=draws, seed=seed,
                                     max_total=float(max_total))  # fmt: skip

    batch, macro = at(level)
    if c == 2:  # MCC's hull from its two components at 1 − α/2 each (stats25, B3)
        batch = mcc_two_classes(batch, macro, at((1.0 + level) / 2.0)[0])
    return too_noisy(batch, noise_std(scale, c * c, distribution), float(max_total), c)


def _classification_batch(
    x: FloatArray, scale: float | npt.ArrayLike, level: float, *, labels: Labels,
    method: IntervalMethod, distribution: MechanismKind, draws: int, seed: int,
    max_total: float,
) -> tuple[Batch, dict[str, FloatArray]]:  # fmt: skip
    """:func:`classification_batch` at ``level`` before the 2-class MCC hull and the public
    noise rule; with the classes the macro averages measure."""
    r, c = x.shape[0], math.isqrt(x.shape[-1])
    std = noise_std(scale, c * c, distribution).reshape(c, c)
    m = x.reshape(r, c, c)
    flag, select = _class_guards(c, float(max_total))
    dens = _guard_moments(m, std, level, distribution)
    include = {
        f: np.stack([clear(dens[g.key], g) for g in select[key]], axis=1).astype(np.float64)
        for key, f in FAMILY.items()
    }
    secure = {  # classes clear of twice their threshold (a 1-class matrix needs it)
        f: np.stack([clear(dens[g.key], replace(g, factor=SECURE * g.factor))
                     for g in select[key]], axis=1)
        for key, f in FAMILY.items()
    }  # fmt: skip
    macro = dict(include)  # the classes the macro averages measure
    if c == 2:  # a class whose count's interval reaches its threshold is bounded
        macro = {f: v.astype(np.float64) for f, v in _two_class_measured(dens, select).items()}
    if c == 2:  # a class a macro average measures was selected by the higher cut
        select = {k: tuple(replace(g, factor=TWO_CLASS_FACTOR) for g in gs)
                  if k in MACRO_KEYS else gs for k, gs in select.items()}  # fmt: skip
    both = {k: flag[k] + select.get(k, ()) for k in CLASSIFICATION_KEYS}
    lin, cov = _classification_moments(m, std, labels, level, distribution, both, include)
    if c == 2:
        lin_m, cov_m = _classification_moments(m, std, labels, level, distribution, both, macro)
        for key in MACRO_KEYS:
            lin[key], cov[key] = lin_m[key], cov_m[key]
    methods = dict.fromkeys(CLASSIFICATION_KEYS, method_name("delta", distribution))
    base: dict[str, Base] = {}
    adjusted: dict[str, BoolArray] = {}
    conditional: tuple[str, ...] = ()
    if method == "monte_carlo":
        base = classification_monte_carlo(
            m, std, labels=labels, include=include, level=level, distribution=distribution,
            draws=draws, seed=seed, macro_include=macro if c == 2 else None,
        )  # fmt: skip
        methods = dict.fromkeys(CLASSIFICATION_KEYS, MONTE_CARLO)
    # trace / total under either labels (an absent class adds 0 to each sum; a cut on the
    # noisy t + p under-covered, review stats): Fieller's interval, under monte_carlo too
    diag = np.zeros((c, c))
    diag[np.arange(c), np.arange(c)] = 1.0
    w_hits = np.broadcast_to((std * diag).reshape(-1), (r, c * c))
    w_total = np.broadcast_to(std.reshape(-1), (r, c * c))
    hits = np.trace(m, axis1=-2, axis2=-1)
    guard = flag["accuracy"][0]  # the total's
    interval, moved = conditional_fieller(
        hits, dens[TOTAL], w_hits, w_total, guard, level, distribution, (0.0, 1.0)
    )
    base |= dict.fromkeys(_ACCURACY_LIKE, interval)
    adjusted = dict.fromkeys(_ACCURACY_LIKE, moved)
    conditional = _ACCURACY_LIKE
    methods |= dict.fromkeys(_ACCURACY_LIKE, method_name("fieller", distribution))
    batch = assemble(lin, dens, cov, level=level, ranges=CLASSIFICATION_RANGES, guards=flag,
                     select=select, methods=methods, base=base, adjusted=adjusted,
                     conditional=conditional)  # fmt: skip
    classes = {k: include if k.endswith("_weighted") else macro for k in FAMILY}
    batch = _bound_unclear(batch, m, classes, dens, labels, secure)
    if c in SIMULTANEOUS_CLASSES:  # no cut on a class's count (either ``labels``)
        batch = simultaneous_macro(batch, m, std, level, distribution, labels, TOTAL)
    if c in MCC_FIELLER_CLASSES:  # no cut on MCC's spreads (stats37)
        batch = mcc_fieller(batch, m, std, level, distribution, (SPREAD_P, SPREAD_T))
    return batch, macro

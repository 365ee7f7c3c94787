"""At 2 classes: MCC from the two averages where a class is bounded, and the public noise rule.

The class rule itself (which class is measured, which bounded) is
:func:`~._flam_intervals._two_class_measured`; this module finishes a 2-class batch from
it: :func:`mcc_two_classes` takes MCC's interval from balanced accuracy's and
precision_macro's (since s26c the simultaneous per-class sets of :mod:`._simultaneous`
wherever a class is not far clear of the noise) where a class is bounded, and
:func:`too_noisy` withholds the macro averages and MCC above
:data:`TWO_CLASS_MAX_NOISE` (a rule on public quantities only).
Post-processing of released values and public scales, like the rest of the intervals.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from dpledger.metrics._assemble import FEW_CLASSES, TOO_NOISY, Batch
from dpledger.metrics._confusion_linear import FAMILY
from dpledger.metrics._segments import FloatArray

__all__ = [
    "FEW_CLASS_MAX_NOISE",
    "MACRO_KEYS",
    "NOISE_RULE_MAX_CLASSES",
    "TWO_CLASS_MAX_NOISE",
    "max_noise",
    "mcc_two_classes",
    "too_noisy",
]

MACRO_KEYS = tuple(k for k in FAMILY if not k.endswith("_weighted"))
"""The per-class averages that are not weighted: balanced accuracy and the macro averages."""
TWO_CLASS_MAX_NOISE = 0.15
"""At 2 classes the macro averages, balanced accuracy and MCC are not published when the
noise scale (Laplace b, or σ/√2) exceeds this fraction of a cell of the largest matrix the
cohort allows (``max_total`` / 4). A public rule — it reads no released value, so it
selects nothing. Why: with a good model the off-diagonal counts are small, and above it a
class's count passes its rule mostly by noise; among published releases, balanced
accuracy covered 0.88–0.93 and MCC 0.80–0.90 at noise 0.2 of a cell (accuracy 0.9–0.99,
10,000 releases; 13–35% published), 0.82–0.89 at 0.3, while every cell at ≤ 0.15 covered
≥ 0.949 (accuracy 0.55–0.99, both laws). Without a public maximum (``max_total`` = inf)
the rule cannot apply, and a maximum m × the true total applies it from 0.15·m of a true
cell: with m = 2–3 (clients below the cap) the former per-class rule covered 0.70–0.94
among the 1–20% it published at 0.2–0.29 (stats4, F5). Since s26c the 2-class macro
averages no longer rely on this rule: they take the simultaneous per-class sets of
:mod:`._simultaneous` (no cut on a class's count), which covered 0.974–0.998 in those
cells, published in ≥ 98% of releases. The rule stays (a public rule cannot lower
coverage among published releases) and still withholds them, and MCC, above 0.15 of a
cell of the largest matrix."""
FEW_CLASS_MAX_NOISE = 0.10
"""At 3 to :data:`NOISE_RULE_MAX_CLASSES` classes the macro averages and balanced accuracy
are not published when the noise s.e. of a class's count, b·√(2C), exceeds this fraction
of a balanced class's count in the largest matrix the cohort allows (``max_total`` / C):
a noise scale above 0.1·√(C/2) of its cell ``max_total`` / C² (0.122 at 3 classes, 0.141
at 4, 0.158 at 5, 0.173 at 6; at 2 classes the same form with 0.15 is
:data:`TWO_CLASS_MAX_NOISE`). A public rule: it withholds a whole regime or nothing, so it
cannot lower coverage among published releases. Why (stats34): with a good model
(accuracy ≥ 0.9) in heavy noise the classes that pass their rules do so by noise, and
among published releases balanced accuracy and the macro averages covered 0.89–0.935
(4–6 classes at 0.5 of a cell; 5–30% published). Set so that a public maximum 1.5 × the
true total still withholds those cells; with a maximum several times the true total (the
ledger passes cohort × cap) the rule applies late (docs/intervals.md, "Three to six classes").
MCC, accuracy and the weighted averages are not withheld by it."""
NOISE_RULE_MAX_CLASSES = 6
"""The largest class count the noise rule applies to (measured at 2–6 classes; from 10
classes the per-class averages covered at 0.3–1.5 of a cell without it,
``tests/test_coverage_many_classes.py``)."""


def max_noise(c: int) -> float | None:
    """The public noise limit at ``c`` classes, in cells of the largest matrix (None: no rule)."""
    if c == 2:
        return TWO_CLASS_MAX_NOISE
    if 3 <= c <= NOISE_RULE_MAX_CLASSES:
        return FEW_CLASS_MAX_NOISE * math.sqrt(c / 2.0)
    return None


def mcc_two_classes(batch: Batch, macro: Mapping[str, FloatArray], parts: Batch) -> Batch:
    """At 2 classes, MCC from balanced accuracy and precision_macro where a class is bounded.

    For a 2×2 matrix MCC = sign·√(J·Mk), with informedness J = 2·BA − 1 and markedness
    Mk = 2·PM − 1 of the same sign (both det/(product of two margins)). MCC is increasing
    in each on the quadrants J·Mk ≥ 0 the truth lies in, so the hull of sign·√(J·Mk) over
    the box of their intervals misses only if one of them misses on the same side. The
    two intervals are therefore taken from ``parts``, the same release's batch at level
    1 − α/2 (Bonferroni: each misses a side with probability ≤ α/4, the hull ≤ α/2).
    Why (stats25, B3): from ``batch`` itself (level 1 − α) the hull covered a truth of
    MCC = 1 (accuracy 1.0, a class bounded) only where BOTH upper ends reached 1, and
    their misses (off-diagonal noise in different cells) are nearly independent: 0.926–0.939
    among published releases (both laws; 90/10, 97/3, 50/50), against 0.960–0.970 so.
    ``macro`` (the classes ``batch`` measures) decides where the hull replaces the delta
    interval, and ``batch``'s codes whether it is usable, as before: a component that
    ``parts`` flags (both classes bounded at the higher threshold) enters with its whole
    range [0, 1], which holds trivially (flagging MCC there instead is one more cut on the
    released counts: 50/50, accuracy 1.0, Laplace noise 0.14 of a cell published 7% and
    covered 0.91 among them).
    Where a true or predicted class is bounded (:func:`_two_class_measured`), its
    average's interval carries that bound and MCC's delta interval cannot: MCC's spread
    guard selects the same minority count (at 2 classes N² − Σp² = 2·p₀·p₁), and among
    published releases it covered 0.54–0.93 (cls2). There MCC's interval is that hull,
    usable wherever both averages are (its spread guards no longer flag: the classes'
    rule decides instead). Elsewhere (every class measured) it is the delta interval.
    """
    rows = (macro["true"].sum(axis=-1) < 2) | (macro["predicted"].sum(axis=-1) < 2)
    ok = (batch.code["balanced_accuracy"] == 0) & (batch.code["precision_macro"] == 0)
    j_lo, j_hi = (
        2.0 * parts.low["balanced_accuracy"] - 1.0,
        2.0 * parts.high["balanced_accuracy"] - 1.0,
    )
    m_lo, m_hi = 2.0 * parts.low["precision_macro"] - 1.0, 2.0 * parts.high["precision_macro"] - 1.0
    pos = np.sqrt(np.maximum(j_lo, 0.0) * np.maximum(m_lo, 0.0))
    lo = np.where((j_lo < 0) & (m_lo < 0), -np.sqrt(np.abs(j_lo * m_lo)), pos)
    neg = -np.sqrt(np.maximum(-j_hi, 0.0) * np.maximum(-m_hi, 0.0))
    hi = np.where((j_hi > 0) & (m_hi > 0), np.sqrt(np.abs(j_hi * m_hi)), neg)
    key = "mcc"
    first = batch.code[key] == 1  # the total's guard: nothing is measured
    code = np.where(rows & ~first, np.where(ok, 0, FEW_CLASSES), batch.code[key])
    usable = code == 0
    low = np.where(rows, np.where(usable, lo, -1.0), batch.low[key])
    high = np.where(rows, np.where(usable, hi, 1.0), batch.high[key])
    est = np.clip(np.nan_to_num(batch.estimate[key]), low, high)
    # classes bounded in the more bounded of J and Mk (for the method and the reason)
    n_bounded = 2 - np.minimum(macro["true"].sum(axis=-1), macro["predicted"].sum(axis=-1))
    return replace(
        batch,
        low={**batch.low, key: low}, high={**batch.high, key: high},
        estimate={**batch.estimate, key: est}, code={**batch.code, key: code},
        bounded={**batch.bounded, key: np.where(rows, n_bounded, 0).astype(np.int64)},
        classes={**batch.classes, key: 2},
        adjusted={**batch.adjusted, key: batch.adjusted[key] & ~rows},
        edge={**batch.edge, key: batch.edge[key] & ~rows},
    )  # fmt: skip


def too_noisy(batch: Batch, std: FloatArray, max_total: float, c: int) -> Batch:
    """Every macro average (and at 2 classes MCC) flagged :data:`TOO_NOISY` (whole range)
    when the public noise scale exceeds :func:`max_noise` of the largest possible cell
    ``max_total`` / C². Reads only public quantities: the scale, ``max_total`` and C."""
    scale = float(np.max(std)) / math.sqrt(2.0)  # Laplace b; σ/√2 for Gaussian noise
    limit = max_noise(c)
    if limit is None or not scale > limit * max_total / (c * c):  # inf max_total: never
        return batch
    code, low, high, est = dict(batch.code), dict(batch.low), dict(batch.high), dict(batch.estimate)
    for key in (*MACRO_KEYS, "mcc") if c == 2 else MACRO_KEYS:
        lo, hi = batch.ranges[key]
        hit = (batch.code[key] == 0) | (batch.code[key] == FEW_CLASSES)
        code[key] = np.where(hit, TOO_NOISY, batch.code[key])
        low[key] = np.where(hit, lo, batch.low[key])
        high[key] = np.where(hit, hi, batch.high[key])
        est[key] = np.clip(batch.estimate[key], low[key], high[key])
    return replace(batch, code=code, low=low, high=high, estimate=est)

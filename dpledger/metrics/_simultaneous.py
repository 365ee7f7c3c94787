"""From 2 classes: the macro averages from simultaneous per-class Fieller intervals.

A macro average (and balanced accuracy) over C classes is the mean of C per-class ratios
r_k = N_k / D_k of linear sums of the matrix's cells (recall: M_kk / t_k, precision:
M_kk / p_k, F1: 2·M_kk / (t_k + p_k)). Each r_k gets Fieller's set at the per-class level
1 − α/C (α = 1 − level), {θ ∈ [0, 1] : (N̂_k − θ·D̂_k)² ≤ q²·Var(N̂_k − θ·D̂_k)}, with q
the largest quantile of that pivot over θ ∈ [0, 1] (Cornish–Fisher under Laplace noise,
never below z): a set exact for Gaussian noise at any true count, near the noise or not,
and conservative for Laplace. Where D̂_k is not clear of the noise at that level
(D̂_k² ≤ q²·Var D̂_k: the set unbounded) the class contributes its whole range [0, 1],
as it does where the set holds no value of [0, 1] (every value rejected, probability
≤ α/C; it was a zero-width point at an edge, caught at 2 classes by
``tests/test_coverage.py``, s26c).
By Bonferroni all C sets hold at once with probability ≥ 1 − α, and then the mean of
the r_k lies in [mean of the lower ends, mean of the upper ends].

A release whose every class count is far clear of the noise (D̂_k > :data:`SAFE_FACTOR`
× q·se; elsewhere :func:`safe_factor`) keeps the method's own interval
(delta or Monte Carlo; narrower: 2–3.5 × at 0.01–0.05 of a cell); under Gaussian noise
at 2 and 7–8 classes one whose least clear count lies within :data:`SWITCH_HULL` × that
switch gets the hull of both intervals (s29: the releases just past a switch are
selected). The switch reads the counts but decides only which interval, never whether one
is published, so coverage over
all releases of a regime is what matters and what is measured: with a class whose count
straddles the switch (3–4 classes, one class 3–25%, accuracy 0.7–0.99, noise 0.01–0.05
of a cell, both laws; 20,000 releases in the 7 lowest of 144 cells) 0.9496–0.9998. It is
NOT a guarantee per method label: the releases that took the delta interval are selected
(their rare count's noise pushed it over the switch) and where the switch flips in about
half of them they covered 0.916–0.94, the per-class ones 0.99+ (review s35; a larger
factor moves the shift, ~0.65 s.e. of the rare count, without removing it). Dropping the
switch would remove the selection at the price of 2–3.5 × width in easy cells.

Why (stats35): the former rule flagged a macro average at 3–4 classes when a class was
bounded and at most 2 measured — a cut on a rare class's noisy count, so published only
when noise carried that count over its threshold, deflating its ratio (0.62–0.93
covered among published releases with a 5% or 1% class). Measuring a class only when its
count's interval cleared its threshold (the 2-class rule) fixed those cells, but the
remaining flag (more than half bounded) was a cut again: two rare classes, 0.74–0.86;
heavy noise with a public maximum 3 × the true total, 0.89–0.94. Here nothing reads a
class's count to decide publication: the macro averages are published whenever the total
passes its guard (and the public noise rule, :func:`~._two_class.too_noisy`, holds), so
coverage among published releases is coverage overall (0.978–1.00 in those cells) —
except where the total itself only just passed its guard, a cut on the total: there the
averages are the whole range (:data:`NEAR_TOTAL`, review s26). The
price is width near the noise: a class lost in it widens the average by up to 1/C.
Which classes count (present36). With ``labels="present"`` an average runs over the
classes present in y_true or y_pred (scikit-learn's labels; a class present in only one
scores 0 on the ratio whose denominator is empty), and balanced accuracy, with either
``labels``, over the classes with a true sample; which classes those are is private.
Class k's presence count P_k (its row and column cells, or its row for balanced accuracy)
is tested at the same level: k is SURE when P̂_k > q·se (two-sided quantile at 1 − α/C,
so a class absent in truth passes with probability ≤ α/(2C)). The interval is
[min over S of mean_{k∈S} low_k, max over S of mean_{k∈S} high_k] over every non-empty
set S of classes that contains the sure ones (its extremes are sorted prefixes,
:func:`_least_mean`). Valid:
for each class one event of probability ≥ 1 − α/C is needed — its ratio set holds if it
is present, its test does not fire if it is absent (its ratio is undefined and left out,
so its set need not hold) — and by the union bound all C hold at once with probability
≥ 1 − α; then the true present set contains every sure class, so it is one of the S, and
its mean lies within that set's mean ends. A present class with an empty denominator has
N = D = 0, so every θ (its value 0 too) satisfies N − θ·D = 0 and Fieller's set holds it
at its level. Nothing reads presence to decide publication (the former rule flagged a
bounded class with at most 2 measured: a class absent beside a 5% class was published in
0–0.1% of releases at 3 classes and covered 0.55–0.82 among those published at 4; now
0.942–1.00 in every probed cell, all published; ``/work/research/present36``). Where
every class is far clear (the delta switch above) every class is sure, and the two
``labels`` agree.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace

import numpy as np

from dpledger.metrics._assemble import Batch, BoolArray
from dpledger.metrics._intervals import fieller_spread, method_name, quantile_factor
from dpledger.metrics._segments import FloatArray
from dpledger.metrics._two_class import MACRO_KEYS
from dpledger.types import Labels, MechanismKind

__all__ = [
    "NEAR_TOTAL",
    "NUMERATOR_FACTOR_2",
    "RARE_SHARE",
    "SAFE_FACTOR",
    "SAFE_FACTOR_2",
    "SAFE_FACTOR_FROM_5",
    "SAFE_FACTOR_FROM_7",
    "SIMULTANEOUS_CLASSES",
    "SWITCH_HULL",
    "SWITCH_HULL_CLASSES",
    "SWITCH_STRETCH_RARE",
    "safe_factor",
    "simultaneous_macro",
]

SIMULTANEOUS_CLASSES = range(2, sys.maxsize)
"""The class counts whose macro averages use :func:`simultaneous_macro`: every count from 2
since review stats (2026-12-03): from 17 classes a 0.2% class whose count lay 4–6 s.e.
above zero, the others precise, dominated the average's variance, and the former rule
covered 0.928–0.941 (balanced accuracy, recall/precision/f1_macro; 17–30 classes, accuracy
0.999, both laws, all published; 0.977–0.983 at level 0.99). Now ~1.00 there at 1.7–3.6 ×
the width; releases whose every class is far clear keep the delta interval (balanced
cells at 20 and 50 classes unchanged), and a dominant class (90%) beside 19 small ones at
8 s.e. goes 3.5 × wider (it covered 0.96–0.97 before). Before: 3–4 since stats35
(those the former ``FEW_MEASURED`` flag applied to), 5–6 since stats37. There the former
rule (a class measured when its count passed 2 × q·se, bounded otherwise, the average's
delta interval) under-covered with a 1% class whose count lay ~5 s.e. above zero:
balanced accuracy and recall_macro 0.93–0.94 (6 classes, Gaussian noise 0.02 of a cell,
accuracy 0.9–0.99; the delta interval of a ratio whose denominator's c.v. is ~0.2 is
skewed, and the rule's cut selects), f1_macro 0.855 among published with a dominant class
(5 classes, accuracy 0.99, Laplace noise 0.1). 7–16 since s27c (outside audit stats5, F1,
F2; 13–16 after review s27c): the same failures at 7–16 classes — balanced accuracy,
recall_macro and
precision_macro 0.935–0.945 with a 1% class 4.5–8 s.e. above zero (Gaussian or Laplace,
accuracy 0.9–0.99, all published), and f1_macro 0.87–0.93 among the 1–32% published with a
model predicting a 50% class for 99% of samples (Gaussian or Laplace noise 0.3–0.4 of a
cell; the "more than half bounded" flag selected); now 0.95–1.00, all published. At 13
classes the former rule under-covered the same cells (0.944–0.946: review s27c), so these
sets run to 16; from 17 classes the former rule stays: one class's skew is diluted there
(those cells covered ≥ 0.952 at 16 and 0.955–0.968 at 20 classes) and these sets, whose
per-class level 1 − α/C falls with C, were 3–12 × wider at 20 classes (docs/intervals.md,
"7–16 classes and from 17"). Cost: the class-set extremes are sorted prefixes
(:func:`_least_mean`), O(C log C); each class's set reads its ≤ 2C − 1 cells only (one
release at 316 classes ~2 s; 11 s while each set read all C² cells).
2 since s26c (outside audit stats4, F5): the 2-class rule (a class measured when its count's
interval cleared its threshold, the average flagged when both were bounded) is a cut the
public noise rule was meant to keep out of reach, but it reads the public maximum, and with
a maximum 2–3 × the true total (clients below the cap) noise 0.2–0.29 of a true cell passed
it: among the 1–20% published, balanced accuracy, recall_macro and precision_macro covered
0.70–0.94 and f1_macro 0.82–0.91 (Laplace, balanced classes, accuracy 0.9–1.0). With these
sets the same cells publish ≥ 98% and cover 0.974–0.998
(``tests/test_coverage_two_class_max_total.py``)."""
SAFE_FACTOR = 6.0
"""At 3–4 classes a release keeps the delta interval when every class's count exceeds
this many times q·se of its noise at the per-class level (all far clear of the noise; 4
and 8 probed alike, 0.94–0.95 at the lowest of 144 cells at 4,000 releases)."""
SAFE_FACTOR_2 = 3.0
"""The same switch at 2 classes (s26c), against the ratio's pivot's quantile: at 6 the
balanced cells of an easy 2-class grid (noise 0.1 of a cell, accuracy 0.55–0.99) took the
per-class sets at 1.2–2 × the width (0.144 → 0.297); at 3 those keep the delta interval,
and the per-class sets still take the cells of F5 (every macro average 0.974–0.998; the
easy grid and F5's grid ≥ 0.945, chance; f1_macro 0.951 with Gaussian 50/50 at 0.2 of a
cell, where the switch flips). (Named SAFE_FACTOR_FROM_5 until s28a, which moved 5–6
classes to their own factor.) Since review 39 the numerator must pass a switch too
(:data:`NUMERATOR_FACTOR_2`)."""
NUMERATOR_FACTOR_2 = 2.0
"""At 2 classes a release keeps the delta interval only where every class's numerator, too,
exceeds this many times q·se of its own noise (q: the pivot's quantile; review 39). The
denominator shares the numerator's noise (F1: 2·M_kk in both), so with a class predicted
but never true (its F1 and precision 0 in truth) the releases whose denominator passed the
switch were those whose M_kk noise was positive, and the delta interval there, centred ~1
s.e. above 0, missed in 19% of them: f1_macro covered 0.941 (1 in 21 predicted, Gaussian
noise 0.01 of a cell), now 0.975 at half the width. 3 (the denominator's factor) also
lifted weak rare classes but sent balanced cells at accuracy 0.55 to the per-class sets
at × 1.65–2.05 (the cost :data:`SAFE_FACTOR_2` avoids); 2 keeps those (docs/intervals.md,
"The numerator, too")."""
SAFE_FACTOR_FROM_5 = 4.0
"""The same switch at 5–6 classes, against the quantile of the class's count itself (as
from 7 classes; s28a). stats37 put it at 3 × the pivot's quantile (6 × q·se, ~16 s.e.,
sent easy cells to the per-class sets at up to 5 × the width for no coverage: 6 balanced
classes, accuracy 0.55, Laplace noise 0.1 of a cell, 0.052 → 0.258), ~8 s.e. under
Gaussian noise. There the releases keeping the delta interval were selected: with a 1%
class at 7–8 s.e. of its count's noise the releases whose noise pushed the count over
the switch keep a delta interval about a ratio that noise deflated, and balanced accuracy
(= recall_macro) covered 0.941–0.947 ± 0.0013 (Gaussian, accuracy 0.9–0.99, 30,000
releases per cell; the per-class releases 0.999+). The shortfall is the delta interval's
own low tail (a ratio with a noisy denominator is skewed) gathered into the selected
releases, so it shrinks as the switch moves out. Under Laplace noise the pivot's quantile
(one cell's, θ = 0) is ~1.4 × the count's: that switch sat at ~11–12 s.e. and covered
≥ 0.955. At 4 × the count's quantile the switch is at ~10.3–10.6 s.e. under Gaussian noise
and 11.2–11.4 under Laplace (about where it was): at 7.5 s.e. balanced accuracy covers
0.996–0.998 (100,000 releases; 0.943 before) at 1.10–1.12 × the width, and around the new
switch (9–12 s.e., 30,000 releases per cell) 0.9486–0.9651 ± 0.0013 under Gaussian noise
(no cell more than 1.1 s.e. below 0.95) and 0.9549–0.961 under Laplace. 4.5 (~12 s.e.)
covered 0.952–0.977 there at more cost; 3.5 sits where the 7-class switch still shows
0.947. Width: easy cells (5–6 balanced classes, accuracy 0.55–0.99, noise 0.01–0.1 of a
cell, both laws: every class ≥ 16 s.e. clear) keep the delta interval, median widths × 1.00.
The cost is where balanced classes sit at 10–12 s.e.: Gaussian noise 0.2 of a cell,
balanced accuracy and precision_macro 1.8–3.0 × at 5 classes (0.085 → 0.255 at accuracy
0.55, 0.128 → 0.227 at 0.9) and 1.0–1.21 × at 6 (they covered 0.95–0.97 before, 0.96–0.98
now); f1_macro unchanged; Laplace at 0.15 of a cell already took the per-class sets
(``tests/test_coverage_five_six_switch.py``; s28a)."""
SAFE_FACTOR_FROM_7 = 3.5
"""The same switch at 7–16 classes (s27c), against the quantile of the class's count itself (at
2–4 classes, of the ratio's pivot, whose largest quantile under Laplace noise is that of one
cell, θ = 0: ~1.5 × the count's; the count's at 5–6 too since s28a). With the pivot's,
Laplace noise 0.1 of a cell sent the 10-class grid of ``tests/test_coverage.py`` (classes at
~11 s.e.) to the per-class sets at 4–8 × the width (0.03–0.055 → 0.18–0.26), for no coverage
(0.957–0.973 before). The factor: at 3 a 1% class whose count (or predicted count) lay 7–8
s.e. above zero flipped the switch, and the releases keeping the delta interval were
selected (their count's noise had pushed it over): balanced accuracy and precision_macro
covered 0.944–0.949 (7 classes, Gaussian noise 0.03 of a cell, accuracy 0.99:
precision_macro 0.945, its rare predicted count at 7 s.e.); at 3.5 0.95–0.999 there; at 4
the grid above went to the per-class sets at 3–4 × the width under Gaussian noise too
(0.032–0.055 → 0.10–0.19); at 3.5 its widths are 1.0–1.16 × the delta ones (s27c)."""
SWITCH_HULL = 1.25
"""Under Gaussian noise at :data:`SWITCH_HULL_CLASSES` classes, a release whose least clear
class count lies between the delta switch and this many times it gets the hull of the delta
interval and the per-class sets (s29). Past a switch the releases keeping the delta interval
are selected — a rare class's count noise pushed it over, deflating its ratio — and the
delta interval's tail gathers there: with a 1% class, balanced accuracy covered 0.943–0.947
at 2 classes (the class 7–8 s.e. above zero; precision_macro 0.9465 with the rare predicted
count at 7 s.e.), 0.9456–0.9473 at 7 (9–9.5 s.e.) and 0.9472–0.9476 at 8 (9 s.e.); the
releases keeping the delta interval there covered 0.58–0.94. Moving a switch only moves the
dip; the hull covers wherever either interval does, and past 1.25 × the switch the
selection no longer shows: at 2, 7 and 8 classes, the 1% class at 6–15 s.e., accuracy
0.9–0.999 (20,000 releases per cell), balanced accuracy covers 0.950–1.00, and the other
macro averages' lowest cells (0.9466–0.949) are easy ones no switch reaches, unchanged. At
1.2 the 7-class cells at the band's edge covered 0.9499–0.9500. Width, only in releases
within the band: balanced accuracy × 1.02–1.05 at 2 classes and × 1.04–1.55 at 7–8,
precision_macro up to × 1.6 at 7–8 (median widths per cell, one rare class); with two 1%
classes at 7 classes × 1.9, and the band can hold most of a cell (53–80% of releases at 7
classes near the switch; review s29). All at level 0.95 (0.90 holds ≥ 0.904): at level 0.99
a rare class's balanced accuracy under-covered near every switch, hull or not (0.983–0.989,
misses all above), which :data:`SWITCH_STRETCH_RARE` addresses. The
hull applies to ``method="monte_carlo"`` too (2 classes: 0.969 against 0.9635). Its releases
are labelled with the per-class method and lose the delta interval's flags: the hull
contains both intervals."""
SWITCH_HULL_CLASSES = frozenset({2, 7, 8})
"""Where :data:`SWITCH_HULL` applies: the class counts whose switch showed the dip. At 3, 5,
9, 10, 12 and 13 classes (probed) every cell around the switch covered ≥ 0.9486 (5–6:
0.9486–0.9651, s28a), while the hull there cost × 1.1–2.6 in the band (the per-class sets at
level 1 − α/C widen with C); under Laplace noise (whose per-class sets are conservative)
the switches covered ≥ 0.9516 at 2, 3, 5, 7 and 13 classes, so the hull would only cost."""
SWITCH_STRETCH_RARE = 1.5
"""At a level above 0.95 a rare class's delta switch (its count below :data:`RARE_SHARE` × the
classes' mean count, in the release) lies this many times further out (s29; review s29,
S1). At level 0.99 a rare class's balanced accuracy under-covered near the switch at every
class count and under both laws, its misses all above the interval (the delta interval of
a ratio whose denominator is a few s.e. clear is lopsided, and its far tail shows at 0.99;
the 2/7/8-class hull does not lift it): a 1% class at 10–18 s.e., 0.9848–0.9887 ± 0.0007
at 7 and 9 classes, 0.9877–0.9885 at 2 (accuracy 0.9), 0.9887 at 4, 0.9870 under Laplace at
7; a 5% class at 2 classes 0.9881 (20,000–30,000 releases per cell). With the switch 1.5 ×
out those cells take the per-class sets: 0.995–1.000. Past the new switch the delta
interval's own shortfall remains, smaller: 0.9884–0.9894 at 16–20 s.e. (2, 7, 9 classes;
a miss rate of ~1.1% for the nominal 1%), 0.990–0.991 from ~20–24 s.e.; no new dip at the
new switch (9 classes, no hull: 0.9893 against 0.9893). Width, in the cells the stretch
moves: × 1.0–1.5 under Gaussian noise at 7–9 classes (× 0.8–1.0 at 2 and 4, where the
per-class sets are the narrower), × 1.7–1.9 under Laplace at 7. Balanced classes (at 0.99
they covered 0.991–0.995) and a 5% class at 7 classes (0.9925–0.9929) are not rare by the
share rule and keep their intervals. Measured at 0.99; applied at any level above 0.95 (a
step: 0.9501 takes it whole; at 0.975 the cells past the new switch cover 0.980–0.981). Review
s29c, left as stated: a class just under the share (3–3.5% at 7 classes) widens × 1.3–1.8
Gaussian, × 2.8 Laplace, for no coverage change (0.990–0.992 either way); at 2 classes the
level-0.99 shortfall is not a rare class's (a 12.5–20% class 0.9880–0.9888 at 10–14 s.e.,
unchanged; a 1% class 0.9890 at 24 s.e.); at level 0.999, 0.9984–0.9988 past the switch (7
classes, 24–32 s.e.), as before."""
RARE_SHARE = 0.25
"""A class is rare for :data:`SWITCH_STRETCH_RARE` when its noisy count (the ratio's
denominator) is below this share of the mean over classes: a 1% class at any class count,
a 5% class at 2 classes, not a 5% class at 7 (whose intervals needed no change). Like the
switch, it reads the release but decides only which interval."""
NEAR_TOTAL = 3.0
"""A total within this many noise s.e. above its guard (q·se) gives every macro average the
whole range [0, 1] (review s26): the per-class sets hold over all releases, not among
those whose total passed its guard, and a tiny true total passes only by noise that
inflates the off-diagonal cells. With a loose or no public maximum (2 classes, accuracy
1.0, true total 40, noise 1.5–4 cells) balanced accuracy and precision_macro covered
0.83–0.93 among published, and 0.89–0.91 at 3 classes. A total that passed by < 3 s.e.
is where such releases land; one far above it is rarely a tiny total's."""
SIMULTANEOUS = "fieller per class at level 1 − α/C, the average of their ends"
_THETAS = np.linspace(0.0, 1.0, 11)  # where the pivot's quantile is taken (its largest)


def safe_factor(c: int) -> float:
    """The delta switch's factor at ``c`` classes (:data:`SAFE_FACTOR_2` at 2,
    :data:`SAFE_FACTOR` at 3–4, :data:`SAFE_FACTOR_FROM_5` at 5–6,
    :data:`SAFE_FACTOR_FROM_7` from 7; from 5 against the count's own quantile)."""
    if c <= 2:
        return SAFE_FACTOR_2
    if c <= 4:
        return SAFE_FACTOR
    return SAFE_FACTOR_FROM_7 if c >= 7 else SAFE_FACTOR_FROM_5


def _masks(key: str, c: int, k: int) -> tuple[FloatArray, FloatArray]:
    """Cell coefficients (C, C) of class k's numerator and denominator."""
    num, row, col = np.zeros((c, c)), np.zeros((c, c)), np.zeros((c, c))
    num[k, k], row[k], col[:, k] = 1.0, 1.0, 1.0
    if key == "precision_macro":
        den = col
    elif key == "f1_macro":
        num, den = 2.0 * num, row + col
    else:  # balanced_accuracy, recall_macro: recall over the true count
        den = row
    return num, den


def _plug_in(m: FloatArray, key: str) -> FloatArray:
    """The macro average's plug-in on the noisy matrices (R,): the mean of the per-class
    ratios N̂_k / D̂_k, each clipped to [0, 1], over the classes with D̂_k > 0 (NaN if
    none). A point estimate only: the interval decides what is published."""
    n_hat, d_hat = _ratio_parts(m, key)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(d_hat > 0, np.clip(n_hat / d_hat, 0.0, 1.0), np.nan)
    n = np.sum(~np.isnan(r), axis=1)
    with np.errstate(invalid="ignore"):
        out: FloatArray = np.where(n > 0, np.nansum(r, axis=1) / np.maximum(n, 1), np.nan)
    return out


def _ratio_parts(m: FloatArray, key: str) -> tuple[FloatArray, FloatArray]:
    """(N̂, D̂) (R, C) of every class's ratio, from the diagonal and margins (O(R·C²))."""
    diag = np.diagonal(m, axis1=-2, axis2=-1)
    t, p = m.sum(axis=-1), m.sum(axis=-2)
    if key == "precision_macro":
        return diag, p
    if key == "f1_macro":
        return 2.0 * diag, t + p
    return diag, t  # balanced_accuracy, recall_macro


def class_bounds(
    m: FloatArray, std: FloatArray, key: str, k: int, level: float, dist: MechanismKind,
    stretch: float = 1.0, ratio_parts: tuple[FloatArray, FloatArray] | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:  # fmt: skip
    """(low, high, bounded, margin) of class k's ratio over R releases: Fieller's set in
    [0, 1], and the class's count over the delta switch (> 1: clear of it; 0 when the count
    is not positive — before s29 a count far below zero counted as clear — or the switch is
    not finite). ``stretch``: how many times further out a rare class's switch lies
    (:data:`SWITCH_STRETCH_RARE` above level 0.95, else 1). ``ratio_parts``: the key's
    :func:`_ratio_parts` of ``m``, read once for all C classes (else read here)."""
    c = m.shape[-1]
    num, den = _masks(key, c, k)
    n_all, d_all = _ratio_parts(m, key) if ratio_parts is None else ratio_parts
    n_hat, d_hat = n_all[:, k], d_all[:, k]
    w_n, w_d = (num * std).reshape(-1), (den * std).reshape(-1)  # in noise-s.d. units
    nz = (w_n != 0.0) | (w_d != 0.0)  # the ≤ 2C − 1 cells class k reads: a zero weight adds
    w_n, w_d = w_n[nz], w_d[nz]  # nothing to any sum or quantile (O(C) a class, not O(C²))
    _, qs = quantile_factor(w_n[None, :] - _THETAS[:, None] * w_d[None, :], level, dist)
    q2 = float(np.max(qs)) ** 2
    vd, cv = float(w_d @ w_d), float(w_n @ w_d)
    a = d_hat * d_hat - q2 * vd
    b = n_hat * d_hat - q2 * cv
    disc = fieller_spread(n_hat, d_hat, w_n, w_d, q2)
    div = np.where(a <= 0.0, 1.0, a)
    low, high = np.clip((b - disc) / div, 0.0, 1.0), np.clip((b + disc) / div, 0.0, 1.0)
    # unbounded (a ≤ 0), or empty within [0, 1] (every value rejected: probability ≤ the
    # set's α, so any interval keeps the guarantee): the whole range, never a point
    bounded = (a <= 0.0) | ~(high > low)
    low, high = np.where(bounded, 0.0, low), np.where(bounded, 1.0, high)
    q2_safe = q2
    if c >= 5:  # the count's own quantile (SAFE_FACTOR_FROM_5, SAFE_FACTOR_FROM_7)
        q2_safe = float(quantile_factor(w_d[None, :], level, dist)[1][0]) ** 2
    switch = safe_factor(c) * float(np.sqrt(q2_safe * vd))  # the delta switch, in counts
    if not math.isfinite(switch):  # never reached from the public API (inputs are checked)
        return low, high, bounded.astype(np.float64), np.zeros_like(d_hat)
    clear = d_hat / switch if switch > 0.0 else np.full_like(d_hat, np.inf)
    if stretch != 1.0:  # a rare class's switch lies further out (SWITCH_STRETCH_RARE)
        rare = d_hat < RARE_SHARE * d_all.mean(axis=1)
        clear = np.where(rare, clear / stretch, clear)
    margin: FloatArray = np.where(d_hat > 0.0, clear, 0.0)
    if c == 2:  # the numerator clear of zero too (NUMERATOR_FACTOR_2)
        switch_n = NUMERATOR_FACTOR_2 * float(np.sqrt(q2_safe * float(w_n @ w_n)))
        clear_n = n_hat / switch_n if switch_n > 0.0 else np.full_like(n_hat, np.inf)
        if stretch != 1.0:
            clear_n = np.where(rare, clear_n / stretch, clear_n)
        margin = np.minimum(margin, np.where(n_hat > 0.0, clear_n, 0.0))
    return low, high, bounded.astype(np.float64), margin


def _presence(key: str, labels: Labels, c: int, k: int) -> FloatArray | None:
    """Cell coefficients of the count that decides whether class k counts in ``key``'s
    average (its true count for balanced accuracy, true or predicted with
    ``labels="present"``); None where every class counts."""
    row, col = np.zeros((c, c)), np.zeros((c, c))
    row[k], col[:, k] = 1.0, 1.0
    if key == "balanced_accuracy":
        return row
    return np.maximum(row, col) if labels == "present" else None


def surely_present(
    m: FloatArray, std: FloatArray, key: str, labels: Labels, k: int, level: float,
    dist: MechanismKind,
) -> BoolArray:  # fmt: skip
    """Releases (R,) whose class-k count is clear of the noise at ``level`` (two-sided
    quantile, so a class absent in truth passes with probability ≤ (1 − level)/2)."""
    w = _presence(key, labels, m.shape[-1], k)
    if w is None:
        return np.ones(m.shape[0], dtype=bool)
    w = (w * std).reshape(-1)
    se, q = quantile_factor(w[w != 0.0].reshape(1, -1), level, dist)  # zeros add nothing
    t, p = m[:, k, :].sum(axis=-1), m[:, :, k].sum(axis=-1)
    count = t if key == "balanced_accuracy" else t + p - m[:, k, k]  # row, or row ∪ column
    return np.asarray(count > float(q[0] * se[0]))


def _least_mean(v: FloatArray, sure: BoolArray) -> FloatArray:
    """(R,) min of mean(v[S]) over every non-empty S ⊇ sure. For a given size the least
    mean takes the sure classes and the smallest others, so the minimum is over the C + 1
    prefixes of the others sorted ascending (exact; O(C log C), not 2^C sets)."""
    r, c = v.shape
    n_sure = sure.sum(axis=1)
    s_sure = np.where(sure, v, 0.0).sum(axis=1)
    rest = np.sort(np.where(sure, np.inf, v), axis=1)  # the others ascending, sure ones last
    cum = np.concatenate(
        [np.zeros((r, 1)), np.cumsum(np.where(np.isfinite(rest), rest, 0.0), axis=1)], axis=1
    )
    j = np.arange(c + 1)[None, :]
    size = n_sure[:, None] + j
    ok = (j <= (c - n_sure)[:, None]) & (size > 0)
    means = np.where(ok, (s_sure[:, None] + cum) / np.maximum(size, 1), np.inf)
    out: FloatArray = means.min(axis=1)
    return out


def subset_range(
    low: FloatArray, high: FloatArray, sure: BoolArray
) -> tuple[FloatArray, FloatArray]:
    """(R,) min of mean(low) and max of mean(high) over every non-empty class set S
    with sure ⊆ S (``low``, ``high``, ``sure``: (R, C)); see :func:`_least_mean`."""
    return _least_mean(low, sure), -_least_mean(-high, sure)


def simultaneous_macro(
    batch: Batch, m: FloatArray, std: FloatArray, level: float, dist: MechanismKind,
    labels: Labels = "all", total: str | None = None,
) -> Batch:  # fmt: skip
    """Every macro average's interval from the C simultaneous per-class sets (module doc).

    Usable wherever the total passed its guard (``code`` ≤ 0 before: the former class
    flags, undefined plug-ins and intervals outside the range are replaced by the bound,
    which needs no plug-in); the estimate is the plug-in, clipped into the interval.
    ``total``: the key of the total's guard in ``batch``; a total within
    :data:`NEAR_TOTAL` s.e. above it gives the whole range [0, 1].
    """
    near = np.zeros(m.shape[0], dtype=bool)
    if total is not None:
        se, q = batch.den_se[total], batch.den_q[total]
        near = batch.den[total] < (q + NEAR_TOTAL) * se
    c = m.shape[-1]
    each = 1.0 - (1.0 - level) / c  # Bonferroni: the C sets hold at once at ≥ level
    band = SWITCH_HULL if dist == "gaussian" and c in SWITCH_HULL_CLASSES else 1.0
    stretch = SWITCH_STRETCH_RARE if level > 0.95 else 1.0
    low, high, est = dict(batch.low), dict(batch.high), dict(batch.estimate)
    code, bounded = dict(batch.code), dict(batch.bounded)
    adjusted, edge, per_class = dict(batch.adjusted), dict(batch.edge), dict(batch.per_class)
    for key in MACRO_KEYS:
        ratio = _ratio_parts(m, key)  # O(R·C²): once a key, not once a class
        parts = [class_bounds(m, std, key, k, each, dist, stretch, ratio) for k in range(c)]
        sure = np.stack(
            [surely_present(m, std, key, labels, k, each, dist) for k in range(c)], axis=1
        )
        lo, hi = subset_range(
            np.stack([p[0] for p in parts], axis=1), np.stack([p[1] for p in parts], axis=1), sure
        )
        n_bounded = sum(p[2] for p in parts)
        margin = np.min(np.stack([p[3] for p in parts], axis=1), axis=1)  # the least clear
        delta = batch.code[key] == 0
        safe = delta & (margin > band)  # the delta interval alone
        hull = delta & (margin > 1.0) & ~safe  # just past the switch: the hull of both
        lo, hi = (
            np.where(hull, np.minimum(lo, batch.low[key]), lo),
            np.where(hull, np.maximum(hi, batch.high[key]), hi),
        )
        lo, hi = np.where(safe, batch.low[key], lo), np.where(safe, batch.high[key], hi)
        lo, hi = np.where(near, 0.0, lo), np.where(near, 1.0, hi)
        usable = batch.code[key] <= 0
        code[key] = np.where(usable, 0, batch.code[key])
        low[key] = np.where(usable, lo, 0.0)
        high[key] = np.where(usable, hi, 1.0)
        # where the former interval's estimate is no plug-in (a class flag set it to the
        # measured classes' average, 0 when none was measured) or the range replaced it
        plug = np.where(near | (batch.code[key] != 0), _plug_in(m, key), batch.estimate[key])
        mid = 0.5 * (low[key] + high[key])
        est[key] = np.clip(np.where(np.isnan(plug), mid, plug), low[key], high[key])
        bounded[key] = np.where(usable, n_bounded, batch.bounded[key]).astype(np.int64)
        adjusted[key] = batch.adjusted[key] & safe
        edge[key] = batch.edge[key] & safe
        per_class[key] = (method_name(SIMULTANEOUS, dist), usable & ~safe)
    return replace(batch, low=low, high=high, estimate=est, code=code, bounded=bounded,
                   adjusted=adjusted, edge=edge, per_class=per_class)  # fmt: skip

"""From 3 classes: MCC's interval near the noise is Fieller's, and no spread guard flags it.

MCC = A / G with A = N·Σtp − Σ t_k·p_k and G = √(B·D), B = N² − Σ p_k² (the predicted
classes' spread) and D = N² − Σ t_k² (the true classes'). With A and G linearised in the
cells' noise (weights w_A, w_G), Fieller's set for θ = A / G is

    {θ ∈ [−1, 1] : (Â − θ·Ĝ)² ≤ q²·Var(Â − θ·Ĝ)},

at level 1 − α/2 (:data:`LEVEL_DIVISOR`), q the largest quantile of that pivot over θ ∈
[−1, 1] (Cornish–Fisher under Laplace noise, never below z). Unlike the delta interval it
does not assume Ĝ far from its noise (for a ratio of two linear sums under Gaussian noise
it is exact; A and G are quadratic in the cells and linearised here, so it is an
approximation whose level was set by measurement, not derived). Where Ĝ is not clear of
its noise (Ĝ² ≤ q²·Var Ĝ: the set is unbounded) the interval is MCC's whole range
[−1, 1], published as it is: it covers, and says nothing. Nothing reads the release to
decide publication. Flagging those releases instead (an earlier stats37 version) was a cut
on noisy data: in a cell whose true MCC is near 0 (3 classes, 90/5/5, a model predicting
the majority class 99.4% of the time, Laplace noise 0.07 of a cell) it published the 8%
of releases whose noise had inflated Ĝ, which covered 0.853–0.879 (review s37).

A release whose two spreads are both far clear of the noise (B̂ and D̂ above
:data:`SAFE_SPREAD` × q·se of their own noise; the former guard was 3 ×) keeps the delta
interval, unchanged. That switch reads the release but decides only which interval,
never whether one is published; the releases labelled delta near it are selected (as the
macro averages' in :mod:`._simultaneous`): read the label as how it was computed.

Why (stats37). MCC was unusable where either spread's estimate did not exceed
:data:`~._flam_intervals.SPREAD_FACTOR` × q·se of its noise — a cut on noisy data. With a
weak model (accuracy 0.55) and a 1% or 5% class at 3 classes, Laplace noise 0.15 of a
cell, the true spreads lie at that cut (B ≈ 5.6 s.e.): the guard published 7–17% of
releases and among them MCC's delta interval (selection-adjusted as if the noise were
Gaussian) covered 0.912–0.941 (public maximum 1–3 × the total; 4,000–16,000 releases).
Fieller's set (at :data:`LEVEL_DIVISOR`) covers 0.980–0.985 there over all releases, all
published, 0.40–0.45 wide (the delta interval was 0.36–0.41 among the few published). A
Bonferroni box over A, B and D at level 1 − α/3 each covered ≥ 0.999 but was 0.73–0.91
wide: not used. Measured over 960 cells (3–4 classes; balanced, 1%, 5%, two 5%, dominant;
accuracy 0.55–0.99; noise 0.1–0.2 of a cell; maximum 1–3 ×; both laws; 4,000 releases,
``/work/research/stats37/mcc3.py``): lowest among published 0.9437, in a cell whose
interval did not change; publication rose in 709 cells and fell in none; where an interval
changed and most releases were published before, width 0.71–1.30 × (median 1.02).
"""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from dpledger.metrics._assemble import Batch
from dpledger.metrics._intervals import fieller_spread, method_name, quantile_factor
from dpledger.metrics._segments import FloatArray
from dpledger.types import MechanismKind

__all__ = [
    "FIELLER_MCC",
    "LEVEL_DIVISOR",
    "MCC_FIELLER_CLASSES",
    "SAFE_SPREAD",
    "fieller_bounds",
    "mcc_fieller",
    "mcc_terms",
]

MCC_FIELLER_CLASSES = range(3, sys.maxsize)
"""The class counts whose MCC uses :func:`mcc_fieller` near the noise: every count from 3
(2 classes have their own rule, :func:`~._two_class.mcc_two_classes`). From 17 classes
since stats6 (F-MCC17): the spread guard selected there as at 7–16 — a 50% class predicted
for 90% of samples, Laplace noise 0.2–0.25 of a cell, MCC covered 0.871–0.946 among the
0.5–25% published at 17 and 20 classes; Fieller's set covers 0.975–0.977 there, all
published, and at 20–30 classes in heavy noise (balanced, accuracy 0.6–0.95, noise
0.3–0.6 of a cell, both laws) it gives the delta interval's coverage and width but in one
cell (Laplace 0.6, accuracy 0.95: 0.947 ± 0.0035 where the guard's interval covered 0.969,
its general level at many classes; see docs/intervals.md).
7–16 since s27c (outside audit stats5, F3; 13–16 after review s27c): the guard selected
there too, MCC covered
0.89–0.94 among the 1–2% published (7–10 classes, a 50% class predicted for 90–95% of
samples, Laplace noise 0.05–0.1 or Gaussian 0.2 of a cell); Fieller's set covers 0.975–0.978
there, all published."""
SAFE_SPREAD = 6.0
"""A release keeps MCC's delta interval when both spreads exceed this many times q·se of
their own noise (at the metric's level)."""
LEVEL_DIVISOR = 2.0
"""Fieller's set is taken at level 1 − α/2 (97.5% for a 95% interval): at the metric's own
level the linearised set covered 0.931–0.94 in heavy noise with a good model (3–4
classes, accuracy 0.9–0.99, Gaussian noise 0.1–0.2 of a cell; linearising √(B·D) and A
there is rough), at 1 − α/2 0.950–0.967 (1 − α/3: 0.955–0.976, 5–15% wider again)."""
BoolArray = npt.NDArray[np.bool_]
FIELLER_MCC = "fieller for MCC = A / √(B·D), linearised, at level 1 − α/2"
_TOTAL_GUARD = 1  # code of a failed total guard: nothing is measured
_THETAS = np.linspace(-1.0, 1.0, 21)  # where the pivot's quantile is taken (its largest)


def mcc_terms(m: FloatArray) -> tuple[dict[str, FloatArray], dict[str, FloatArray]]:
    """(values (R,), gradients ∂/∂M_ij (R, C, C)) of A, B and D for a stack m (R, C, C)."""
    c = m.shape[-1]
    t, p = m.sum(axis=-1), m.sum(axis=-2)
    n = t.sum(axis=-1)
    s_tp = np.trace(m, axis1=-2, axis2=-1)
    values = {
        "A": s_tp * n - (t * p).sum(axis=-1),
        "B": n * n - (p * p).sum(axis=-1),
        "D": n * n - (t * t).sum(axis=-1),
    }
    grads = {
        "A": np.eye(c)[None] * n[:, None, None] + s_tp[:, None, None] - p[:, :, None]
        - t[:, None, :],
        "B": np.broadcast_to((2.0 * n[:, None] - 2.0 * p)[:, None, :], m.shape),
        "D": np.broadcast_to((2.0 * n[:, None] - 2.0 * t)[:, :, None], m.shape),
    }  # fmt: skip
    return values, grads


def fieller_bounds(
    m: FloatArray, std: FloatArray, level: float, dist: MechanismKind
) -> tuple[FloatArray, FloatArray, BoolArray]:
    """MCC's (low, high, unbounded) (R,): Fieller's set for A / √(B·D), linearised (module
    doc); ``unbounded`` where √(B·D) is not clear of its noise (the set is [−1, 1])."""
    r = m.shape[0]
    values, grads = mcc_terms(m)
    b, d = np.maximum(values["B"], 0.0), np.maximum(values["D"], 0.0)
    g = np.sqrt(b * d)
    inv_g = np.where(g > 0.0, 1.0 / np.where(g > 0.0, g, 1.0), 0.0)
    w_a = (grads["A"] * std).reshape(r, -1)
    dg = 0.5 * (d[:, None, None] * grads["B"] + b[:, None, None] * grads["D"])
    w_g = (dg * inv_g[:, None, None] * std).reshape(r, -1)
    qs = np.stack([quantile_factor(w_a - t * w_g, level, dist)[1] for t in _THETAS])
    q2 = np.max(qs, axis=0) ** 2
    a_hat = values["A"]
    vd, cv = (w_g * w_g).sum(-1), (w_a * w_g).sum(-1)
    qa = g * g - q2 * vd
    qb = a_hat * g - q2 * cv
    disc = fieller_spread(a_hat, g, w_a, w_g, q2)
    unbounded = qa <= 0.0  # Ĝ not clear of its noise: the whole range
    div = np.where(unbounded, 1.0, qa)
    low = np.where(unbounded, -1.0, np.clip((qb - disc) / div, -1.0, 1.0))
    high = np.where(unbounded, 1.0, np.clip((qb + disc) / div, -1.0, 1.0))
    # a set wholly outside [−1, 1] (every value rejected: probability ≤ its α, so any
    # interval keeps the level) was a zero-width point at an edge (MCC near 1 at 10
    # classes, s27c): the whole range, as in :mod:`._simultaneous`
    empty = ~unbounded & ~(high > low)
    return np.where(empty, -1.0, low), np.where(empty, 1.0, high), unbounded


def mcc_fieller(
    batch: Batch, m: FloatArray, std: FloatArray, level: float, dist: MechanismKind,
    spreads: tuple[str, ...],
) -> Batch:  # fmt: skip
    """MCC's interval: Fieller's set unless both spreads (guard keys ``spreads``, in
    ``batch.den``) are far clear (module doc).

    Usable wherever the total passed its guard (its spread guards' flags, an undefined
    plug-in and a delta interval outside the range are replaced by Fieller's set, which
    needs none of them; an unbounded set is the whole range [−1, 1], published: flagging
    it would select on the noise); the estimate is the plug-in, clipped into the interval.
    """
    key = "mcc"
    far = batch.code[key] == 0
    for name in spreads:
        far &= batch.den[name] > SAFE_SPREAD * batch.den_q[name] * batch.den_se[name]
    low, high, _ = fieller_bounds(m, std, 1.0 - (1.0 - level) / LEVEL_DIVISOR, dist)
    usable = batch.code[key] != _TOTAL_GUARD
    lo = np.where(usable, np.where(far, batch.low[key], low), -1.0)
    hi = np.where(usable, np.where(far, batch.high[key], high), 1.0)
    code = np.where(usable, 0, batch.code[key])
    est = np.clip(np.nan_to_num(batch.estimate[key]), lo, hi)
    return replace(
        batch,
        low={**batch.low, key: lo}, high={**batch.high, key: hi},
        estimate={**batch.estimate, key: est}, code={**batch.code, key: code},
        adjusted={**batch.adjusted, key: batch.adjusted[key] & far},
        edge={**batch.edge, key: batch.edge[key] & far},
        per_class={**batch.per_class, key: (method_name(FIELLER_MCC, dist), usable & ~far)},
    )  # fmt: skip

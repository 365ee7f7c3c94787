"""``method="monte_carlo"`` for the classification metrics: bias-corrected percentiles.

Each release is redrawn ``draws`` times at the public noise scale
(:func:`~._assemble.redraws`) and every metric recomputed on the redraws, with each
per-class average restricted to the classes the release measures (the same classes
the delta method averages; the others are bounded afterwards, in
:func:`~._flam_intervals.classification_batch`, and every guard is the delta method's).

The interval is the percentile one shifted by twice the redraws' median bias
(:func:`~._assemble.draw_interval`). A per-class ratio N̂/D̂ is biased upward by
(v·Var D̂ − Cov(N̂, D̂))/D² to second order, with the same sign in every class, so a macro
average keeps that bias while its s.e. shrinks as 1/√C. The redraws are centred near
θ̂ + b ≈ θ + 2b, so the plain percentile interval doubled the bias: at 50 classes with
noise at the mean cell, F1 macro covered 0.72–0.81 and precision weighted 0.63
(``tests/test_coverage_monte_carlo.py``). The basic (reflected) interval 2θ̂ − q removes
the bias too but reverses the skew of a ratio over a noisy denominator: accuracy at 10
classes with noise at the mean cell covered 0.89–0.90 with it. The shift removes the
bias and keeps the percentile interval's shape.

Accuracy and the metrics equal to it (``labels="all"``) keep the delta method's
conditional Fieller interval under ``monte_carlo`` too: redraws about the release
cannot condition on the total's guard having passed, and where it only just passed (the
marginal zone of ``tests/coverage_cases.py``, accuracy 0.6, total 4,800) their interval
covered 0.81 (Laplace) and 0.88 (Gaussian) among the releases that passed, against
≥ 0.93 for the conditional one.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from dpledger.metrics._assemble import Base
from dpledger.metrics._confusion_linear import FAMILY, classification_gradients
from dpledger.metrics._redraws import draw_interval, redraws
from dpledger.metrics._segments import FloatArray
from dpledger.types import Labels, MechanismKind

__all__ = ["MONTE_CARLO", "classification_monte_carlo"]

MONTE_CARLO = "monte_carlo, percentile corrected for its median bias"
"""The method name of a classification interval computed by redraws."""


def classification_monte_carlo(
    m: FloatArray,
    std: FloatArray,
    *,
    labels: Labels,
    include: Mapping[str, FloatArray],
    level: float,
    distribution: MechanismKind,
    draws: int,
    seed: int,
    macro_include: Mapping[str, FloatArray] | None = None,
) -> dict[str, Base]:
    """Bias-corrected percentile intervals of every classification metric of R releases m (R, C, C).

    ``std`` (C, C) is the public noise s.d. per cell; ``include[family]`` (R, C) the
    classes each release measures (see :data:`~._confusion_linear.FAMILY`), held fixed
    across the redraws of that release; ``macro_include``, when given, replaces it for
    the macro averages and balanced accuracy (at 2 classes a class whose count's interval
    reaches its threshold is bounded there, not in the weighted averages: see
    :func:`~._flam_intervals.classification_batch`).
    """
    r, c = m.shape[0], m.shape[-1]
    macro = dict(macro_include) if macro_include is not None else None

    def values(stack: FloatArray, inc: Mapping[str, FloatArray],
               inc_m: Mapping[str, FloatArray] | None) -> dict[str, FloatArray]:  # fmt: skip
        out = {k: v for k, (v, _) in classification_gradients(stack, labels, inc).items()}
        if inc_m is not None:
            for k, (v, _) in classification_gradients(stack, labels, inc_m).items():
                if k in FAMILY and not k.endswith("_weighted"):
                    out[k] = v
        return out

    theta = values(m, include, macro)
    low = {k: np.empty(r) for k in theta}
    high = {k: np.empty(r) for k in theta}
    x = m.reshape(r, c * c)
    for rows, stack in redraws(x, std.reshape(-1), distribution=distribution, draws=draws,
                               seed=seed):  # fmt: skip
        inc = {f: np.repeat(v[rows], draws, axis=0) for f, v in include.items()}
        inc_m = None if macro is None else {
            f: np.repeat(v[rows], draws, axis=0) for f, v in macro.items()
        }  # fmt: skip
        sims = values(stack.reshape(-1, c, c), inc, inc_m)
        for key, v in sims.items():
            low[key][rows], high[key][rows] = draw_interval(
                v.reshape(-1, draws), level, theta[key][rows]
            )
    return {k: (low[k], high[k], np.isfinite(theta[k])) for k in theta}

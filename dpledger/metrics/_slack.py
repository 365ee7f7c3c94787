"""Derived intervals and a release's slack: the error a release's noise does not explain.

A release's coordinates are off their true values by noise AND by up to a public slack
per coordinate (:attr:`~dpledger.ledger.Release.sum_slack`: OpenDP's output grid, the
doubles' rounding, an aggregate's fixed-point encoding). The interval code propagates
the noise scale only, so a derived metric f(x̂) must also allow for f moving under
per-coordinate shifts |e_i| ≤ s_i.

**When nothing changes.** To first order the shift of f is |Σ e_i·∂_i f| ≤ Σ s_i·|∂_i f|
≤ ‖s/b‖₂·‖b·∇f‖₂ (Cauchy–Schwarz; b_i the coordinate's noise scale), and f's own noise
standard deviation is ≥ ‖b·∇f‖₂ (a Laplace coordinate's s.d. is √2·b, a Gaussian's σ).
So with the slack ratio ‖s/b‖₂ ≤ :data:`NEGLIGIBLE` = 0.01 the shift is at most 1% of
f's s.d.: a two-sided 95% normal interval then covers with probability
Φ(1.96 − 0.01) − Φ(−1.96 − 0.01) ≥ 0.94998 (the loss is second order: φ(1.96)·1.96·10⁻⁴
≈ 1.1e-5), far below any coverage test's resolution. Such releases — every ordinary
policy: the grid and rounding are ~1e-6 of the scale or less — keep their intervals bit
for bit.

**Otherwise** each usable interval is widened on both sides by the first-order worst
case Σ_i |f(x̂ + s_i·e_i) − f(x̂ − s_i·e_i)| / 2 (central differences at the slack itself,
so a nonlinearity within the slack counts too), clipped to the metric's range; a metric
that is undefined at a shifted release is flagged unusable. Post-processing of public
numbers only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
import numpy.typing as npt

from dpledger.metrics._assemble import Estimates
from dpledger.metrics._intervals import Interval

__all__ = ["NEGLIGIBLE", "WIDENED", "account_for_slack", "slack_ratio"]

NEGLIGIBLE = 0.01
"""The slack ratio ‖s/b‖₂ at or below which derived intervals are left as they are (see
the module doc: the coverage lost is ≤ 1.1e-5)."""

WIDENED = "widened for the release's slack (grid, rounding, encoding)"
"""Appended to the method of an interval :func:`account_for_slack` widened."""

_CHUNK = 2**20  # floats per batch of shifted releases


def slack_ratio(slack: npt.ArrayLike, scale: npt.ArrayLike) -> float:
    """‖s/b‖₂ over the coordinates (inf when a coordinate has slack but no noise)."""
    s = np.asarray(slack, dtype=np.float64).reshape(-1)
    b = np.broadcast_to(np.asarray(scale, dtype=np.float64).reshape(-1), s.shape)
    if np.any((s > 0) & ~(b > 0)):
        return math.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(s > 0, s / np.where(b > 0, b, 1.0), 0.0)
    return float(np.sqrt(np.sum(r * r)))


def account_for_slack(
    est: Estimates,
    released: npt.ArrayLike,
    slack: npt.ArrayLike,
    scale: npt.ArrayLike,
    point: Callable[[npt.NDArray[np.float64]], Mapping[str, npt.NDArray[np.float64]]],
    ranges: Mapping[str, tuple[float, float]],
) -> Estimates:
    """``est`` (one release's estimates and intervals) with its release's slack accounted for.

    ``released`` is the release's vector, ``slack``/``scale`` per coordinate (or one
    number each), ``point`` maps (R, d) shifted releases to each metric's point estimates
    (R,), ``ranges`` each metric's range. Returns ``est`` itself when the slack ratio is
    :data:`NEGLIGIBLE`; otherwise usable intervals widened (see the module doc).
    """
    x = np.asarray(released, dtype=np.float64).reshape(-1)
    s = np.broadcast_to(np.asarray(slack, dtype=np.float64).reshape(-1), x.shape)
    if slack_ratio(s, scale) <= NEGLIGIBLE:
        return est
    values, intervals = est
    widths = dict.fromkeys(intervals, 0.0)
    moved = np.flatnonzero(s > 0)
    step = max(1, _CHUNK // max(1, 2 * x.size))
    for start in range(0, moved.size, step):
        idx = moved[start : start + step]
        rows = np.repeat(x[None, :], 2 * idx.size, axis=0)
        at = np.arange(idx.size)
        rows[2 * at, idx] += s[idx]
        rows[2 * at + 1, idx] -= s[idx]
        shifted = point(rows)
        for k in widths:
            f = np.asarray(shifted[k], dtype=np.float64)
            widths[k] += float(np.sum(np.abs(f[0::2] - f[1::2]))) / 2.0
    out: dict[str, Interval] = {}
    for k, iv in intervals.items():
        w = widths[k]
        lo_r, hi_r = ranges[k]
        if not iv.usable:
            out[k] = iv
        elif not math.isfinite(w):
            out[k] = Interval(
                float(lo_r), float(hi_r), iv.level, iv.method,
                "undefined within the release's slack (grid, rounding, encoding): the "
                "noise scale is too small against it to tell",
            )  # fmt: skip
        else:
            low = max(iv.low - w, min(iv.low, float(lo_r)))
            high = min(iv.high + w, max(iv.high, float(hi_r)))
            out[k] = Interval(low, high, iv.level, f"{iv.method}, {WIDENED}")
    return dict(values), out

"""Scenario specs for synthetic fleets: what :func:`dpledger.sim.fleet.make_fleet` can plant.

Also the held-out loss generator (synthetic data, seeded ``numpy.random``: never noise).

Each spec is a frozen value naming the failure, where it is planted and with which
parameters, and the signature a metric should show. Reference figures (meters, in
:data:`REFERENCE_MODELS`): baseline along/across RMSE 0.90/1.00, "regional model A"
0.85/4.20.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from statistics import NormalDist
from types import MappingProxyType
from typing import ClassVar, Final, TypeAlias

import numpy as np
from numpy.typing import NDArray

from dpledger.errors import InvalidInput

__all__ = [
    "BASELINE_ACROSS_RMS",
    "BASELINE_ALONG_RMS",
    "DEFAULT_SCENARIOS",
    "HELD_OUT_LOSS_ANCHORS",
    "REFERENCE_MODELS",
    "CrsMismatch",
    "HeavyTailedLoss",
    "LabelSkew",
    "LateralDrift",
    "Overconfident",
    "Scenario",
    "SmallRegion",
    "held_out_losses",
]

#: (along-track RMSE, across-track RMSE) in meters of four reference models.
REFERENCE_MODELS: Final = MappingProxyType(
    {
        "baseline": (0.90, 1.00),
        "after retrain": (0.80, 0.90),
        "regional model A": (0.85, 4.20),
        "regional model B": (0.90, 1.10),
    }
)
BASELINE_ALONG_RMS, BASELINE_ACROSS_RMS = REFERENCE_MODELS["baseline"]
#: (quantile, per-client mean loss) of a held-out 2,000-client fleet; the last is its maximum.
HELD_OUT_LOSS_ANCHORS: Final = ((0.5, 0.4), (0.9, 1.2), (0.95, 1.6), (0.99, 3.4), (0.9995, 48.0))


def _scalar_rmse(along_rms: float, across_rms: float) -> float:
    """Scalar position RMSE from its components: sqrt((along² + across²) / 2)."""
    return math.hypot(along_rms, across_rms) / math.sqrt(2)


def _is_int(x: object) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise InvalidInput(message)


def _check_anchors(anchors: Sequence[tuple[float, float]]) -> None:
    qs, vs = [q for q, _ in anchors], [v for _, v in anchors]
    _require(len(anchors) >= 2, "loss anchors need at least two (quantile, value) pairs")
    _require(all(0.0 < q < 1.0 for q in qs), f"anchor quantiles must lie in (0, 1), got {qs}")
    _require(all(v > 0.0 and math.isfinite(v) for v in vs), f"anchor values must be > 0: {vs}")
    ok = all(a < b for a, b in pairwise(qs)) and all(a < b for a, b in pairwise(vs))
    _require(ok, f"anchor quantiles and values must both increase, got {list(anchors)}")


@dataclass(frozen=True)
class LateralDrift:
    """A region whose model drifts sideways: across-track RMS ≫ along-track RMS (meters).
    Defaults are the reference "regional model A" (0.85 / 4.20 m, scalar RMSE 3.03 m)."""

    name: ClassVar[str] = "lateral_drift"
    region: str = "eu-west"
    along_rms: float = REFERENCE_MODELS["regional model A"][0]
    across_rms: float = REFERENCE_MODELS["regional model A"][1]

    def __post_init__(self) -> None:
        _require(self.along_rms > 0 and self.across_rms > 0, "drift RMS values must be > 0")

    def signature(self, clients: range, n_clients: int) -> str:
        a, c, b = self.along_rms, self.across_rms, _scalar_rmse(*REFERENCE_MODELS["baseline"])
        return (
            f"along/across RMS ≈ {a:.2f}/{c:.2f} m (ratio {c / a:.1f}), scalar RMSE "
            f"≈ {_scalar_rmse(a, c):.2f} m vs baseline {b:.2f}: only the ratio shows the drift"
        )


@dataclass(frozen=True)
class CrsMismatch:
    """A ``fraction`` of one region's devices with a projection bug: their along-track error
    nearly vanishes (``along_rms`` m) while the across-track error gains a per-device shift of
    ±``offset_m`` x U(0.5, 1.5) m, so a clipped across/along ratio pins at its clip."""

    name: ClassVar[str] = "crs_mismatch"
    region: str = "eu-east"
    fraction: float = 0.10
    offset_m: float = 150.0
    along_rms: float = 0.02

    def __post_init__(self) -> None:
        _require(0.0 < self.fraction <= 1.0, f"CRS fraction must be in (0, 1], got {self.fraction}")
        _require(self.offset_m > 0 and self.along_rms > 0, "CRS offset and along RMS must be > 0")

    def signature(self, clients: range, n_clients: int) -> str:
        return (
            f"{len(clients)} devices: along RMS ≈ {self.along_rms:g} m, across ≈ ±{self.offset_m:g}"
            " m; per-client across/along ratio ≫ 10 (pinned at the clip); |error| > 25 m"
        )


@dataclass(frozen=True)
class Overconfident:
    """A region whose probabilities average ``confidence`` (prob ~ Beta(b, 1)) while outcomes
    are positive with probability ``hit_rate`` whatever the prob. Elsewhere prob ~ Beta(2, 1)
    and outcome ~ Bernoulli(prob): calibrated."""

    name: ClassVar[str] = "overconfident"
    region: str = "na"
    confidence: float = 0.9
    hit_rate: float = 0.5

    def __post_init__(self) -> None:
        _require(0.0 < self.confidence < 1.0, f"confidence must be in (0, 1): {self.confidence}")
        _require(0.0 <= self.hit_rate <= 1.0, f"hit_rate must be in [0, 1]: {self.hit_rate}")

    def signature(self, clients: range, n_clients: int) -> str:
        b = self.confidence / (1 - self.confidence)
        top = b / (b + 1) * (1 - 0.8 ** (b + 1)) / (1 - 0.8**b)  # E[prob | prob >= 0.8]
        return (
            f"mean prob ≈ {self.confidence:g}, outcome rate ≈ {self.hit_rate:g}: calibration gap "
            f"for prob >= 0.8 ≈ {top - self.hit_rate:.2f} (≈ 0 elsewhere)"
        )


@dataclass(frozen=True)
class HeavyTailedLoss:
    """Fleet-wide per-client loss levels with a heavy tail. log(level) is piecewise linear in
    the normal score of the client's quantile, through each (quantile, value) anchor and
    extrapolated along the end segments. Without this scenario the levels follow the
    lognormal body of the first two anchors only (same median and p90, no tail)."""

    name: ClassVar[str] = "heavy_tailed_loss"
    anchors: tuple[tuple[float, float], ...] = HELD_OUT_LOSS_ANCHORS

    def __post_init__(self) -> None:
        _check_anchors(self.anchors)

    def signature(self, clients: range, n_clients: int) -> str:
        pct = ", ".join(f"p{100 * q:g} ≈ {v:g}" for q, v in self.anchors)
        return f"per-client mean loss {pct}: clip at p99, not at the max"


@dataclass(frozen=True)
class LabelSkew:
    """Dirichlet label skew: each region draws a class mix p_r ~ Dir(region_alpha), each of
    its clients pi ~ Dir(alpha * n_classes * p_r) (mean per-class concentration ``alpha``).
    Without it labels are uniform. Per-class accuracy always falls linearly 0.95 → 0.55."""

    name: ClassVar[str] = "label_skew"
    alpha: float = 0.6
    region_alpha: float = 2.0

    def __post_init__(self) -> None:
        _require(self.alpha > 0 and self.region_alpha > 0, "Dirichlet concentrations must be > 0")

    def signature(self, clients: range, n_clients: int) -> str:
        return (
            f"per-client class mix ~ Dirichlet(alpha={self.alpha:g}): macro-F1 ≠ accuracy, and "
            "averages of per-client metrics ≠ the pooled metric"
        )


@dataclass(frozen=True)
class SmallRegion:
    """A region holding ``share`` of the clients, too few to publish. Added to the regions
    if absent (the others shrink proportionally), else its share is overridden."""

    name: ClassVar[str] = "small_region"
    region: str = "apac"
    share: float = 0.0075

    def __post_init__(self) -> None:
        _require(0.0 < self.share < 1.0, f"small region share must be in (0, 1): {self.share}")

    def signature(self, clients: range, n_clients: int) -> str:
        return (
            f"{len(clients)} clients ({len(clients) / n_clients:.2%} of the fleet): below a "
            "typical cohort floor, so its releases should be refused"
        )


Scenario: TypeAlias = (
    LateralDrift | CrsMismatch | Overconfident | HeavyTailedLoss | LabelSkew | SmallRegion
)
_SCENARIO_TYPES: Final[dict[str, type[Scenario]]] = {
    t.name: t
    for t in (LateralDrift, CrsMismatch, Overconfident, HeavyTailedLoss, LabelSkew, SmallRegion)
}
DEFAULT_SCENARIOS: Final[tuple[Scenario, ...]] = tuple(t() for t in _SCENARIO_TYPES.values())


F64: TypeAlias = NDArray[np.float64]
_NORMAL: Final = NormalDist()


def _loss_levels(z: F64, anchors: Sequence[tuple[float, float]]) -> F64:
    """Map standard-normal scores to loss levels through the anchors (see HeavyTailedLoss)."""
    zs = np.array([_NORMAL.inv_cdf(q) for q, _ in anchors])
    lv = np.log(np.array([v for _, v in anchors]))
    out: F64 = np.interp(z, zs, lv)
    lo, hi = z < zs[0], z > zs[-1]
    out[lo] = lv[0] + (lv[1] - lv[0]) / (zs[1] - zs[0]) * (z[lo] - zs[0])
    out[hi] = lv[-1] + (lv[-1] - lv[-2]) / (zs[-1] - zs[-2]) * (z[hi] - zs[-1])
    return np.exp(out)


def held_out_losses(
    n_clients: int = 2000,
    *,
    seed: int = 0,
    anchors: Sequence[tuple[float, float]] = HELD_OUT_LOSS_ANCHORS,
) -> F64:
    """Per-client mean losses of a held-out fleet, for choosing a clip bound.

    With the default anchors, 2,000 clients have p50 ≈ 0.4, p90 ≈ 1.2, p95 ≈ 1.6, p99 ≈ 3.4
    and a maximum typically in the tens (one draw from the tail: it varies with the seed, about
    20-250 over seeds 0-9; 26 for seed 0). Clipping at the max costs far more noise than at p99.
    """
    _require(n_clients > 0, f"n_clients must be > 0, got {n_clients}")
    _check_anchors(anchors)
    return _loss_levels(np.random.default_rng(seed).standard_normal(n_clients), anchors)

"""How a client contribution maps onto a ledger policy kind, and its sensitivity.

Each metric declares which policy kind releases it (``scalar_mean``, ``histogram`` or
``vector_sum``), the norm its bound is in, and which of its own parameters (clip or
cap) bound it. :meth:`MetricDeclaration.sensitivity` applies the ledger's rules
(``dpledger.mechanisms.sensitivity``): a scalar in ``[low, high]`` has Δ = high − low
under ``replace`` and max(|low|, |high|) under ``add_remove``; a vector with per-client
L1 norm ≤ c has Δ₁ = 2c under ``replace`` and c under ``add_remove``.

:class:`VectorSumCodec` puts a vector of measures with very different scales (sums
of squares, counts) into one ``vector_sum`` release with an L1 cap: each coordinate
is divided by its per-client bound and given a share of the cap. Decoding is
post-processing of the released vector and costs no ε.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np
import numpy.typing as npt

from dpledger import mechanisms as mech
from dpledger.errors import InvalidInput
from dpledger.metrics._segments import check_positive
from dpledger.policy import Neighbouring

__all__ = [
    "MetricDeclaration",
    "Neighbouring",
    "Norm",
    "PolicyKind",
    "VectorSumCodec",
    "l1_sensitivity",
    "scalar_sensitivity",
]

PolicyKind = Literal["scalar_mean", "histogram", "vector_sum"]
Norm = Literal["absolute", "l1"]

# Relative slack when checking that a measure respects its declared bound (float rounding).
_BOUND_SLACK = 1e-9


def scalar_sensitivity(low: float, high: float, neighbouring: Neighbouring) -> float:
    """Absolute sensitivity of a sum of per-client scalars clipped to ``[low, high]``.

    The rule is the ledger's (:func:`dpledger.mechanisms.scalar_sensitivity`), rounded
    up to a double so it never understates the exact value.
    """
    if not (math.isfinite(low) and math.isfinite(high)):
        raise InvalidInput(f"need finite low < high, got [{low!r}, {high!r}]")
    return mech.float_up(mech.scalar_sensitivity(Fraction(low), Fraction(high), neighbouring))


def l1_sensitivity(cap: float, neighbouring: Neighbouring) -> float:
    """L1 sensitivity of a sum of per-client vectors whose L1 norm is ≤ ``cap``."""
    c = check_positive(cap, "cap")
    return mech.float_up(mech.l1_sensitivity(Fraction(c), neighbouring))


@dataclass(frozen=True)
class MetricDeclaration:
    """What releases a metric and what bounds it.

    For a ``scalar_mean`` metric, ``low``/``high`` bound the per-client value; for a
    vector metric, ``cap`` bounds its L1 norm. Each is either a fixed number or the
    name of the contribution function's keyword that sets it (looked up in the
    ``params`` given to :meth:`sensitivity`, falling back to ``defaults``).
    ``nonnegative`` says every coordinate is ≥ 0 (histogram-like; matters for
    L2 sensitivity and for the ledger's negative-count check).
    """

    metric: str
    policy_kind: PolicyKind
    norm: Norm
    summary: str
    low: float | str | None = None
    high: float | str | None = None
    cap: float | str | None = None
    nonnegative: bool = True
    defaults: tuple[tuple[str, float], ...] = ()

    def _resolve(self, spec: float | str | None, params: Mapping[str, float]) -> float:
        if spec is None:
            raise InvalidInput(f"{self.metric}: no bound declared for a {self.policy_kind}")
        if isinstance(spec, str):
            merged = {**dict(self.defaults), **params}
            if spec not in merged:
                raise InvalidInput(f"{self.metric}: sensitivity needs the parameter {spec!r}")
            value = merged[spec]
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidInput(f"{self.metric}: {spec} must be a number, got {value!r}")
            return float(value)
        return float(spec)

    def bounds(self, **params: float) -> tuple[float, float]:
        """Per-client contribution bounds: ``(low, high)`` for a scalar, ``(0, cap)`` in L1."""
        if self.policy_kind == "scalar_mean":
            return self._resolve(self.low, params), self._resolve(self.high, params)
        return 0.0, self._resolve(self.cap, params)

    def sensitivity(self, neighbouring: Neighbouring, **params: float) -> float:
        """Sensitivity of the summed contributions, in :attr:`norm`, from the clip or cap."""
        low, high = self.bounds(**params)
        if self.policy_kind == "scalar_mean":
            return scalar_sensitivity(low, high, neighbouring)
        return l1_sensitivity(high, neighbouring)


@dataclass(frozen=True)
class VectorSumCodec:
    """Normalise measures of different scales into one L1-capped ``vector_sum`` vector.

    Coordinate k of a client's measures satisfies ``|x_k| ≤ bounds[k]`` by
    construction of the contribution function. Encoding maps it to
    ``z_k = x_k · cap · weights[k] / bounds[k]``, so ``|z_k| ≤ cap · weights[k]`` and,
    with the weights summing to 1, ``‖z‖₁ ≤ cap``: the whole vector is releasable at
    L1 cap ``cap``. ``weights`` decide how the cap (hence the noise) is shared between
    coordinates: coordinate k's noise in measure units is ``b · bounds[k] / (cap ·
    weights[k])`` for a Laplace scale ``b`` on the released vector.
    """

    names: tuple[str, ...]
    bounds: tuple[float, ...]
    weights: tuple[float, ...]
    cap: float

    def __post_init__(self) -> None:
        d = len(self.names)
        if d == 0 or len(self.bounds) != d or len(self.weights) != d:
            raise InvalidInput(
                f"codec needs one bound and one weight per name: {d} names, "
                f"{len(self.bounds)} bounds, {len(self.weights)} weights"
            )
        for name, b in zip(self.names, self.bounds, strict=True):
            check_positive(b, f"bound of {name}")
        for name, w in zip(self.names, self.weights, strict=True):
            check_positive(w, f"weight of {name}")
        if abs(math.fsum(self.weights) - 1.0) > 1e-12:
            raise InvalidInput(f"codec weights must sum to 1, got {math.fsum(self.weights)!r}")
        check_positive(self.cap, "cap")

    @staticmethod
    def build(
        names: tuple[str, ...],
        bounds: tuple[float, ...],
        *,
        cap: float,
        weights: tuple[float, ...] | None = None,
    ) -> VectorSumCodec:
        """A codec with ``weights`` normalised to sum to 1 (equal shares when omitted)."""
        w = (1.0,) * len(names) if weights is None else tuple(float(x) for x in weights)
        for name, x in zip(names, w, strict=False):
            check_positive(x, f"weight of {name}")
        total = math.fsum(w)
        return VectorSumCodec(
            names=tuple(names),
            bounds=tuple(float(b) for b in bounds),
            weights=tuple(x / total for x in w),
            cap=float(cap),
        )

    @property
    def dimension(self) -> int:
        """Length of the released vector (the policy's ``dimension``)."""
        return len(self.names)

    def _factors(self) -> npt.NDArray[np.float64]:
        factors: npt.NDArray[np.float64] = (
            np.asarray(self.weights, dtype=np.float64) * self.cap / np.asarray(self.bounds)
        )
        return factors

    def encode(self, measures: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Client side: measures (..., d) → normalised vectors with L1 norm ≤ ``cap``.

        A coordinate beyond its declared bound (beyond float rounding) means the
        measures were computed with other bounds: refused rather than silently clipped.
        """
        x = np.asarray(measures, dtype=np.float64)
        if x.ndim == 0 or x.shape[-1] != self.dimension:
            raise InvalidInput(f"measures must end in dimension {self.dimension}, got {x.shape}")
        if not np.all(np.isfinite(x)):
            raise InvalidInput("measures hold NaN or inf")
        limit = np.asarray(self.bounds)
        over = np.abs(x) > limit * (1.0 + _BOUND_SLACK)
        if over.any():
            k = int(np.nonzero(over)[-1][0])
            raise InvalidInput(
                f"measure {self.names[k]} exceeds its per-client bound {self.bounds[k]:g}; "
                "encode with the codec built from the same bounds as the measures"
            )
        share = np.asarray(self.weights) * self.cap
        z = np.clip(x * self._factors(), -share, share)
        rows = z.reshape(-1, self.dimension)
        norms = np.abs(rows).sum(axis=1)
        over_cap = norms > self.cap
        rows[over_cap] *= (self.cap / norms[over_cap])[:, None]
        return rows.reshape(z.shape)

    def decode(self, released: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Server side (post-processing): a summed, possibly noisy vector → measure units."""
        z = np.asarray(released, dtype=np.float64)
        if z.ndim == 0 or z.shape[-1] != self.dimension:
            raise InvalidInput(f"released vector must end in dimension {self.dimension}")
        return z / self._factors()

    def decoded_scale(self, scale: float | npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Per-coordinate noise scale in measure units for scale(s) ``scale`` on the release."""
        return np.broadcast_to(np.asarray(scale, dtype=np.float64), (self.dimension,)) / (
            self._factors()
        )

"""One L1-capped vector from measures of different scales: :class:`VectorSumCodec`.

It puts a vector of measures with very different scales (sums of squares, counts) into
one ``vector_sum`` release with an L1 cap: each coordinate is divided by its per-client
bound and given a share of the cap. Decoding is post-processing of the released vector
and costs no ε.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.metrics._reading import as_real, check_positive

__all__ = ["VectorSumCodec"]

# Relative slack when checking that a measure respects its declared bound (float rounding).
_BOUND_SLACK = 1e-9


def _check_names(names: object) -> None:
    """The measures' names: a non-empty tuple or list of text (a str is no list of names)."""
    if not (isinstance(names, tuple | list) and names and all(isinstance(n, str) for n in names)):
        raise InvalidInput(
            f"names must be a tuple of measure names (text), got {type(names).__name__} "
            f"{shown(names, 40)}"
        )


def _check_scales(
    names: tuple[str, ...], bounds: tuple[float, ...], weights: tuple[float, ...], cap: float
) -> None:
    """Each coordinate's share ``weight·cap`` and factor ``share / bound`` a normal double:
    an infinite factor encoded a zero measure as NaN (0·inf), one that underflowed encoded
    every measure as 0 (review 42)."""
    with np.errstate(over="ignore", under="ignore"):
        share = np.asarray(weights, dtype=np.float64) * cap
        factors = share / np.asarray(bounds)
    for k, name in enumerate(names):
        if not all(sys.float_info.min <= float(v[k]) < math.inf for v in (share, factors)):
            raise InvalidInput(
                f"the codec's scale of {name} (cap {cap:g} × its weight {weights[k]:g} / its "
                f"bound {bounds[k]:g}) is not a finite, normal double (2.2e-308 to 1.8e308): "
                "state the bounds and the cap in units that keep it there"
            )


def _vector(x: object) -> bool:
    """A 1-D numpy array (weights may come as one)."""
    return isinstance(x, np.ndarray) and x.ndim == 1


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
        _check_names(self.names)
        if not isinstance(self.bounds, tuple | list) or not isinstance(self.weights, tuple | list):
            raise InvalidInput("codec bounds and weights must be tuples of numbers, one per name")
        d = len(self.names)
        if d == 0 or len(self.bounds) != d or len(self.weights) != d:
            raise InvalidInput(
                f"codec needs one bound and one weight per name: {d} names, "
                f"{len(self.bounds)} bounds, {len(self.weights)} weights"
            )
        names = tuple(self.names)
        bounds = tuple(
            check_positive(b, f"bound of {n}") for n, b in zip(names, self.bounds, strict=True)
        )
        weights = tuple(
            check_positive(w, f"weight of {n}") for n, w in zip(names, self.weights, strict=True)
        )
        if abs(math.fsum(weights) - 1.0) > 1e-12:
            raise InvalidInput(f"codec weights must sum to 1, got {math.fsum(weights)!r}")
        cap = check_positive(self.cap, "cap")
        _check_scales(names, bounds, weights, cap)
        # kept as the checked floats, in tuples: a list given here, changed after, changed
        # the codec (a zero bound made release_regression raise after its spend; review 40)
        for field, value in (("names", names), ("bounds", bounds), ("weights", weights),
                             ("cap", cap)):  # fmt: skip
            object.__setattr__(self, field, value)

    @staticmethod
    def build(
        names: tuple[str, ...],
        bounds: tuple[float, ...],
        *,
        cap: float,
        weights: tuple[float, ...] | None = None,
    ) -> VectorSumCodec:
        """A codec with ``weights`` normalised to sum to 1 (equal shares when omitted)."""
        if weights is not None and not isinstance(weights, str | bytes | Mapping):
            with contextlib.suppress(TypeError):  # not iterable: refused below
                # any iterable of numbers (a generator too), read once
                weights = tuple(weights) if not _vector(weights) else weights
        if weights is not None and not (
            (isinstance(weights, list | tuple) or _vector(weights)) and len(weights) == len(names)
        ):
            raise InvalidInput(
                f"weights must be one number per measure ({len(names)}: {', '.join(names)}) "
                f"or None for equal shares, got {type(weights).__name__} {shown(weights, 40)}"
            )
        _check_names(names)
        if not (isinstance(bounds, list | tuple) or _vector(bounds)) or len(bounds) != len(names):
            raise InvalidInput(
                f"bounds must be one number per measure ({len(names)}: {', '.join(names)}), "
                f"got {type(bounds).__name__} {shown(bounds, 40)}"
            )
        # checked before float(): text, None or an array is InvalidInput, not float()'s error
        b = tuple(check_positive(x, f"bound of {n}") for n, x in zip(names, bounds, strict=True))
        w = (1.0,) * len(names) if weights is None else tuple(weights)
        # checked before float(): text, None or an integer past a double is InvalidInput
        w = tuple(check_positive(x, f"weight of {name}") for name, x in zip(names, w, strict=True))
        c = check_positive(cap, "cap")
        total = math.fsum(w)
        return VectorSumCodec(
            names=tuple(names),
            bounds=b,
            weights=tuple(x / total for x in w),
            cap=c,
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
        x = as_real(measures, "measures")  # by type: no text or objects (audit s29, F5)
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
        z = as_real(released, "released")
        if z.ndim == 0 or z.shape[-1] != self.dimension:
            raise InvalidInput(
                f"released vector must end in dimension {self.dimension}, got shape {z.shape}"
            )
        return z / self._factors()

    def decoded_scale(self, scale: float | npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Per-coordinate noise scale in measure units for scale(s) ``scale`` on the release."""
        b = as_real(scale, "scale")
        if b.ndim > 1 or b.size not in (1, self.dimension):
            raise InvalidInput(
                f"scale must be one number or one per coordinate ({self.dimension}), "
                f"got shape {b.shape}"
            )
        if not bool(np.all((b >= 0) & np.isfinite(b))):  # NaN, inf, negative: no noise scale
            raise InvalidInput(f"scale must be finite and ≥ 0, got {shown(b.tolist(), 60)}")
        return np.broadcast_to(b, (self.dimension,)) / self._factors()

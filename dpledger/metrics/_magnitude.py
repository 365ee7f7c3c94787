"""Error magnitudes, and error-histogram buckets from squared magnitudes without roots.

The error magnitude of a sample is fl(sqrt(s)) with s = fl(a² + b²) (along/across-track
errors a, b in metres; :func:`dpledger.metrics.spatial.error_magnitude`). A correctly
rounded square root is monotone, so for an edge e, fl(sqrt(s)) > e exactly when s > t(e),
t(e) the largest double (m²) whose root is ≤ e: counting buckets on s against those
thresholds gives the magnitudes' buckets bit for bit, one pass cheaper.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from dpledger.errors import InvalidInput
from dpledger.metrics._scratch import empty
from dpledger.metrics._segments import (
    FloatArray,
    as_finite,
    as_float,
    bucket_of,
    check_same_length,
    edges_array,
)

__all__ = ["error_magnitude", "magnitude_buckets", "root_thresholds"]


def error_magnitude(along: npt.ArrayLike, across: npt.ArrayLike) -> FloatArray:
    """Per-sample error magnitude ``hypot(along, across)`` in metres (histogram input).

    Computed as sqrt(a² + b²) (within an ulp of hypot, several times faster), with
    ``np.hypot`` for the entries where squaring would overflow or underflow; a magnitude
    beyond the largest double is that double (finite data, finite magnitude).
    """
    a, b = as_float(along, "along"), as_float(across, "across")
    if a.shape != b.shape:
        a, b = as_finite(along, "along"), as_finite(across, "across")
        check_same_length(along=a, across=b)
    with np.errstate(over="ignore", under="ignore"):
        r = a * a
        r += b * b
    np.sqrt(r, out=r)
    top = float(r.max()) if r.size else 0.0
    if not top <= 1e150:  # NaN or inf data is refused here; huge finite errors go on
        a, b = as_finite(along, "along"), as_finite(across, "across")
    if r.size and (not top <= 1e150 or float(r.min()) < 1e-150):
        # a nonzero error whose square underflows to 0 is recomputed too (review 44 G)
        extreme = (r > 1e150) | ((r < 1e-150) & ((a != 0) | (b != 0)))
        with np.errstate(over="ignore"):
            r[extreme] = np.hypot(a[extreme], b[extreme])
        # finite errors whose magnitude exceeds the largest double: that double (still
        # finite, past every edge), so finite data always gives a finite magnitude
        np.minimum(r, np.finfo(np.float64).max, out=r)
    return r


_ROOT_SAFE_EDGES = (1e-140, 1e140)  # positive edges here: t(e) is exact, far from hypot's range


def magnitude_buckets(
    along: npt.ArrayLike, across: npt.ArrayLike, edges: npt.ArrayLike
) -> npt.NDArray[np.integer[Any]] | None:
    """Each sample's bucket of its error magnitude (metres) over ``edges``, counted on
    s = fl(a² + b²) against :func:`root_thresholds`; None when that is not exact here.

    It is exact while every edge is ≤ 0 or in [1e-140, 1e140] m and every s ≤ 1e300 m²
    (which also proves the data finite): the magnitudes that
    :func:`~dpledger.metrics.spatial.error_magnitude` recomputes with ``hypot`` (below
    1e-150 or above 1e150 m) then fall in the same bucket either way. Otherwise (None)
    the caller computes the magnitudes, and their checks name any problem.
    """
    try:
        e = edges_array(edges)
    except InvalidInput:
        return None  # the full path names the problem
    low, high = _ROOT_SAFE_EDGES
    if not all(x <= 0.0 or low <= x <= high for x in e.tolist()):
        return None
    a, b = as_float(along, "along"), as_float(across, "across")
    if a.shape != b.shape:
        return None
    n = a.shape[0]
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        squared = np.multiply(a, a, out=empty("magnitude.squared", n, np.float64))
        squared += np.multiply(b, b, out=empty("magnitude.across", n, np.float64))
    if squared.size and not float(squared.max()) <= 1e300:  # NaN, inf or huge: full path
        return None
    buckets = bucket_of(squared, root_thresholds(tuple(e.tolist())))
    if 0.0 in e and squared.size and float(squared.min()) == 0.0:
        # a nonzero error whose square underflows to 0 lies above an edge at 0 m (its
        # magnitude, < 1e-150, below every positive edge here; review 44 G)
        buckets[(squared == 0.0) & ((a != 0) | (b != 0))] += 1
    return buckets


@functools.lru_cache(maxsize=64)
def _root_thresholds_cached(edges: tuple[float, ...]) -> FloatArray:
    out = np.empty(len(edges))
    for i, e in enumerate(edges):
        if e < 0.0:
            out[i] = -np.inf  # every magnitude (≥ 0) is above a negative edge
            continue
        t = e * e  # within an ulp or two of the answer: step to it
        while math.sqrt(t) > e:
            t = math.nextafter(t, -math.inf)
        while math.sqrt(math.nextafter(t, math.inf)) <= e:
            t = math.nextafter(t, math.inf)
        out[i] = t
    out.setflags(write=False)
    return out


def root_thresholds(edges: tuple[float, ...]) -> FloatArray:
    """For each edge e (metres; ≤ 0 or in [1e-140, 1e140]), the largest double t (m²)
    with fl(sqrt(t)) ≤ e, so that fl(sqrt(s)) > e ⟺ s > t (−inf for e < 0)."""
    return _root_thresholds_cached(edges)

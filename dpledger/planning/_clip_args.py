"""The argument checks of :func:`dpledger.planning.clip.calibrate_clip` (private), and
how its numbers are written (a candidate bound as a policy's decimal, percentile labels,
the ×1000 columns).

Every argument is refused with :class:`InvalidInput` naming it; numpy scalars are read as
the real numbers they are, and an integer beyond a double (10**400) is out of range, not
an ``OverflowError``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.policy.base import MAX_BOUND, MAX_BUDGET, MIN_NORMAL
from dpledger.types import cohort_size, positive_real

__all__ = [
    "LARGEST",
    "bound_column",
    "bound_texts",
    "check_args",
    "clip_bias",
    "clip_low",
    "milli",
    "normal_or_zero",
    "pct",
]

LARGEST = float(MAX_BOUND)
"""The largest held-out value or ``low`` accepted: a policy's clip bound limit (beyond it
a candidate bound could not be written into a policy)."""


_SMALLEST_EPSILON, _LARGEST_EPSILON = float(MIN_NORMAL), float(MAX_BUDGET)
"""The per-release ε calibration takes: a policy's budget range (a normal double ≤ 1e9)."""


def normal_or_zero(x: float) -> bool:
    """Whether ``x`` is 0 or a normal double: what a policy's clip bound may be."""
    return x == 0 or abs(x) >= _SMALLEST_EPSILON


def bound_texts(
    x: npt.NDArray[np.float64], bounds: npt.NDArray[np.float64], low: float
) -> list[str]:
    """Each candidate bound as a policy's decimal: 6 significant digits, or as many more as
    keep it within 5e-6 of the clip's width (what 6 digits are with ``low = 0``) and
    clipping the same values of the sorted held-out ``x`` (review 43: values near 1e11 had
    p99 = 100000000004.6 written 1e+11, a clip below every held-out value, or no clip at
    all with ``low = 1e11``), and never below the smallest normal double (review 44:
    2.2250745e-308 written 2.22507e-308, which no Clip takes)."""
    out = []
    for b in map(float, bounds):
        kept = np.searchsorted(x, b, side="right")
        for digits in range(6, 17):
            text, d = f"{b:.{digits}g}", float(f"{b:.{digits}g}")
            if (
                abs(d - b) <= 5e-6 * (b - low)
                and np.searchsorted(x, d, side="right") == kept
                and (d == 0 or abs(Fraction(text)) >= MIN_NORMAL)  # a bound a Clip takes
            ):
                break
        else:
            text = repr(b)  # exactly the bound
        out.append(text)
    return out


def clip_bias(
    x: npt.NDArray[np.float64], bounds: npt.NDArray[np.float64], low: float
) -> npt.NDArray[np.float64]:
    """Each bound's bias on the sorted ``x``, mean(clip(x, low, b)) − mean(x), summed
    exactly and rounded once: what clipping adds below low minus what it removes above the
    bound (each a sum of doubles, taken as a Fraction), the tails from the highest bound
    down, so the values are read once. Review 44: in doubles the two parts cancelled, each
    ~9.9e11 with one client at −9.9e11 and one at +9.9e11 (p99's bias off by 7e-5)."""
    n = x.size
    n_le = np.searchsorted(x, bounds, side="right")  # values ≤ each bound
    n_low = int(np.searchsorted(x, low, side="left"))  # values below low: raised to low
    raised = n_low * Fraction(low) - _exact_sum(x[:n_low])
    out = np.zeros(len(bounds))
    tail, above = Fraction(0), n  # Σ x_i over i ≥ above, exactly
    for j in np.argsort(bounds, kind="stable")[::-1]:
        k = int(n_le[j])
        tail += _exact_sum(x[k:above])
        lowered = tail - (n - k) * Fraction(float(bounds[j]))
        out[j], above = float((raised - lowered) / n) + 0.0, k  # 0 or underflow: never -0
    return out


def _exact_sum(values: npt.NDArray[np.float64]) -> Fraction:
    """The exact sum of doubles, 65,536 at a time (a list of each chunk, not of all): fsum's
    correctly rounded sum, then fsum of what it left, until nothing is (each round takes 53
    more bits; a nonzero rest is never rounded to 0)."""
    total = Fraction(0)
    for i in range(0, values.size, 1 << 16):
        terms = values[i : i + (1 << 16)].tolist()
        while (s := math.fsum(terms)) != 0.0:
            total += Fraction(s)
            terms.append(-s)
    return total


def bound_column(bounds: Sequence[float], written: Sequence[str], low: float) -> list[str]:
    """The bounds as the table (and its recommendation line) shows them: 4 significant
    digits, or each one's ``written`` decimal where 4 would merge distinct bounds or show
    one at or below ``low`` (review 43; below it and the recommendation too, review 44)."""
    shown = [f"{b:.4g}" for b in bounds]
    if len(set(shown)) < len(set(bounds)) or any(float(s) <= low for s in shown):
        return list(written)
    return shown


def pct(p: float) -> str:
    """A percentile as labels show it: ``99`` or ``99.7``, with every digit it needs
    (``99.99999999`` is not shown as ``p100``, the maximum it is not)."""
    text = f"{p:g}"
    return text if float(text) == p else repr(float(p))


def milli(x: float) -> str:
    """``x × 1000`` as the table shows it: one decimal, or 3 digits and an exponent once
    that is long (a noise scale at a tiny ε is near the largest double: ×1000 is inf);
    3 significant digits where one decimal would round a nonzero value to 0.0 (a metric of
    rates near 1e-3: its noise is not 0)."""
    if x != 0 and abs(1000 * x) < 0.05:
        return f"{1000 * x:.3g}"
    if abs(x) < 1e9:
        return f"{1000 * x:.1f}"
    mantissa, exponent = f"{x:.2e}".split("e")
    return f"{mantissa}e{int(exponent) + 3}"


def check_args(percentiles: Sequence[float], epsilon: float, cohort: int) -> tuple[float, ...]:
    """The percentiles as floats, once ``epsilon`` and ``cohort`` are checked."""
    eps = positive_real(epsilon, "epsilon")
    if not _SMALLEST_EPSILON <= eps <= _LARGEST_EPSILON:
        raise InvalidInput(
            f"epsilon must lie between 2.2e-308 and 1e9, the per-release ε a policy accepts "
            f"(a normal double, at most 1e9), got {eps:g}: use an ε in that range"
        )
    cohort_size(cohort, "cohort n")
    if isinstance(percentiles, str | bytes) or not isinstance(percentiles, Iterable):
        raise InvalidInput(
            f"percentiles must be a sequence of numbers in [0, 100], e.g. (50, 99), got "
            f"{type(percentiles).__name__} {percentiles!r:.40}"
        )
    if isinstance(percentiles, np.ndarray) and percentiles.ndim != 1:  # a 0-d one cannot
        # be iterated, though Iterable by type
        raise InvalidInput(f"percentiles must be one flat sequence, got shape {percentiles.shape}")
    pcts = tuple(_percentile(p) for p in percentiles)
    if not pcts:
        raise InvalidInput("give at least one candidate percentile")
    bad = [p for p in pcts if not 0 <= p <= 100]
    if bad:
        raise InvalidInput(f"percentiles must lie in [0, 100], got {bad}")
    if len(set(pcts)) != len(pcts):
        raise InvalidInput(f"percentiles must be distinct, got {list(pcts)}")
    return pcts


def clip_low(low: object) -> Fraction:
    """``low`` exactly (an int or Fraction as written, else its double), within ±1e12 and 0
    or a normal double, as a policy's clip bounds are."""
    if isinstance(low, bool) or not isinstance(low, numbers.Real):
        raise InvalidInput(f"low must be a real number, got {type(low).__name__} {shown(low, 40)}")
    x = _float(low)
    if not abs(x) <= LARGEST:
        raise InvalidInput(f"low must lie within ±1e12 (a policy's clip bounds), got {shown(x)}")
    if not normal_or_zero(x):
        raise InvalidInput(f"low must be 0 or at least 2.2e-308 in magnitude (a policy's "
                           f"clip bounds), got {shown(x)}")  # fmt: skip
    return Fraction(low) if isinstance(low, numbers.Rational) else Fraction(x)


def _percentile(p: object) -> float:
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise InvalidInput(f"percentiles must be numbers in [0, 100], got {shown(p, 40)}")
    return _float(p)  # out of range (nan, inf, 10**400): refused by check_args


def _float(value: numbers.Real) -> float:
    """``value`` as a double; an integer beyond a double's range (10**400) as inf."""
    try:
        return float(value)
    except OverflowError:
        return math.inf

"""One monotone search: the least grid point where a monotone test starts to pass.

Calibration (the least noise scale whose privacy map fits a budget), cohort floors (the
least cohort whose error bar meets a target), inverse planning (the least 4-digit budget
that meets a target) and the ρ ↔ ε conversion all ask the same question of a test that is
False, …, False, True, …, True along a grid. :func:`least_integer` answers it from a guess
by galloping (1, 2, 4, … steps) then bisecting: O(log distance) calls of the test, so a
closed-form guess costs two or three. Floats are searched through their bit patterns,
which order positive doubles, so :func:`least_float` returns the exact least float.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable

from dpledger._shown import shown
from dpledger.errors import InternalError

__all__ = ["least_float", "least_integer"]


def least_integer(
    passes: Callable[[int], bool], lo: int, hi: int, guess: int | None = None
) -> int | None:
    """The least ``i`` in ``[lo, hi]`` with ``passes(i)``; None if even ``hi`` fails.

    ``passes`` must be monotone on the range (once True, True from there on). The search
    starts at ``guess`` (default ``lo``) and never calls ``passes`` outside ``[lo, hi]``.
    """
    if lo > hi:
        return None
    g = lo if guess is None else min(max(guess, lo), hi)
    step = 1
    if passes(g):
        good, bad = g, lo - 1  # bad: a failing point, or the sentinel just below lo
        while good > lo:
            cand = max(good - step, lo)
            if not passes(cand):
                bad = cand
                break
            good, step = cand, step * 2
    else:
        bad = g
        while True:
            if bad == hi:
                return None
            cand = min(bad + step, hi)
            if passes(cand):
                good = cand
                break
            bad, step = cand, step * 2
    while good - bad > 1:
        mid = (good + bad) // 2
        if passes(mid):
            good = mid
        else:
            bad = mid
    return good


def _key(x: float) -> int:
    """The bit pattern of a double ≥ 0 as an integer: order-preserving for x ≥ 0."""
    return int(struct.unpack("<q", struct.pack("<d", x))[0])


def _float(key: int) -> float:
    return float(struct.unpack("<d", struct.pack("<q", key))[0])


def least_float(
    passes: Callable[[float], bool], lo: float, hi: float = math.inf, guess: float | None = None
) -> float | None:
    """The least double ``x`` in ``[lo, hi]`` (both ≥ 0) with ``passes(x)``; None if none does.

    Exact on the grid of doubles: the result passes and the double just below it (if it
    is ≥ ``lo``) does not, for a monotone ``passes``.
    """
    if not (lo >= 0 and hi >= lo) or math.isnan(hi):
        raise InternalError(f"a float search needs 0 ≤ lo ≤ hi, got lo={shown(lo)}, hi={shown(hi)}")
    start = None if guess is None else _key(min(max(guess, lo), hi))
    found = least_integer(lambda k: passes(_float(k)), _key(lo), _key(hi), start)
    return None if found is None else _float(found)

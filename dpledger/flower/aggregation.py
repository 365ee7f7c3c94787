"""The aggregator hook: how one region's contributions become the sum the ledger releases.

**What the default does, plainly.** :class:`PlainSum` receives every reporting client's
bounded contribution in the clear, checks it against its policy bounds and adds them
exactly (fixed-point integers, :mod:`dpledger.metrics.secure_sum`: the exact sum the
ledger's charge assumes). The ServerApp process — and whoever can read its memory or
logs — therefore sees each client's clipped contribution. Differential privacy protects
what is published (the noisy releases), not this in-process view. That is this
deployment's limitation.

**What secure aggregation changes.** With a secure-sum protocol (clients mask their
fixed-point contributions so that only the region's total can be unmasked, as Flower's
SecAgg+ does), the server learns the sum and nothing about any single client. Bounds then
cannot be checked per reply on the server: they rest on the client module (or on range
proofs), and a dropout is handled by the protocol's recovery. The ledger side does not
change: it still releases the exact sum at the policy's sensitivity.

A secure-sum implementation plugs in by implementing :class:`Aggregator` — ``check``
(what it can verify of one reply's payload) and ``total`` (one region's sum) — and is
passed as ``LedgerEvaluation(..., aggregator=...)``; the wrapper is unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from dpledger.errors import InvalidInput
from dpledger.flower.wire import MetricPlan
from dpledger.mechanisms import CLIENT_ROUNDING_SLACK
from dpledger.metrics.secure_sum import DEFAULT_BITS, FixedPoint, exact_sum

__all__ = ["ROUNDING_SLACK", "Aggregator", "PlainSum"]

ROUNDING_SLACK = float(CLIENT_ROUNDING_SLACK)
"""Relative slack on a clear contribution's bounds for client-side float rounding: the
slack every sensitivity the ledger charges for is widened by."""


class Aggregator(Protocol):
    """Turns one region's validated payloads for one metric into its exact sum."""

    def check(self, metric: MetricPlan, payload: npt.NDArray[np.float64]) -> str | None:
        """Why one client's payload must be rejected, or None (public bounds only)."""
        ...

    def total(
        self, metric: MetricPlan, payloads: Sequence[npt.NDArray[np.float64]]
    ) -> npt.NDArray[np.float64]:
        """The exact sum of a region's accepted payloads: shape ``(metric.size,)``."""
        ...


class PlainSum:
    """Plain exact sums of clear contributions (see the module docstring for what it exposes).

    ``bits`` sets the fixed-point grid below each metric's bound
    (:class:`~dpledger.metrics.secure_sum.FixedPoint`).
    """

    def __init__(self, bits: int = DEFAULT_BITS) -> None:
        self.bits = bits

    def grid(self, metric: MetricPlan) -> FixedPoint:
        """The metric's public fixed-point grid: its clip, or ``[−cap, cap]`` for a vector."""
        b = metric.bounds
        if metric.scalar:
            return FixedPoint(float(b.need("low", metric.metric)), float(b.high or 0), self.bits)
        return FixedPoint.for_cap(float(b.need("cap", metric.metric)), self.bits)

    def check(self, metric: MetricPlan, payload: npt.NDArray[np.float64]) -> str | None:
        """Why a clear contribution breaks its policy bounds (clip, L1 cap, sign), or None.

        Float rounding on the client is allowed :data:`ROUNDING_SLACK` (relative), the
        slack the ledger's sensitivities are widened by. Reasons name public bounds only.
        """
        row = np.asarray(payload, dtype=np.float64).reshape(-1)
        b = metric.bounds
        if metric.scalar:
            low, high = float(b.low or 0.0), float(b.high or 0.0)
            slack = ROUNDING_SLACK * max(abs(low), abs(high))
            if not low - slack <= float(row[0]) <= high + slack:
                return f"{metric.metric}: outside its clip [{low:g}, {high:g}]"
            return None
        if metric.nonnegative and bool(np.any(row < 0)):
            return f"{metric.metric}: a negative entry in a nonnegative vector"
        cap = float(b.cap or 0.0)
        if float(np.abs(row).sum()) > cap * (1 + ROUNDING_SLACK):
            return f"{metric.metric}: L1 norm above its cap {cap:g}"
        return None

    def total(
        self, metric: MetricPlan, payloads: Sequence[npt.NDArray[np.float64]]
    ) -> npt.NDArray[np.float64]:
        """Encode each contribution on the grid, add the integers exactly, decode once."""
        if not payloads:
            return np.zeros(metric.size, dtype=np.float64)
        rows = np.stack([np.asarray(p, dtype=np.float64).reshape(-1) for p in payloads])
        if rows.shape[1] != metric.size:
            raise InvalidInput(
                f"{metric.metric}: rows of length {rows.shape[1]}, not {metric.size}"
            )
        out: npt.NDArray[np.float64] = exact_sum(rows, self.grid(metric)).reshape(metric.size)
        return out

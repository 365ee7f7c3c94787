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
passed as ``LedgerEvaluation(..., aggregator=...)``; the wrapper is unchanged. One that
does not deliver the clients' exact values (a fixed-point grid) also defines
``sum_error(metric, cohort)``: a public bound on its sum's error per coordinate, which the
wrapper adds to each release's bar and derived intervals (:func:`aggregate_error`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from dpledger.errors import InvalidInput
from dpledger.flower.wire import MetricPlan
from dpledger.mechanisms import CLIENT_ROUNDING_SLACK
from dpledger.metrics.secure_sum import DEFAULT_BITS, FixedPoint, exact_sum

__all__ = ["ROUNDING_SLACK", "Aggregator", "PlainSum", "aggregate_error", "sums_few_rows"]

ROUNDING_SLACK = float(CLIENT_ROUNDING_SLACK)
"""Relative slack on a clear contribution's bounds for client-side float rounding: the
slack every sensitivity the ledger charges for is widened by."""


class Aggregator(Protocol):
    """Turns one region's payloads for one metric into its exact sum.

    ``rows`` stacks the payloads of the replies that passed the wire checks, one row
    per client, as they arrived (a plain sum's rows are float contributions; a secure
    sum's would be masked shares). A ``check`` that raises (or gives no verdict per row)
    is asked again row by row, and a row whose own check raises is rejected; a ``total``
    that raises leaves that region's metric not released, nothing spent. Neither ends
    the round or the run.
    """

    def check(self, metric: MetricPlan, rows: npt.NDArray[Any]) -> list[str | None]:
        """Per row, why that client's payload must be rejected, or None (public bounds only)."""
        ...

    def total(self, metric: MetricPlan, rows: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        """The exact sum of a region's accepted rows: shape ``(metric.size,)``."""
        ...


class PlainSum:
    """Plain exact sums of clear contributions (see the module docstring for what it exposes).

    ``bits`` sets the fixed-point grid below each metric's bound
    (:class:`~dpledger.metrics.secure_sum.FixedPoint`).
    """

    def __init__(self, bits: int = DEFAULT_BITS) -> None:
        FixedPoint(0.0, 1.0, bits)  # the grid's own check, before any round
        self.bits = bits
        self._grids: dict[tuple[float, ...], FixedPoint] = {}  # (bounds, bits) -> its grid

    def grid(self, metric: MetricPlan) -> FixedPoint:
        """The metric's public fixed-point grid: its clip, or ``[−cap, cap]`` for a vector
        (built and checked once per bounds and ``bits``: a round asks for each twice)."""
        b = metric.bounds
        if metric.scalar:
            low, high = float(b.need("low", metric.metric)), float(b.high or 0)
        else:
            high = float(b.need("cap", metric.metric))
            low = -high
        key = (low, high, self.bits)
        found = self._grids.get(key)
        if found is None:
            found = FixedPoint(low, high, self.bits) if metric.scalar else (
                FixedPoint.for_cap(high, self.bits)
            )  # fmt: skip
            self._grids[key] = found
        return found

    def check(self, metric: MetricPlan, rows: npt.NDArray[Any]) -> list[str | None]:
        """Per row, why a clear contribution breaks its policy bounds (clip, L1 cap, sign).

        Float rounding on the client is allowed :data:`ROUNDING_SLACK` (relative), the
        slack the ledger's sensitivities are widened by. Vectorised over the rows; a round
        where every row is within its bounds (the usual case) is one pass
        (:func:`_all_within`), the reasons are only worked out when one is not.
        """
        x = np.asarray(rows, dtype=np.float64).reshape(len(rows), metric.size)
        if _all_within(metric, x):
            return [None] * len(x)
        b = metric.bounds
        name = metric.metric
        finite = np.asarray(np.isfinite(x).all(axis=1), dtype=bool)
        if not finite.all():
            x = np.where(np.isfinite(x), x, 0.0)
        out: list[str | None] = [None] * len(x)
        if metric.scalar:
            low, high = float(b.low or 0.0), float(b.high or 0.0)
            slack = ROUNDING_SLACK * max(abs(low), abs(high))
            bad: npt.NDArray[np.bool_] = (x[:, 0] < low - slack) | (x[:, 0] > high + slack)
            for i in np.flatnonzero(bad & finite).tolist():
                out[i] = f"{name}: outside its clip [{low:g}, {high:g}]"
        else:
            cap = float(b.cap or 0.0)
            negative = np.asarray((x < 0).any(axis=1) & metric.nonnegative, dtype=bool)
            over: npt.NDArray[np.bool_] = np.abs(x).sum(axis=1) > cap * (1 + ROUNDING_SLACK)
            for i in np.flatnonzero(over).tolist():
                out[i] = f"{name}: L1 norm above its cap {cap:g}"
            for i in np.flatnonzero(negative).tolist():  # a stronger reason than the cap
                out[i] = f"{name}: a negative entry in a nonnegative vector"
        for i in np.flatnonzero(~finite).tolist():  # the strongest reason
            out[i] = f"{name}: NaN or inf"
        return out

    def total(self, metric: MetricPlan, rows: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
        """Encode each contribution on the grid, add the integers exactly, decode once.

        The rows passed :meth:`check`, which allows :data:`ROUNDING_SLACK` past a bound
        for client rounding; that slack can reach past the grid's own rounding allowance
        (:meth:`FixedPoint.accepted_range`, which refuses the rest), so each coordinate is
        first set to the grid's interval here: the slack's values are read as the edge,
        and the units are those the grid gives the edge itself.
        """
        x = np.asarray(rows, dtype=np.float64).reshape(-1, metric.size)
        grid = self.grid(metric)
        x = np.clip(x, grid.low, grid.high)  # only rounding slack: check() refused the rest
        out: npt.NDArray[np.float64] = exact_sum(x, grid).reshape(metric.size)
        return out

    def sum_error(self, metric: MetricPlan, cohort: int) -> float:
        """The encoding's bound on a sum of at most ``cohort`` rows, per coordinate:
        :meth:`FixedPoint.sum_error` (the grid truncates each value by < one quantum).

        Refuses a cohort beyond the grid's exact range (:attr:`FixedPoint.max_clients`)
        here, on the public cohort (never the number of rows that arrived):
        :func:`exact_sum` refuses more *rows* than that, and under ``add_remove`` the number
        of rows (reporters) is private, so that refusal would tell one reporter more from
        fewer (review priv)."""
        grid = self.grid(metric)
        if cohort > grid.max_clients:
            raise InvalidInput(
                f"a cohort of {cohort:,} is beyond the exact range of {metric.metric}'s "
                f"{self.bits}-bit grid ({grid.max_clients:,} clients): use fewer bits"
            )
        return grid.sum_error(cohort)


def aggregate_error(aggregator: object, metric: MetricPlan, cohort: int) -> float:
    """The public bound on ``aggregator``'s sum error for ``metric`` over at most ``cohort``
    clients: its ``sum_error(metric, cohort)`` if it has one, else 0 (an exact sum)."""
    bound = getattr(aggregator, "sum_error", None)
    return 0.0 if bound is None else float(bound(metric, cohort))


def _all_within(metric: MetricPlan, x: npt.NDArray[np.float64]) -> bool:
    """Whether every row of ``x`` is finite and within ``metric``'s bounds, with the fewest
    numpy passes: a comparison with NaN is False and finite bounds exclude ±inf, so no
    separate finiteness pass is needed (non-finite bounds: False, the full check decides)."""
    b = metric.bounds
    if metric.scalar:
        low, high = float(b.low or 0.0), float(b.high or 0.0)
        slack = ROUNDING_SLACK * max(abs(low), abs(high))
        lo, hi = low - slack, high + slack
        if not (math.isfinite(lo) and math.isfinite(hi)):
            return False
        column = x[:, 0]
        return bool(((column >= lo) & (column <= hi)).all())
    cap = float(b.cap or 0.0) * (1 + ROUNDING_SLACK)
    if not math.isfinite(cap):
        return False
    if metric.nonnegative and not bool((x >= 0).all()):
        return False
    return bool((np.abs(x).sum(axis=1) <= cap).all())


def sums_few_rows(aggregator: Aggregator, plans: Mapping[str, MetricPlan]) -> None:
    """Under ``add_remove``, refuse an aggregator that does not sum no rows, and one row of
    zeros, to zeros of the metric's shape: a region is released whoever reported, so a
    refusal it caused with few reporters (a secure sum's survivor threshold, a malformed
    total) would publish that few reported, which is private. ``total`` must be a pure
    function of its rows: these calls are made when the wrapper is built."""
    for m in plans.values():
        for n in (0, 1):
            try:
                out = np.asarray(aggregator.total(m, np.zeros((n, m.size))), dtype=np.float64)
                ok = out.shape == (m.size,) and not out.any()
            except Exception as e:
                ok, why = False, f"raised {type(e).__name__}"
            else:
                why = "gave something else than zeros of the metric's shape"
            if not ok:
                raise InvalidInput(
                    f"under add_remove the aggregator's total must sum any rows: on {n} row(s) "
                    f"of zeros for {m.metric} it {why}, and a region's refusal would then show "
                    "that few or none in it reported (private)"
                )

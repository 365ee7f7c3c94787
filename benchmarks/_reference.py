"""The plain-Python baseline: per-client contributions as a straightforward reference does.

One client at a time, from Python lists, with Python loops, as simple reference
functions do (``bucketise``, ``along_across_ratio``, ``calibration_gap``). It computes
the same bounded contributions as dpledger's vectorised batch form, so case 1 can check
that both agree before comparing their speed. Written for the benchmark; not used by
dpledger.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Client", "Params", "contributions", "split_clients"]


@dataclass(frozen=True, slots=True)
class Params:
    """The bounds of every contribution, read from the policy (plus the confusion cap)."""

    loss_high: float
    ratio_clip: float
    hist_edges: tuple[float, ...]
    hist_cap: float
    calib_buckets: int
    calib_cap: float
    coverage_edges: tuple[float, ...]
    n_classes: int
    confusion_cap: float


@dataclass(frozen=True, slots=True)
class Client:
    """One client's samples as Python lists (what a device-side loop would hold)."""

    loss: list[float]
    along: list[float]
    across: list[float]
    prob: list[float]
    outcome: list[float]
    cell: list[int]
    y_true: list[int]
    y_pred: list[int]


def split_clients(columns: dict[str, list[float] | list[int]], offsets: list[int]) -> list[Client]:
    """Cut flat per-sample lists into per-client :class:`Client` records (not timed)."""
    n = len(columns["loss"])
    ends = [*offsets[1:], n]
    return [
        Client(**{k: v[a:b] for k, v in columns.items()})  # type: ignore[arg-type]
        for a, b in zip(offsets, ends, strict=True)
    ]


def _bucket(value: float, edges: Sequence[float]) -> int:
    return sum(1 for e in edges if value > e)


def _l1_cap(vector: list[float], cap: float) -> list[float]:
    total = sum(abs(v) for v in vector)
    if total > cap:
        return [v * cap / total for v in vector]
    return vector


def clipped_loss(loss: Sequence[float], high: float) -> float:
    """Mean loss clipped to [0, high]; 0.0 for a client without samples."""
    if not loss:
        return 0.0
    return min(high, max(0.0, sum(loss) / len(loss)))


def along_across_ratio(along: Sequence[float], across: Sequence[float], clip: float) -> float:
    """Across-RMSE / along-RMSE clipped to [0, clip]; pinned at clip for a tiny along RMSE."""
    if not along:
        return 1.0
    a = math.sqrt(sum(x * x for x in along) / len(along))
    b = math.sqrt(sum(x * x for x in across) / len(across))
    if a <= 1e-9:
        return clip
    return min(clip, b / a)


def error_histogram(
    along: Sequence[float], across: Sequence[float], edges: Sequence[float], cap: float
) -> list[float]:
    """Counts of hypot(along, across) over fixed edges, L1-capped at ``cap``."""
    counts = [0.0] * (len(edges) + 1)
    for a, b in zip(along, across, strict=True):
        counts[_bucket(math.hypot(a, b), edges)] += 1.0
    return _l1_cap(counts, cap)


def calibration_gap(
    prob: Sequence[float], outcome: Sequence[float], buckets: int, cap: float
) -> list[float]:
    """[Σ(p−y) per confidence bucket, count per bucket], L1-capped at ``cap``."""
    sums = [0.0] * buckets
    counts = [0.0] * buckets
    for p, y in zip(prob, outcome, strict=True):
        i = min(buckets - 1, int(p * buckets))
        sums[i] += min(1.0, max(-1.0, p - y))
        counts[i] += 1.0
    return _l1_cap(sums + counts, cap)


def coverage(cells: Sequence[int], edges: Sequence[float]) -> list[float]:
    """One-hot of the number of distinct cells, bucketed over fixed edges."""
    out = [0.0] * (len(edges) + 1)
    out[_bucket(len(set(cells)), edges)] = 1.0
    return out


def confusion(y_true: Sequence[int], y_pred: Sequence[int], c: int, cap: float) -> list[float]:
    """Row-major C×C confusion counts, scaled by min(1, cap/n)."""
    counts = [0.0] * (c * c)
    for t, p in zip(y_true, y_pred, strict=True):
        counts[t * c + p] += 1.0
    return _l1_cap(counts, cap)


def contributions(clients: Sequence[Client], prm: Params) -> dict[str, list[object]]:
    """Every contribution of every client, one client at a time."""
    out: dict[str, list[object]] = {
        k: [] for k in ("loss", "ratio", "histogram", "calibration", "coverage", "confusion")
    }
    for c in clients:
        out["loss"].append(clipped_loss(c.loss, prm.loss_high))
        out["ratio"].append(along_across_ratio(c.along, c.across, prm.ratio_clip))
        out["histogram"].append(error_histogram(c.along, c.across, prm.hist_edges, prm.hist_cap))
        out["calibration"].append(
            calibration_gap(c.prob, c.outcome, prm.calib_buckets, prm.calib_cap)
        )
        out["coverage"].append(coverage(c.cell, prm.coverage_edges))
        out["confusion"].append(confusion(c.y_true, c.y_pred, prm.n_classes, prm.confusion_cap))
    return out

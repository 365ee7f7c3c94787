"""What one evaluate round did: the operator's full report, and the public MetricRecord.

:class:`RoundReport` keeps everything (each node's status and why, every
:class:`~dpledger.ledger.Release` and :class:`~dpledger.approval.Verdict`, the derived
metrics); :func:`published` is the part that may leave the ServerApp — noisy values, their
95% half-widths, refusal flags and the health counters the neighbouring relation makes
public — which is all the wrapper returns to Flower. :func:`tally_health` counts each
region's node statuses into its :class:`Health`; :func:`short_reason` bounds the reason a
node's status keeps.

Keys of the published record (Flower's ``Result.evaluate_metrics_clientapp[round]``):

- ``epoch``, ``released``, ``refused``: the round's epoch, how many of its releases went
  through, and how many gave no value (refused by the ledger, or not sent because nobody
  reported) — the health release counted in both like any metric;
- ``REGION/METRIC``: the noisy value (a mean for a ``scalar_mean``, the noisy sums for a
  vector), ``REGION/METRIC/ci95`` its 95% half-width (per coordinate), and
  ``REGION/METRIC/refused`` 1 when no value was released (0 otherwise). A mean is always
  the mean over the clients who *reported*. Under ``replace`` it is exact division: the
  noisy sum over the reporters, whose number is public;
- under ``add_remove`` (how many reported is private; the release is charged on the
  planned cohort) a ``scalar_mean`` publishes instead:

  - ``REGION/METRIC``: the mean over the reporters, ``noisy sum / noisy reported``, with
    ``REGION/METRIC/ci95-low`` and ``…/ci95-high`` (Fieller's interval for a ratio of two
    independent noisy releases, conditional on the count's guard: asymmetric, so there is
    no ``…/ci95``), when the round released a noisy count of reporters (the health
    metric) and that count is clearly positive (``min(noisy reported, selected) >
    q·se``); otherwise no value, only ``REGION/METRIC/unusable`` 1 (the reason is in the
    operator's report: :attr:`RoundReport.means`). No health metric configured means this
    mean is always unusable: use ``…/per-selected``, or configure one;
  - ``REGION/METRIC/per-selected`` and ``…/per-selected/ci95``: the noisy sum over the
    reporters divided by the planned cohort ``selected`` — a *different estimand*, the
    mean over the selected nodes with every node that failed, dropped out or was rejected
    counted as 0 (equal to the reporters' mean only when all reported). Its half-width
    is the noise's only, and covers that quantity;

  both are post-processing of released values (no extra ε), and whether the mean is
  published or flagged depends only on released values and public facts;
- ``REGION/METRIC/KEY`` for every metric derived from a confusion matrix or regression
  measures (``f1_macro``, ``mcc``, ``r2``…), with ``…/ci95-low`` and ``…/ci95-high`` (its
  interval, not necessarily symmetric); a metric the noise swamps has no value, only
  ``…/unusable`` 1; an R² too near the noise to bound below has no value either, only
  ``…/ci95-high`` and ``…/upper-only`` 1 (R² ≤ that bound);
- ``REGION/health/selected`` (always: the planned cohort, fixed before the round), and
  ``REGION/health/{reported,failed,dropped,rejected}``: exact under ``replace``; under
  ``add_remove`` noisy counts released through the ledger (with ``REGION/health/ci95``, the
  half-width of each of the three released counts; ``dropped``, the planned cohort minus
  their total, carries all three counts' noise and has its own, wider
  ``REGION/health/dropped/ci95``; ``REGION/health/refused`` 1 and no counts when the
  ledger refused the health release), or absent when the operator keeps them (no health
  metric configured).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, overload

import numpy as np
import numpy.typing as npt

from dpledger._printed import outward, value_with_bar
from dpledger.approval import Verdict
from dpledger.flower.means import ReporterMean
from dpledger.ledger import Release
from dpledger.ledger.derived import DerivedRelease
from dpledger.mechanisms import bar_factor

__all__ = [
    "DROPPED_CI95_FACTOR",
    "HEALTH_FIELDS",
    "HEALTH_KEY",
    "STATUSES",
    "Health",
    "NodeStatus",
    "NodeStatuses",
    "NotReleased",
    "RoundReport",
    "dropped_ci95",
    "published",
    "short_reason",
    "tally_health",
]

Status = Literal["reported", "failed", "dropped", "rejected"]
STATUSES: tuple[Status, ...] = ("reported", "failed", "dropped", "rejected")
"""A node's possible statuses; :class:`NodeStatuses` keeps each as its index here."""
DROPPED_REASON = "no reply before the timeout"
HEALTH_KEY = "health"
"""The health counters' part of a public key (``REGION/health/...``): no metric's name."""
HEALTH_FIELDS = ("reported", "failed", "rejected")
"""The coordinates of a health release: one-hot per client that answered (dropped = the
planned cohort minus their total, post-processing)."""
Value = float | int | list[float]


@dataclass(frozen=True)
class Health:
    """One region's round-health counters: who was asked and what came back."""

    selected: int
    reported: int = 0
    failed: int = 0
    dropped: int = 0
    rejected: int = 0


@dataclass(frozen=True)
class NodeStatus:
    """One selected node's fate in a round, and why (operator-only)."""

    node_id: int
    region: str
    status: Status
    reason: str = ""


class NodeStatuses(Sequence[NodeStatus]):
    """Every selected node's :class:`NodeStatus` in one round, in selection order.

    Kept as columns — node ids, each node's region (an index into ``regions``), its
    status (an index into :data:`STATUSES`, one byte per node) and the reasons of the
    nodes that failed or were rejected — and made into :class:`NodeStatus` objects only
    when read: a round of thousands of nodes builds none, and :meth:`health` counts them
    in one numpy call. A dropped node's reason is :data:`DROPPED_REASON`.
    """

    __slots__ = ("_codes", "_ids", "_reasons", "_regions", "_where")

    def __init__(
        self,
        node_ids: Sequence[int],
        regions: Sequence[str],
        where: npt.NDArray[np.intp],
        codes: bytes,
        reasons: Mapping[int, str],
    ) -> None:
        if not len(node_ids) == len(where) == len(codes):
            raise ValueError("NodeStatuses: node ids, regions and statuses differ in length")
        if len(codes) and max(codes) >= len(STATUSES):
            raise ValueError("NodeStatuses: a status code outside STATUSES")
        if len(where) and not (int(np.min(where)) >= 0 and int(np.max(where)) < len(regions)):
            raise ValueError("NodeStatuses: a region index outside regions")
        self._ids = tuple(node_ids)
        self._regions = tuple(regions)
        self._where = np.array(where, dtype=np.intp)  # a copy: the report is immutable
        self._codes = bytes(codes)
        self._reasons = dict(reasons)

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, i: int) -> NodeStatus: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[NodeStatus, ...]: ...

    def __getitem__(self, i: int | slice) -> NodeStatus | tuple[NodeStatus, ...]:
        if isinstance(i, slice):
            return tuple(self._at(k) for k in range(*i.indices(len(self))))
        k = range(len(self))[i]  # negative indices, and IndexError out of range
        return self._at(k)

    def __iter__(self) -> Iterator[NodeStatus]:
        return (self._at(k) for k in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: object) -> tuple[NodeStatus, ...]:
        """Concatenation gives a tuple, as the tuple this replaced did."""
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return (*self, *other)

    def __radd__(self, other: object) -> tuple[NodeStatus, ...]:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return (*other, *self)

    def __repr__(self) -> str:
        counts = {s: self._codes.count(k) for k, s in enumerate(STATUSES)}
        shown = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        return f"NodeStatuses({len(self)} nodes: {shown or 'none'})"

    def _at(self, k: int) -> NodeStatus:
        status = STATUSES[self._codes[k]]
        reason = self._reasons.get(k, DROPPED_REASON if status == "dropped" else "")
        return NodeStatus(self._ids[k], self._regions[int(self._where[k])], status, reason)

    def health(self) -> dict[str, Health]:
        """Each region's :class:`Health` (regions in the order given)."""
        n = len(STATUSES)
        codes = np.frombuffer(self._codes, dtype=np.uint8).astype(np.intp)
        counts: list[list[int]] = (
            np.bincount(self._where * n + codes, minlength=n * len(self._regions))
            .reshape(len(self._regions), n)
            .tolist()
        )
        return {
            region: Health(sum(c), **dict(zip(STATUSES, c, strict=True)))
            for region, c in zip(self._regions, counts, strict=True)
        }


@dataclass(frozen=True)
class NotReleased:
    """A (region, metric) the round did not send to the ledger, and why."""

    region: str
    metric: str
    reason: str


Outcome = Release | Verdict | NotReleased


@dataclass(frozen=True)
class RoundReport:
    """Everything one evaluate round did (the wrapper keeps one per round)."""

    server_round: int
    epoch: int
    neighbouring: str
    health: Mapping[str, Health]
    nodes: Sequence[NodeStatus]
    """Every selected node's status (a :class:`NodeStatuses` from the wrapper)."""
    outcomes: Mapping[tuple[str, str], Outcome]
    derived: Mapping[tuple[str, str], DerivedRelease] = field(default_factory=dict)
    derive_errors: Mapping[tuple[str, str], str] = field(default_factory=dict)
    health_releases: Mapping[str, Release | Verdict | NotReleased] = field(default_factory=dict)
    means: Mapping[tuple[str, str], ReporterMean] = field(default_factory=dict)
    """Under ``add_remove``: each released ``scalar_mean``'s mean over the reporters (or
    why it is unusable); empty under ``replace``, where a release's value is that mean."""
    unregistered: tuple[int, ...] = ()
    unexpected_replies: int = 0

    def __repr__(self) -> str:
        """What the round did, in one line; under ``add_remove`` without the exact counts
        (an ``on_round=print`` or a log line must not show who reported: :meth:`table`)."""
        health: dict[str, object] = {
            r: dataclasses.astuple(h) if self.neighbouring == "replace" else h.selected
            for r, h in sorted(self.health.items())
        }
        return (
            f"RoundReport(round={self.server_round}, epoch={self.epoch}, "
            f"neighbouring={self.neighbouring!r}, released={len(self.releases)}, "
            f"not_released={self.not_released}, "
            + ("health (selected, reported, failed, dropped, rejected)="
               if self.neighbouring == "replace" else "selected=")
            + f"{health})"
        )  # fmt: skip

    @property
    def releases(self) -> tuple[Release, ...]:
        """Every committed release of the round (metrics, then health)."""
        found = [*self.outcomes.values(), *self.health_releases.values()]
        return tuple(o for o in found if isinstance(o, Release))

    @property
    def not_released(self) -> int:
        """How many of the round's (region, metric) releases, health included, gave no value:
        refused by the ledger or never sent (e.g. no client reported)."""
        found = [*self.outcomes.values(), *self.health_releases.values()]
        return sum(not isinstance(o, Release) for o in found)

    @property
    def refusals(self) -> tuple[Verdict, ...]:
        """The ledger's refusals in the round, each with its named checks."""
        found = [*self.outcomes.values(), *self.health_releases.values()]
        return tuple(o for o in found if isinstance(o, Verdict))

    def table(self, derived: Sequence[str] | None = None, *, operator: bool = False) -> str:
        """A human summary: per region the health, each value with its bar, each refusal.

        ``derived`` limits the metrics shown of each confusion or regression release
        (default: all, with their intervals; each release's count of unusable metrics
        below its rows, the caveats of how they were made once at the end). Under
        ``add_remove`` who reported is private: the exact counts (reported, failed,
        dropped, rejected) are shown only with ``operator=True`` — for a screen only the
        operator reads, not a log or the stdout ``flwr run`` streams to whoever submitted
        the run; the noisy health release, when the policy has one, is shown either way.
        """
        if isinstance(derived, str):  # one metric's name, not its letters ("rmse" ∌ "mse")
            derived = (derived,)
        lines = [f"round {self.server_round} (epoch {self.epoch}, {self.neighbouring})"]
        notes: dict[str, None] = {}  # the derived releases' caveats, each once, at the end
        exact = operator or self.neighbouring == "replace"
        for region, h in sorted(self.health.items()):
            lines.append(
                f"  {region}: selected {h.selected}, reported {h.reported}, failed {h.failed}, "
                f"dropped {h.dropped}, rejected {h.rejected}"
                if exact
                else f"  {region}: selected {h.selected} (who reported is private under "
                "add_remove: table(operator=True) shows the exact counts)"
            )
            for (r, metric), out in sorted(self.outcomes.items()):
                if r == region:
                    mean = self.means.get((r, metric))
                    if mean is None:
                        lines.append(f"    {metric:<22} {_describe(out)}")
                    else:  # add_remove: the mean over reporters, then the planned-cohort one
                        lines.append(f"    {metric:<22} {mean.describe()}")
                        lines.append(f"      {'per selected node':<20} {_describe(out)}")
                    d = self.derived.get((r, metric))
                    if d is not None:
                        rows = d.rows()
                        keep = [x for x in rows if derived is None or x.split()[0] in derived]
                        caveats = d.caveats(derived)  # once, at the end; the rest here
                        tail = [x for x in d.notes(derived) if x not in caveats]
                        lines += [f"      {x.strip()}" for x in [*keep, *tail]]
                        notes.update(dict.fromkeys(x.strip() for x in caveats))
            hr = self.health_releases.get(region)
            if hr is not None:
                lines.append(f"    {'health (noisy counts)':<22} {_describe(hr)}")
        if self.unregistered:
            lines.append(f"  {len(self.unregistered)} selected node(s) with no known region")
        if notes:  # the derived rows' caveats, as DerivedRelease.table prints them
            lines += ["  notes on the derived metrics:", *(f"    {n}" for n in notes)]
        return "\n".join(lines)


def _describe(out: Outcome) -> str:
    if isinstance(out, Release):
        v, bar = out.value, ci95(out)  # the value to a unit its bar can see, the bar up
        if isinstance(v, float):
            shown = value_with_bar(v, bar)[0]
        elif v.size <= 8:
            shown = "[" + ", ".join(value_with_bar(float(x), bar)[0] for x in v) + "]"
        else:
            shown = f"[{v.size} noisy sums]"
        return f"{shown} ± {outward(bar, '.3g', True)} ({out.charge.unit} {out.charge.text})"
    if isinstance(out, Verdict):
        first = out.failures[0] if out.failures else None
        return "REFUSED: " + (f"{first.name}: {first.reason}" if first else out.summary())
    return f"not released: {out.reason}"


def ci95(release: Release) -> float:
    """The 95% half-width of each released coordinate (of the mean, for a scalar)."""
    return release.half_width(bar_factor("ci95", release.facts.mechanism))


def _value(release: Release) -> Value:
    v = release.value
    return float(v) if isinstance(v, float) else [float(x) for x in v]


def published(report: RoundReport, *, health_public: bool) -> dict[str, Value]:
    """The round's public MetricRecord content (see the module docstring for its keys).

    ``health_public``: the exact counters may be published (``replace``). Otherwise only
    the planned cohort is, beside the noisy health release if there is one, and a
    ``scalar_mean`` publishes its mean over reporters from :attr:`RoundReport.means`.
    """
    out: dict[str, Value] = {
        "epoch": report.epoch,
        "released": len(report.releases),
        "refused": report.not_released,
    }
    for (region, metric), o in sorted(report.outcomes.items()):
        key = f"{region}/{metric}"
        out[f"{key}/refused"] = 0 if isinstance(o, Release) else 1
        if not isinstance(o, Release):
            continue
        if o.kind == "scalar_mean" and not health_public:
            out[f"{key}/per-selected"] = _value(o)
            out[f"{key}/per-selected/ci95"] = ci95(o)
            mean = report.means.get((region, metric))
            if mean is None or not mean.usable:
                out[f"{key}/unusable"] = 1
            else:
                out[key] = mean.estimate
                out[f"{key}/ci95-low"] = mean.interval.low
                out[f"{key}/ci95-high"] = mean.interval.high
            continue
        out[key] = _value(o)
        out[f"{key}/ci95"] = ci95(o)
        d = report.derived.get((region, metric))
        if d is None:
            continue
        for name, value in d.metrics.items():
            iv = d.intervals[name]
            if not (iv.usable and math.isfinite(value)):
                out[f"{key}/{name}/unusable"] = 1
            elif iv.one_sided:  # R² ≤ high: the bound, not the point value
                out[f"{key}/{name}/ci95-high"] = float(iv.high)
                out[f"{key}/{name}/upper-only"] = 1
            else:
                out[f"{key}/{name}"] = float(value)
                out[f"{key}/{name}/ci95-low"] = float(iv.low)
                out[f"{key}/{name}/ci95-high"] = float(iv.high)
    for region, h in sorted(report.health.items()):
        out[f"{region}/{HEALTH_KEY}/selected"] = h.selected
        if health_public:
            for name in ("reported", "failed", "dropped", "rejected"):
                out[f"{region}/{HEALTH_KEY}/{name}"] = getattr(h, name)
            continue
        hr = report.health_releases.get(region)
        if isinstance(hr, Release):
            counts = [float(x) for x in hr.noisy_sum]
            for name, x in zip(HEALTH_FIELDS, counts, strict=True):
                out[f"{region}/{HEALTH_KEY}/{name}"] = x
            out[f"{region}/{HEALTH_KEY}/dropped"] = float(h.selected - sum(counts))
            out[f"{region}/{HEALTH_KEY}/ci95"] = ci95(hr)
            out[f"{region}/{HEALTH_KEY}/dropped/ci95"] = dropped_ci95(hr)
        elif hr is not None:
            out[f"{region}/{HEALTH_KEY}/refused"] = 1
    return out


DROPPED_CI95_FACTOR: Mapping[str, float] = {
    "laplace": 4.968596000181702,  # P(|L₁+L₂+L₃| > t·b) = e^(−t)(t² + 5t + 8)/8 = 0.05
    "gaussian": 1.959963984540054 * math.sqrt(3.0),  # σ√3
}
"""Noise scales in the 95% half-width of a sum of three independent coordinates' noise."""


def dropped_ci95(health: Release) -> float:
    """95% half-width of ``selected − Σ`` the three noisy counts of a health release
    (counts): three independent noises, and three coordinates' slack."""
    factor = DROPPED_CI95_FACTOR[health.facts.mechanism]
    return factor * health.scale + len(HEALTH_FIELDS) * health.sum_slack


def short_reason(reason: str, limit: int = 500) -> str:
    """A node's reason in at most ``limit`` characters: its start and its end (Ray wraps
    whole tracebacks in a reason, with the exception's own message last)."""
    if len(reason) <= limit:
        return reason
    head = limit // 3
    return reason[:head] + " … " + reason[-(limit - head - 3) :]


def tally_health(selected: Mapping[int, str], nodes: list[NodeStatus]) -> dict[str, Health]:
    """Each region's :class:`Health`: the nodes selected in it, and each one's status."""
    counts: dict[str, dict[str, int]] = {}
    for region in selected.values():
        c = counts.setdefault(region, dict.fromkeys(("selected", "reported", "failed",
                                                       "dropped", "rejected"), 0))  # fmt: skip
        c["selected"] += 1
    for s in nodes:
        counts[s.region][s.status] += 1
    return {region: Health(**c) for region, c in counts.items()}

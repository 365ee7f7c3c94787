"""A scalar metric's mean over the clients who reported, under ``add_remove``.

Under ``add_remove`` how many clients reported is private, so a ``scalar_mean`` release is
charged and noised on the planned cohort (the nodes selected before the round): its
``value`` is the noisy sum over the reporters divided by the number *selected*, which
counts every node that failed, dropped out or was rejected as 0. That is not the mean a
Flower user reads ``REGION/METRIC`` as. When the round also released a noisy count of the
reporters (the health metric's ``reported`` coordinate, through the ledger), the mean
over the reporters is estimated as the ratio ``noisy sum / noisy reported`` with
Fieller's interval for two independent noisy quantities
(:func:`dpledger.metrics.mean_over_noisy_count`), flagged UNUSABLE when the count is not
clearly positive — ``min(noisy reported, selected) > q·se``. Without a released count
(no health metric, or its release refused) it is always unusable: there is nothing to
divide by that does not leak how many reported.

Every input is a released value, a public noise scale or a public bound (the metric's
clip range, the planned cohort): post-processing that costs no ε, and whether the mean
is published or flagged never depends on the true number of reporters. Each release's
slack (OpenDP's grid, rounding, the aggregate's encoding: ``sum_slack``) widens the
interval when it is not negligible against the noise (:mod:`dpledger.metrics._slack`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from dpledger._printed import outward
from dpledger.errors import DpLedgerError
from dpledger.flower.wire import MetricPlan
from dpledger.ledger import Release
from dpledger.metrics import Interval, mean_over_noisy_count
from dpledger.metrics._ratio import MEAN
from dpledger.metrics._slack import interval_scales, widened

__all__ = ["NO_COUNT", "ReporterMean", "reporter_means"]

NO_COUNT = (
    "no noisy count of the clients who reported was released this round (no health "
    "metric configured, or its release refused): under add_remove their number is "
    "private, so the mean over them cannot be estimated; REGION/METRIC/per-selected is "
    "the noisy sum divided by the planned cohort (a non-reporter counted as 0)"
)
"""The reason a mean over reporters is unusable when no count of them was released."""


@dataclass(frozen=True)
class ReporterMean:
    """One region's ``scalar_mean`` metric averaged over its reporters (metric units).

    ``estimate`` is ``noisy sum / noisy reported`` clipped to the metric's clip range
    (NaN when no count was released); ``interval`` its 95% interval, or, when
    ``interval.reason`` is set, the whole clip range and why the mean is unusable (then
    publish no value). ``noisy_reported`` is the released count divided by (None when
    none was).
    """

    estimate: float
    interval: Interval
    noisy_reported: float | None

    @property
    def usable(self) -> bool:
        """Whether the mean may be published (its interval is not flagged)."""
        return self.interval.usable

    def describe(self) -> str:
        """One line for the operator's report."""
        iv = self.interval
        if not iv.usable:
            return f"mean over reporters UNUSABLE: {iv.reason}"
        return (
            f"{self.estimate:.4g} [{outward(iv.low, '.4g', False)}, "  # ends outward: the
            f"{outward(iv.high, '.4g', True)}] mean over reporters "  # text holds the interval
            f"(÷ noisy reported {self.noisy_reported:.4g})"
        )


def _scalar(release: Release, index: int = 0) -> float:
    return float(np.asarray(release.noisy_sum, dtype=np.float64).reshape(-1)[index])


def reporter_means(
    outcomes: Mapping[tuple[str, str], object],
    health_releases: Mapping[str, object],
    plans: Mapping[str, MetricPlan],
    reported_index: int = 0,
) -> dict[tuple[str, str], ReporterMean]:
    """The mean over reporters of every released ``scalar_mean`` (region, metric).

    ``outcomes`` and ``health_releases`` are the round's ledger outcomes; a region's
    health release (if it is a :class:`Release`) gives the noisy count of reporters at
    coordinate ``reported_index``. Reads only released values, their public scales and
    mechanisms, each metric's clip range and each release's cohort (the planned cohort).
    """
    out: dict[tuple[str, str], ReporterMean] = {}
    for (region, metric), o in outcomes.items():
        plan = plans.get(metric)
        if not (isinstance(o, Release) and o.kind == "scalar_mean" and plan is not None):
            continue
        low, high = plan.bounds.need("low", metric), plan.bounds.need("high", metric)
        hr = health_releases.get(region)
        if not isinstance(hr, Release):
            iv = Interval(float(low), float(high), 0.95, "none", NO_COUNT)
            out[(region, metric)] = ReporterMean(math.nan, iv, None)
            continue
        count = _scalar(hr, reported_index)
        try:
            with np.errstate(all="ignore"):  # an extreme release overflows: flagged inside
                estimate, iv = _mean(o, hr, count, (float(low), float(high)))
        except DpLedgerError as e:  # after the spend: a failure is a flag, never an error
            why = f"post-processing failed ({type(e).__name__}: {e})"
            estimate, iv = math.nan, Interval(float(low), float(high), 0.95, "none", why)
        out[(region, metric)] = ReporterMean(estimate, iv, count)
    return out


def _mean(
    o: Release, hr: Release, count: float, bounds: tuple[float, float]
) -> tuple[float, Interval]:
    """The mean over reporters and its interval, the two releases' slack accounted for."""
    cohort = float(o.request.cohort)
    laws = o.facts.mechanism, hr.facts.mechanism
    (sum_scale, count_scale), did = interval_scales(
        [o.scale, hr.scale], [o.sum_slack, hr.sum_slack]
    )  # the two releases' slack: see dpledger.metrics._slack
    estimate, iv = mean_over_noisy_count(
        _scalar(o), sum_scale, count, count_scale, bounds=bounds, max_count=cohort,
        sum_distribution=laws[0], count_distribution=laws[1],
    )  # fmt: skip
    _, intervals = widened(({MEAN: estimate}, {MEAN: iv}), did)
    return estimate, intervals[MEAN]

"""Rendering of the demo: an aligned text report, JSON for machines, the CLI (charts: demo_plots).

Everything shown is a released (noisy) value, a post-processed figure, or a ledger
fact: nothing here reads the fleet's raw data.
"""

from __future__ import annotations

import math
from typing import Any

from dpledger._printed import outward, value_with_bar
from dpledger.ledger import Release
from dpledger.sim.demo import DemoResult, policy_reference, share_interval

__all__ = ["as_json", "text_report"]

_KIND_TITLE = {
    "lateral_drift": "lateral drift",
    "crs_mismatch": "CRS-mismatch signature",
    "overconfident": "over-confidence",
    "refused": "refused",
    "empty": "empty",
}


def _why(rel: Release, num: int, den: slice | int, bounds: tuple[float, float], what: str) -> str:
    """Why a derived share is unusable: its interval's own reason (a total far clear of its
    guard is also flagged when the interval lies wholly outside the range: review 40)."""
    return share_interval(rel, num, den, bounds, what).reason or "flagged"


def _value_cell(rel: Release, derived: dict[str, float]) -> str:
    if rel.kind == "scalar_mean":  # values to a unit their bar sees, bars and ends outward
        value, bar = value_with_bar(float(rel.value), rel.error_bar)  # (review 42 diff2: .2f
        return f"{value} ± {bar}"  # shares ± a 0.0045 bar covered 0.52 of the truths printed)
    if rel.request.metric == "error_histogram":
        if not derived["tail_usable"]:
            return f"> 25 m: unusable ({_why(rel, -1, slice(None), (0.0, 1.0), 'total count')})"
        return (
            f"> 25 m: {derived['tail_share']:.2%} "
            f"[{outward(100 * derived['tail_low'], '.2f', False)}%, "
            f"{outward(100 * derived['tail_high'], '.2f', True)}%]"
        )
    if rel.request.metric == "calibration_gap":
        if not derived["top_usable"]:
            k = rel.noisy_sum.shape[0] // 2
            why = _why(rel, k - 1, -1, (-1.0, 1.0), "top bucket's count")
            return f"top-bucket gap: unusable ({why})"
        lo, hi = derived["top_low"], derived["top_high"]
        return (
            f"top-bucket gap {derived['top_gap']:+.3f} "
            f"[{outward(lo, '+.3f', False)}, {outward(hi, '+.3f', True)}]"
        )
    half = rel.error_bar / rel.request.cohort
    shares = ", ".join(value_with_bar(float(x), half, least=2)[0] for x in rel.per_client)
    return f"[{shares}] ± {value_with_bar(0.0, half)[1]}"


def text_report(result: DemoResult) -> str:
    """The demo report a reviewer reads: releases, refusals, budget, findings."""
    p = result.policy
    lines = [
        f"dpledger demo — policy {p.name} v{p.version} ({p.neighbouring}, {p.definition} DP), "
        f"ε_eval = {p.eval_budget} per client per epoch",
        f"fleet: {result.n_clients:,} clients, {result.n_samples:,} samples; exact per-region "
        "fixed-point sums stand in for secure aggregation",
        f"ledger: {result.ledger_path}",
        "",
        "published values (epoch 0, ± is the 95% half-width from the public noise scale):",
    ]
    width = max(len(m) for m in p.metrics)
    by_region: dict[str, list[Release]] = {}
    for rel in result.releases:
        by_region.setdefault(rel.request.region, []).append(rel)
    for region, n in result.cohorts.items():
        lines.append(f"  {region} (n={n:,})")
        for rel in by_region.get(region, []):
            d = result.derived.get((region, rel.request.metric), {})
            lines.append(
                f"    {rel.request.metric:<{width}}  {_value_cell(rel, d)}"
                f"   [entry {rel.entry_id}, {rel.charge}]"
            )
        refused = [v for v in result.refusals if v.request.region == region]
        if refused:
            lines.append(f"    REFUSED ({len(refused)} releases): {refused[0].failures[0].reason}")
    lines += ["", "budget per region (exact ε of the epoch's allocation):"]
    for region, (spent, left) in result.budget.items():
        lines.append(f"  {region:<10} spent {spent:>6}   left {left}")
    ref = policy_reference(p)
    lines += [
        "",
        "findings, each by a rule fixed before the release (printed with it). The drift rule's",
        f"healthy reference {ref:.2f} is the same statistic as the released ratio: the mean",
        "per-client clipped ratio of the baseline model, by the same metric function, on a",
        "reference fleet (not the RMSE ratio 1.00/0.90 = 1.11).",
    ]
    for f in result.findings:
        if f.kind != "refused":
            lines.append(f"  [{_KIND_TITLE[f.kind]}] {f.region}: {f.message}")
    refused_regions = sorted({f.region for f in result.findings if f.kind == "refused"})
    published = {r.request.region for r in result.releases}
    for region in refused_regions:
        n = result.cohorts[region]
        lines.append(
            f"  [refused] {region}: cohort of {n} clients is below some metrics' floors; "
            "those were not published and cost nothing"
            if region in published
            else f"  [refused] {region}: cohort of {n} clients is below every metric's floor; "
            "nothing was published or spent there"
        )
    lines.append(f"\ndone in {result.seconds:.1f} s")
    return "\n".join(lines)


def finite(x: float) -> float | None:
    """``x`` or None when it is not finite (for JSON)."""
    return x if math.isfinite(x) else None


def as_json(result: DemoResult) -> dict[str, Any]:
    """The machine-readable report; release outputs match the ledger's entries exactly."""

    def clean(d: dict[str, float]) -> dict[str, float | None]:
        return {k: finite(v) for k, v in d.items()}

    return {
        "policy": {
            "name": result.policy.name,
            "version": result.policy.version,
            "hash": result.policy.content_hash,
        },
        "ledger": result.ledger_path,
        "n_clients": result.n_clients,
        "cohorts": result.cohorts,
        "releases": [
            {
                **r.as_dict(),
                "noisy_sum": r.noisy_sum.tolist(),
                "derived": clean(result.derived.get((r.request.region, r.request.metric), {})),
            }
            for r in result.releases
        ],
        "refusals": [v.as_dict() for v in result.refusals],
        "budget": {
            r: {"spent": s, "remaining": left, "unit": result.policy.unit}
            for r, (s, left) in result.budget.items()
        },
        "findings": [f.__dict__ for f in result.findings],
    }

"""Case 4: the whole job on the large fleet: contributions, per-region sums, one epoch.

This is the demo's flow (``dpledger.sim.demo``: ``_contributions``, exact ``_region_sums``, then
one ``Ledger.release`` per metric and region of the shipped policy) run on the benchmark
fleet, against a fresh SQLite ledger per repeat. Targets are absolute (wall time, and
peak RSS relative to the fleet's arrays); the same-process yardstick for the time is
one read pass over every fleet array (``ndarray.sum``), the least any job that looks at
all the data can do, so the ratio says how many such passes the job costs.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from benchmarks._fleet import fleet_nbytes
from benchmarks._harness import (
    Row,
    Sizes,
    fmt_bytes,
    fmt_seconds,
    log,
    median_time,
    peak_rss,
    reset_peak_rss,
)
from dpledger.ledger import Ledger
from dpledger.policy import Policy
from dpledger.sim import demo
from dpledger.sim.fleet import Fleet

__all__ = ["one_epoch", "run"]

_PHASES = ("contributions", "region sums", "releases")


def one_epoch(fleet: Fleet, policy: Policy, path: Path) -> dict[str, float]:
    """Run the job once; return the seconds of each phase and the release counts."""
    t0 = time.perf_counter()
    rows = demo._contributions(fleet, policy)
    t1 = time.perf_counter()
    sums = {
        name: demo._region_sums(fleet, r, demo.contribution_grid(policy.metrics[name]))
        for name, r in rows.items()
    }
    cohorts = {r: len(fleet.client_range(r)) for r in fleet.regions}
    t2 = time.perf_counter()
    with Ledger.open(path, policy, mode="create") as ledger:
        releases, refusals = demo.release_epoch(ledger, sums, cohorts)
    released, refused = len(releases), len(refusals)
    t3 = time.perf_counter()
    return {
        "contributions": t1 - t0,
        "region sums": t2 - t1,
        "releases": t3 - t2,
        "released": released,
        "refused": refused,
    }


def _read_pass(fleet: Fleet) -> None:
    for v in vars(fleet).values():
        if hasattr(v, "sum") and hasattr(v, "nbytes"):
            v.sum()


def run(fleet: Fleet, policy: Policy, sizes: Sizes) -> list[Row]:
    """Time the job (median of repeats) and its peak RSS; time the read pass."""
    log(f"case 4: end to end over {fleet.n_clients:,} clients, {sizes.repeats} repeats")
    t_read, _ = median_time(lambda: _read_pass(fleet), sizes.repeats)
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="dpledger-bench-") as d:
        reset_ok = reset_peak_rss()
        t_job, _ = median_time(
            lambda: runs.append(one_epoch(fleet, policy, Path(d) / f"e2e{len(runs)}.db")),
            sizes.repeats,
        )
        peak = peak_rss()
    size = fleet_nbytes(fleet)
    phases = {p: statistics.median(r[p] for r in runs) for p in _PHASES}
    shown = ", ".join(f"{p} {fmt_seconds(s)}" for p, s in phases.items())
    last = runs[-1]
    label = f"{fleet.n_clients:,} clients, {len(policy.metrics)} metrics x {len(fleet.regions)}"
    return [
        Row(
            case=4,
            measured=f"end to end: {label} regions, one epoch of releases",
            dpledger=fmt_seconds(t_job),
            baseline=f"{fmt_seconds(t_read)} (one read pass)",
            ratio_text=f"{t_job / t_read:.0f}x a read pass",
            target="<= 15 s",
            met="yes" if t_job <= 15 else "NO",
            ratio=t_job / t_read,
            limit=f"{fmt_seconds(t_read)} (numpy sum)",
            limit_ratio=t_read / t_job,
            values={"seconds": t_job, "read_pass_seconds": t_read, **phases, **last},
            note=f"median phases: {shown}; {int(last['released'])} released, "
            f"{int(last['refused'])} refused",
        ),
        Row(
            case=4,
            measured="end to end: peak RSS (vs the fleet arrays it reads)",
            dpledger=fmt_bytes(peak),
            baseline=f"{fmt_bytes(size)} fleet arrays",
            ratio_text=f"{peak / size:.2f}x fleet",
            target="<= 3x",
            met="yes" if peak <= 3 * size else "NO",
            ratio=peak / size,
            values={"peak_rss_bytes": peak, "fleet_bytes": size, "peak_reset": reset_ok},
            note="" if reset_ok else "peak RSS could not be reset: lifetime peak shown",
        ),
    ]

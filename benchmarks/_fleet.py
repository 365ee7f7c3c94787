"""The shared synthetic fleet of cases 1, 2 and 4: generated once, timed, measured.

Fleet generation is not part of any timed case; it is timed here and shown as its own
row (with an info status), so a reader can see what the set-up costs.
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks._harness import Row, fmt_bytes, fmt_seconds, log, peak_rss, reset_peak_rss
from dpledger.policy import Policy
from dpledger.sim.fleet import Fleet, make_fleet

__all__ = ["fleet_nbytes", "generate"]


def fleet_nbytes(fleet: Fleet) -> int:
    """Bytes held by the fleet's arrays (per-sample fields and per-client index)."""
    return sum(int(v.nbytes) for v in vars(fleet).values() if isinstance(v, np.ndarray))


def generate(n_clients: int, policy: Policy) -> tuple[Fleet, Row]:
    """The benchmark fleet (40 samples per client on average, seed 0) and its info row."""
    log(f"generating a fleet of {n_clients:,} clients")
    reset_peak_rss()
    t0 = time.perf_counter()
    fleet = make_fleet(n_clients=n_clients, seed=0, regions=policy.regions.names)
    seconds = time.perf_counter() - t0
    size, peak = fleet_nbytes(fleet), peak_rss()
    row = Row(
        case=0,
        measured=f"fleet generation (not timed in any case): {fleet.n_samples:,} samples",
        dpledger=fmt_seconds(seconds),
        baseline=f"{fmt_bytes(size)} arrays",
        ratio_text=f"peak {fmt_bytes(peak)}",
        target="-",
        met="info",
        values={"seconds": seconds, "fleet_bytes": size, "peak_rss_bytes": peak},
    )
    return fleet, row

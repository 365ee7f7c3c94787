"""The runner: ``python -m benchmarks [--quick] [--json [PATH]] [--cases 1,2,...]``.

Cases 1, 2 and 4 share one fleet (generated once, outside every timed section, shown
as row 0) and run first; the fleet is then freed before the ledger cases 3, 5 and 7
(7: releases through the HTTP service). A
case that crashes becomes an ``error`` row instead of hiding the others' figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks._harness import FULL, QUICK, Row, Sizes, log, render_table

CASES = (1, 2, 3, 4, 5, 7)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke test, ~20 s)")
    ap.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="PATH",
        help="write the results as JSON to PATH (the table is still printed), "
        "or to stdout instead of the table when PATH is omitted",
    )
    ap.add_argument("--cases", default="1,2,3,4,5,7", help="comma-separated case numbers")
    args = ap.parse_args(argv)
    try:
        args.case_set = {int(c) for c in args.cases.split(",") if c.strip()}
    except ValueError:
        ap.error(f"--cases takes numbers from {CASES}, got {args.cases!r}")
    if not args.case_set <= set(CASES):
        ap.error(f"--cases takes numbers from {CASES}, got {args.cases!r}")
    return args


def _guard(case: int, what: str, fn: Callable[[], list[Row]]) -> list[Row]:
    """Run one case; a crash becomes an ``error`` row carrying the exception."""
    t0 = time.perf_counter()
    try:
        return fn()
    except Exception as e:
        traceback.print_exc(file=sys.stderr)
        return [Row(case, what, "error", "-", "-", "-", "error", note=f"{type(e).__name__}: {e}")]
    finally:
        log(f"case {case} ({what}) took {time.perf_counter() - t0:.1f} s")


def _fleet_cases(sizes: Sizes, cases: set[int]) -> list[Row]:
    """Cases 1, 2 and 4 on one shared fleet (freed when this returns)."""
    from benchmarks import _fleet, contributions, end_to_end, flam_metrics
    from dpledger.policy import Policy
    from dpledger.sim.demo import DEFAULT_POLICY

    policy = Policy.load(DEFAULT_POLICY)
    fleet, gen_row = _fleet.generate(sizes.n_clients, policy)
    rows = [gen_row]
    if 1 in cases:
        rows += _guard(1, "contributions", lambda: contributions.run(fleet, policy, sizes))
        gc.collect()
    if 2 in cases:
        rows += _guard(2, "FLAM metrics", lambda: flam_metrics.run(fleet, sizes))
        gc.collect()
    if 4 in cases:
        rows += _guard(4, "end to end", lambda: end_to_end.run(fleet, policy, sizes))
    return rows


def run(sizes: Sizes, cases: set[int]) -> list[Row]:
    """Every requested case's rows, in case order."""
    rows: list[Row] = []
    if cases & {1, 2, 4}:
        rows += _fleet_cases(sizes, cases)
        gc.collect()  # the fleet (3.2 GB at full size) is gone before the ledger cases
    if 3 in cases:
        from benchmarks import pg_releases, releases, rounds

        rows += _guard(3, "ledger releases (SQLite)", lambda: releases.run(sizes))
        rows += _guard(3, "ledger rounds (SQLite)", lambda: rounds.run(sizes))
        rows += _guard(3, "ledger releases (PostgreSQL)", lambda: pg_releases.run(sizes))
    if 5 in cases:
        from benchmarks import composition

        rows += _guard(5, "composition choices", lambda: composition.run(sizes))
    if 7 in cases:
        from benchmarks import service

        rows += _guard(7, "HTTP service", lambda: service.run(sizes))
    return sorted(rows, key=lambda r: r.case)  # stable: keeps each case's own order


def _meta(sizes: Sizes, seconds: float) -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {
        "sizes": sizes.name,
        "wall_seconds": round(seconds, 1),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in load],
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run, print the table (or JSON), return 0 (a missed target is a result, not a crash)."""
    args = _parse(argv)
    sizes = QUICK if args.quick else FULL
    t0 = time.perf_counter()
    rows = run(sizes, args.case_set)
    meta = _meta(sizes, time.perf_counter() - t0)
    doc = {"meta": meta, "rows": [r.as_dict() for r in rows]}
    if args.json == "-":
        print(json.dumps(doc, indent=2, allow_nan=False))
        return 0
    print(render_table(rows))
    load = ", ".join(f"{x:g}" for x in meta["load_average"])
    print(f"\n{sizes.name} run, {meta['wall_seconds']} s on {meta['cpus']} CPUs, load {load}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2, allow_nan=False)
        log(f"JSON written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The runner: ``python -m benchmarks [--quick] [--json [PATH]] [--cases 1,2,...]``.

:data:`CASES` is the registry (append a :class:`Case` to add one). The cases that read
the shared fleet (1, 2 and 4: generated once, outside every timed section, shown as
row 0) run first; the fleet is then freed before the others. A case that crashes
becomes an ``error`` row instead of hiding the others' figures.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks._harness import FULL, QUICK, Row, Sizes, log, render_table


@dataclass
class Context:
    """What the cases of one run share: the sizes, and the fleet while a case needs it."""

    sizes: Sizes
    _fleet: Any = None
    _policy: Any = None
    rows: list[Row] = field(default_factory=list)

    def fleet(self) -> tuple[Any, Any]:
        """The shared benchmark fleet and the shipped policy (generated on first use; its
        generation is row 0, not part of any case)."""
        if self._fleet is None:
            from benchmarks import _fleet
            from dpledger.policy import Policy
            from dpledger.sim.demo import DEFAULT_POLICY

            self._policy = Policy.load(DEFAULT_POLICY)
            self._fleet, gen_row = _fleet.generate(self.sizes.n_clients, self._policy)
            self.rows.append(gen_row)
        return self._fleet, self._policy

    def free_fleet(self) -> None:
        """Drop the fleet (3.2 GB at full size) before cases that do not read it."""
        self._fleet = None
        gc.collect()


@dataclass(frozen=True)
class Case:
    """One benchmark case: its number, what it measures, and how to run it."""

    number: int
    what: str
    run: Callable[[Context], list[Row]]
    fleet: bool = False  # reads the shared fleet: runs with the other fleet cases, first


def _contributions(ctx: Context) -> list[Row]:
    from benchmarks import contributions

    fleet, policy = ctx.fleet()
    return contributions.run(fleet, policy, ctx.sizes)


def _flam(ctx: Context) -> list[Row]:
    from benchmarks import flam_metrics

    return flam_metrics.run(ctx.fleet()[0], ctx.sizes)


def _end_to_end(ctx: Context) -> list[Row]:
    from benchmarks import end_to_end

    fleet, policy = ctx.fleet()
    return end_to_end.run(fleet, policy, ctx.sizes)


def _releases(ctx: Context) -> list[Row]:
    from benchmarks import pg_releases, releases, rounds

    rows = _guard(3, "ledger releases (SQLite)", lambda: releases.run(ctx.sizes))
    rows += _guard(3, "ledger rounds (SQLite)", lambda: rounds.run(ctx.sizes))
    return rows + _guard(3, "ledger releases (PostgreSQL)", lambda: pg_releases.run(ctx.sizes))


def _composition(ctx: Context) -> list[Row]:
    from benchmarks import composition

    return composition.run(ctx.sizes)


def _flower(ctx: Context) -> list[Row]:
    from benchmarks import flower  # its rows say so when the flower extra is missing

    return flower.run(ctx.sizes)


def _service(ctx: Context) -> list[Row]:
    from benchmarks import service

    return service.run(ctx.sizes)


CASES: tuple[Case, ...] = (
    Case(1, "contributions", _contributions, fleet=True),
    Case(2, "FLAM metrics", _flam, fleet=True),
    Case(3, "ledger releases", _releases),
    Case(4, "end to end", _end_to_end, fleet=True),
    Case(5, "composition choices", _composition),
    Case(6, "Flower wrapper", _flower),
    Case(7, "HTTP service", _service),
)
"""The registry: append a :class:`Case` to add one (its number is its ``--cases`` name)."""
NUMBERS = tuple(c.number for c in CASES)


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
    ap.add_argument(
        "--cases", default=",".join(map(str, NUMBERS)), help="comma-separated case numbers"
    )
    args = ap.parse_args(argv)
    try:
        args.case_set = {int(c) for c in args.cases.split(",") if c.strip()}
    except ValueError:
        ap.error(f"--cases takes numbers from {NUMBERS}, got {args.cases!r}")
    if not args.case_set <= set(NUMBERS):
        ap.error(f"--cases takes numbers from {NUMBERS}, got {args.cases!r}")
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


def run(sizes: Sizes, cases: set[int]) -> list[Row]:
    """Every requested case's rows, in case order: the fleet cases first, on one fleet."""
    ctx = Context(sizes)
    chosen = [c for c in CASES if c.number in cases]
    for case in sorted(chosen, key=lambda c: not c.fleet):  # stable: registry order kept
        if not case.fleet:
            ctx.free_fleet()
        ctx.rows += _guard(case.number, case.what, functools.partial(case.run, ctx))
        gc.collect()
    ctx.free_fleet()
    return sorted(ctx.rows, key=lambda r: r.case)  # stable: keeps each case's own order


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

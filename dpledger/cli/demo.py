"""``dpledger demo``: simulate a fleet and run one evaluation epoch through a ledger."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from dpledger._creating import unwritable
from dpledger.cli.argtypes import ascii_int
from dpledger.cli.main import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNDELIVERED,
    at_args,
    committed_but_undelivered,
)
from dpledger.cli.output import Undelivered, json_text, say, write_out
from dpledger.errors import DpLedgerError, InvalidInput
from dpledger.sim.demo import DEFAULT_POLICY, DemoResult, run_demo
from dpledger.sim.plots import check_plot_targets, write_plots
from dpledger.sim.report import as_json, text_report

__all__ = ["register"]


def _cmd_demo(args: argparse.Namespace) -> int:
    if args.plots is not None:  # before anything is spent: a missing plotting extra refuses
        if not args.plots:  # up front, and so do taken chart names
            raise InvalidInput("--plots needs a directory name, got an empty one")
        from dpledger.planning.clip import require_pyplot

        require_pyplot()
        charts = check_plot_targets(Path(args.plots), replace=args.fresh)
        ledger, where = os.path.realpath(args.ledger), os.path.realpath(args.plots)
        for chart in charts:  # the demo would create its ledger there, then meet it as taken
            if os.path.realpath(chart) == ledger:
                raise InvalidInput(
                    f"--ledger {args.ledger} is the chart {chart} that --plots writes: "
                    "choose another ledger path or --plots directory"
                )
        above = Path(where)  # the charts' directory, or the ancestor mkdir creates it in
        while not above.exists() and above != above.parent:
            above = above.parent
        if why := unwritable(above / "chart.png"):  # found before the spend, not after it
            raise InvalidInput(f"--plots {args.plots}: the charts cannot be written{why}")
        if where == ledger or where.startswith(ledger.rstrip(os.sep) + os.sep):
            raise InvalidInput(  # the ledger file would stand where the directory must be
                f"--plots {args.plots} would be the ledger {args.ledger} or under it: choose "
                "another ledger path or --plots directory"
            )
    args.interrupted = (  # main says so on a Ctrl-C from here on (review 41)
        f": the demo may have committed releases to {args.ledger} before it stopped: see them "
        f"with `dpledger ledger export {at_args(str(DEFAULT_POLICY), args.ledger)}` (if it "
        "exists, a rerun there needs --fresh, which replaces it)"
    )
    result = run_demo(
        n_clients=args.clients,
        seed=args.seed,
        ledger_path=args.ledger,
        progress=None if args.json or args.quiet else sys.stderr,
        fresh=args.fresh,
    )
    failed: str | None = None
    try:
        plots = (
            write_plots(result, Path(args.plots), replace=args.fresh)
            if args.plots is not None
            else []
        )
    except Exception as e:  # whatever failed, a spend's values are shown
        if not result.releases:
            raise  # nothing was committed: the chart's problem is the whole answer
        # committed: the values are still shown, then the failure
        plots, failed = [], str(e) if isinstance(e, DpLedgerError) else f"{type(e).__name__}: {e}"
    if args.json:
        report = json_text({**as_json(result), "plots": [str(p) for p in plots]}, sort_keys=False)
    else:
        report = "\n".join([text_report(result), *(f"wrote {p}" for p in plots)])
    try:
        write_out(report)
    except Undelivered as e:
        if not result.releases:
            raise  # nothing was committed: only the report is lost
        return _undelivered(result, e.why)
    args.interrupted = ""  # the report, values and all, is out
    if failed is not None:
        say(
            f"dpledger: the releases above are committed to {result.ledger_path}, but the "
            f"charts were not written: {failed}"
        )
        return EXIT_UNDELIVERED
    if not result.releases:
        say(
            f"dpledger: every release was refused (see above); nothing was written to "
            f"{result.ledger_path}, so there is nothing to verify"
        )
        return EXIT_REFUSED
    return EXIT_OK


def _undelivered(result: DemoResult, why: str) -> int:
    """The demo spent its ledger's budget but could not print its report: say what it did."""
    lines = [
        f"  entry {r.entry_id}: {r.request.metric} (epoch {r.request.epoch}, region "
        f"{r.request.region}), charged {r.unit} = {r.charge.text}"
        for r in result.releases
    ]
    return committed_but_undelivered(
        f"the demo's {len(result.releases)} releases into {result.ledger_path}",
        why,
        "\n".join(lines),
        f"They are recorded: read them with `dpledger ledger export "
        f"{at_args(str(DEFAULT_POLICY), result.ledger_path)}`.",
    )


def register(subparsers: Any) -> None:
    """Add ``dpledger demo`` to the CLI."""
    p = subparsers.add_parser("demo", help="simulate a fleet and run one evaluation epoch")
    p.add_argument("--clients", type=ascii_int, default=20_000, help="fleet size (default 20,000)")
    p.add_argument(
        "--seed", type=ascii_int, default=0, help="fleet seed (noise is OpenDP's, unseeded)"
    )
    p.add_argument(
        "--ledger",
        default="dpledger-demo.db",
        help="the SQLite ledger the demo creates (an existing file is never overwritten)",
    )
    p.add_argument("--fresh", action="store_true", help="replace this path's previous demo ledger")
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.add_argument(
        "--plots",
        metavar="DIR",
        help="write PNG charts of the released values (new files; with --fresh, replace "
        "the charts an earlier demo wrote there, never another PNG)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_demo)

"""The ``dpledger plan`` and ``dpledger calibrate`` subcommands.

:func:`register` adds both to the main parser. Handlers print to stdout and return
an exit code (0 ok); bad input raises a :class:`~dpledger.errors.DpLedgerError`
subclass, which the main command turns into exit code 2.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

from dpledger._files import check_new, postgres_url
from dpledger.cli.argtypes import ascii_float, ascii_int
from dpledger.cli.output import json_text, write_out
from dpledger.errors import InvalidInput
from dpledger.planning.clip import (
    calibrate_clip,
    load_held_out,
    plot_candidates,
    require_pyplot,
)
from dpledger.planning.forward import plan
from dpledger.policy import Policy, PolicyWarning
from dpledger.types import MAX_COHORT

__all__ = ["cmd_calibrate", "cmd_plan", "parse_cohort", "parse_percentiles", "register"]


def parse_cohort(text: str, flag: str = "--cohort", form: str = "REGION=N") -> tuple[str, int]:
    """``"eu-west=2400"`` → ``("eu-west", 2400)``; :class:`InvalidInput` if malformed."""
    region, sep, count = text.partition("=")
    region, count = region.strip(), count.strip()
    n = int(count) if count.isascii() and count.isdigit() and len(count) <= 10 else 0
    if not sep or not region or not 1 <= n <= MAX_COHORT:
        raise InvalidInput(
            f"{flag} {text!r}: expected {form} with N an integer from 1 to {MAX_COHORT:_} "
            "(ASCII digits), e.g. eu-west=2400"
        )
    return region, n


def parse_percentiles(text: str) -> tuple[float, ...]:
    """``"50,90,99"`` → ``(50.0, 90.0, 99.0)``, each an :func:`ascii_float` (so ``1e400``
    is refused as typed, not as ``inf``); range checks happen in calibration. An empty
    item (``50,,90``, a trailing comma) is refused, not skipped (audit s29, F10)."""
    items = [p.strip() for p in text.split(",")]
    if not text.strip():
        raise InvalidInput(
            "--percentiles is empty: give at least one candidate percentile, like 50,90,95,99,100"
        )
    if "" in items:
        raise InvalidInput(
            f"--percentiles {text[:80]!r}: item {items.index('') + 1} of {len(items)} is empty; "
            "expected numbers separated by single commas, like 50,90,95,99,100"
        )
    try:
        return tuple(ascii_float(p) for p in items)
    except argparse.ArgumentTypeError as e:
        raise InvalidInput(
            f"--percentiles {text[:80]!r}: {e}; expected numbers like 50,90,95,99,100"
        ) from None


def cmd_plan(args: argparse.Namespace) -> int:
    """``dpledger plan``: the per region × metric budget table (or JSON)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolicyWarning)  # the plan lists it among its warnings
        policy = Policy.load(args.policy)
    if args.compare_units:
        given = [
            flag
            for flag, used in (
                ("--cohort", bool(args.cohort)),
                ("--compare-definitions", args.compare_definitions),
                ("--ledger", args.ledger is not None),
                ("--rounds", args.rounds is not None),
                ("--epoch", args.epoch != 0),
            )
            if used
        ]
        if given:
            raise InvalidInput(
                f"--compare-units takes only --silo NAME=RECORDS (and --json); {', '.join(given)} "
                "go with the per-region plan: run that separately"
            )
        return _print_unit_comparison(policy, args.silo or [], args.json)
    if args.silo:
        raise InvalidInput("--silo NAME=RECORDS goes with --compare-units")
    if args.compare_definitions and (args.ledger is not None or args.epoch != 0):
        raise InvalidInput(  # a comparison reads no spend: they would be ignored silently
            "--compare-definitions compares bars at the policy's budgets (and --rounds); "
            "--ledger and --epoch go with the per-region plan: run that separately"
        )
    cohorts: dict[str, int] = {}
    for text in args.cohort or []:
        region, n = parse_cohort(text)
        if region in cohorts:
            raise InvalidInput(f"--cohort {region} is given twice")
        cohorts[region] = n
    if not cohorts:
        raise InvalidInput(
            f"give each region's planned cohort ({policy.counted} per release): --cohort "
            "REGION=N (repeatable)"
        )
    if args.ledger is None:
        result = plan(policy, cohorts, rounds_per_epoch=args.rounds, epoch=args.epoch)
    else:
        from dpledger.ledger import Ledger

        target = str(args.ledger)
        if postgres_url(target) is None and not Path(target).exists():
            raise InvalidInput(f"no ledger at {target}: planning reads a ledger, never creates one")
        with Ledger.open(target, policy, mode="read") as ledger:
            result = plan(
                policy, cohorts, rounds_per_epoch=args.rounds, ledger=ledger, epoch=args.epoch
            )
    if args.compare_definitions:
        return _print_comparison(policy, cohorts, args.rounds, args.json)
    write_out(result.model_dump_json(indent=2) if args.json else result.table())
    return 0


def _print_comparison(
    policy: Policy, cohorts: dict[str, int], rounds: int | None, as_json: bool
) -> int:
    from dpledger.planning._common import text_table
    from dpledger.planning.definitions import compare_definitions

    rows = compare_definitions(policy, cohorts, rounds)
    if as_json:
        write_out(json_text([r.model_dump() for r in rows], sort_keys=False))
        return 0
    headers = ["region", "metric", "n", "ε/release", "pure/Laplace", "ρ/release"]
    headers += ["zCDP/Gaussian", "smaller"]
    write_out(
        f"error bar per metric at the same per-epoch (ε, δ = {policy.delta:g}) guarantee, "
        f"{rounds or policy.rounds_per_epoch} round(s) per epoch\n"
        + text_table(
            headers,
            (
                (
                    r.region,
                    r.metric,
                    str(r.cohort),
                    f"{r.epsilon:.4g}",
                    f"{r.laplace_bar:.4g}",
                    f"{r.rho:.4g}",
                    f"{r.gaussian_bar:.4g}",
                    r.better,
                )
                for r in rows
            ),
            align="llrrrrrl",
        )
    )
    return 0


def _print_unit_comparison(policy: Policy, silo_args: list[str], as_json: bool) -> int:
    from dpledger.planning.units import compare_units, units_table

    silos: dict[str, int] = {}
    for text in silo_args:
        name, n = parse_cohort(text, "--silo", "NAME=N")
        if name in silos:
            raise InvalidInput(f"--silo {name} is given twice")
        silos[name] = n
    if not silos:
        raise InvalidInput("give the federation's silos: --silo NAME=RECORDS (repeatable)")
    rows = compare_units(policy, silos)
    if as_json:
        write_out(json_text([r.model_dump() for r in rows], sort_keys=False))
    else:
        write_out(units_table(rows))
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``dpledger calibrate``: the clip-bound candidate table (or JSON), optionally a chart."""
    if args.plot is not None:
        require_pyplot()  # fail before any work if matplotlib is missing
        check_new(args.plot, "--plot")  # or if the chart could not be written
    path = Path(args.held_out)
    values = load_held_out(path, args.column)
    source = f"held-out {path.name}" + (f"[{args.column}]" if args.column else "")
    result = calibrate_clip(
        values,
        epsilon=args.epsilon,
        cohort=args.cohort,
        percentiles=parse_percentiles(args.percentiles),
        neighbouring=args.neighbouring,
        low=args.low,
        source=source,
    )
    # the chart first: if it cannot be written, only the error is printed (one JSON object)
    out = None if args.plot is None else plot_candidates(result, args.plot)
    if args.json:
        data = result.model_dump(mode="json")
        data["recommended_source"] = result.source_string()
        write_out(json_text(data, sort_keys=False))  # strict JSON: no NaN/Infinity
    else:
        write_out(result.table())
        write_out(f"clip.source = {json.dumps(result.source_string())}")
        if out is not None:
            write_out(f"chart written to {out}")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``plan`` and ``calibrate`` subcommands to the main parser's subparsers."""
    p = subparsers.add_parser(
        "plan",
        help="per region × metric: ε per release, noise, error bar, cohort floor, budget left",
        description="Plan one epoch of a policy's releases before running it.",
    )
    p.add_argument("policy", help="policy TOML file")
    p.add_argument(
        "--cohort",
        action="append",
        metavar="REGION=N",
        help="a region's planned cohort (clients per release; records under a record-level "
        "policy); repeat per region",
    )
    p.add_argument("--rounds", type=ascii_int, help="rounds per epoch (default: the policy's)")
    p.add_argument(
        "--ledger", help="an existing ledger (SQLite path or postgresql:// URL) to read spend from"
    )
    p.add_argument("--epoch", type=ascii_int, default=0, help="epoch to plan (default 0)")
    p.add_argument(
        "--compare-definitions",
        action="store_true",
        help="per metric, whether pure/Laplace or zCDP/Gaussian gives the smaller bar",
    )
    p.add_argument(
        "--compare-units",
        action="store_true",
        help="for a record-level policy and a federation (--silo), the bars of one release "
        "over every silo under client-level and record-level units, side by side",
    )
    p.add_argument(
        "--silo",
        action="append",
        metavar="NAME=RECORDS",
        help="a silo and its record count (with --compare-units); repeat per silo",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_plan)

    c = subparsers.add_parser(
        "calibrate",
        help="clip-bound candidates from held-out percentiles: noise vs clipping",
        description="Table of candidate clip bounds from a held-out fleet's per-client values.",
    )
    c.add_argument("--held-out", required=True, help="per-client values: .npy, or .csv")
    c.add_argument("--column", help="CSV column holding the values")
    c.add_argument(
        "--epsilon", type=ascii_float, required=True, help="ε of one release of the metric"
    )
    c.add_argument("--cohort", type=ascii_int, required=True, help="clients in one published mean")
    c.add_argument(
        "--percentiles",
        default="50,90,95,99,100",
        help="candidate percentiles, comma-separated (default 50,90,95,99,100)",
    )
    c.add_argument(
        "--neighbouring",
        choices=("replace", "add_remove"),
        default="replace",
        help="the neighbouring relation (default replace)",
    )
    c.add_argument("--low", type=ascii_float, default=0.0, help="lower clip bound (default 0)")
    c.add_argument("--json", action="store_true", help="machine-readable output")
    c.add_argument("--plot", metavar="OUT.png", help="write the grouped bar chart here")
    c.set_defaults(func=cmd_calibrate)

"""The ``dpledger`` command: check, release, audit the ledger; plan, calibrate, demo.

Exit codes make it a CI gate: 0 approved/ok, 1 refused (or verification failed),
2 usage or input error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dpledger.approval import ReleaseRequest, Verdict
from dpledger.errors import DpLedgerError, InvalidInput, ReleaseRefused
from dpledger.ledger import Ledger, Release
from dpledger.policy import ALL, Policy

__all__ = ["EXIT_ERROR", "EXIT_OK", "EXIT_REFUSED", "build_parser", "main"]

EXIT_OK, EXIT_REFUSED, EXIT_ERROR = 0, 1, 2


def _emit(data: Any, as_json: bool, text: str) -> None:
    print(json.dumps(data, indent=2, sort_keys=True) if as_json else text)


def _open(args: argparse.Namespace) -> Ledger:
    if not args.policy:
        raise InvalidInput("no policy: pass --policy FILE or set DPLEDGER_POLICY")
    return Ledger.open(args.ledger, Policy.load(args.policy))


def load_aggregate(path: str) -> npt.NDArray[Any]:
    """An aggregate from ``.npy`` or JSON (a number or a list of numbers), unvalidated."""
    p = Path(path)
    try:
        if p.suffix == ".npy":
            arr: npt.NDArray[Any] = np.load(p, allow_pickle=False)
            return arr
        return np.asarray(json.loads(p.read_text(encoding="utf-8")))
    except (OSError, ValueError) as e:
        raise InvalidInput(f"cannot read aggregate {path}: {e}") from e


def _request(args: argparse.Namespace) -> ReleaseRequest:
    fields: dict[str, Any] = {}
    if args.request:
        try:
            fields = dict(json.loads(Path(args.request).read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError) as e:
            raise InvalidInput(f"cannot read request {args.request}: {e}") from e
    for name in ("epoch", "metric", "region", "cohort", "edges_version", "policy_version"):
        value = getattr(args, name)
        if value is not None:
            fields[name] = value
    try:
        return ReleaseRequest(**fields)
    except ValueError as e:
        raise InvalidInput(f"invalid release request: {e}") from e


def verdict_text(v: Verdict) -> str:
    """An aligned table of checks, ready to paste into a review."""
    width = max(len(c.name) for c in v.checks)
    lines = [v.summary(), ""]
    lines += [f"  {c.status:<7} {c.name:<{width}}  {c.reason}" for c in v.checks]
    return "\n".join(lines)


def release_text(r: Release) -> str:
    """The released value with its bar and charge."""
    v = r.value
    shown = f"{v:.6g}" if isinstance(v, float) else np.array2string(v, precision=4)
    return (
        f"entry {r.entry_id}: {r.request.metric} (epoch {r.request.epoch}, "
        f"region {r.request.region}, n={r.request.cohort})\n"
        f"  value     {shown}\n  ± {r.bar:<7} {r.error_bar:.6g}\n"
        f"  scale     {r.scale:.6g}\n  charged   {r.unit} = {r.epsilon}"
    )


def _cmd_check(args: argparse.Namespace) -> int:
    with _open(args) as ledger:
        v = ledger.check(_request(args), load_aggregate(args.aggregate))
    _emit(v.as_dict(), args.json, verdict_text(v))
    return EXIT_OK if v.approved else EXIT_REFUSED


def _cmd_release(args: argparse.Namespace) -> int:
    with _open(args) as ledger:
        try:
            r = ledger.release(_request(args), load_aggregate(args.aggregate))
        except ReleaseRefused as e:
            _emit(e.verdict.as_dict(), args.json, verdict_text(e.verdict))
            return EXIT_REFUSED
    _emit(r.as_dict(), args.json, release_text(r))
    return EXIT_OK


def _cmd_show(args: argparse.Namespace) -> int:
    with _open(args) as ledger:
        epochs = sorted({e.draft.epoch for e in ledger.entries()})
        regions = (*ledger.policy.regions.names, ALL)
        rows = []
        for epoch in epochs:
            for region in regions:
                spent = ledger.spent(epoch, region)
                rows.append(
                    {
                        "epoch": epoch,
                        "region": region,
                        "spent": str(spent),
                        "remaining": str(ledger.remaining(epoch, region)),
                    }
                )
        n, head = ledger.head()
        budget = ledger.policy.eval_budget
    text = [f"ledger {ledger.location}: {n} entries, head {head[:16]}…, ε_eval {budget}"]
    text += [
        f"  epoch {r['epoch']:>4}  {r['region']:<12} spent {r['spent']:>8}  left {r['remaining']}"
        for r in rows
    ]
    _emit(
        {"entries": n, "head": head, "eval_budget": str(budget), "scopes": rows},
        args.json,
        "\n".join(text),
    )
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    anchor = None
    if args.expected_head:
        seq, _, digest = args.expected_head.partition(":")
        if not (seq.isdigit() and len(digest) == 64):
            raise InvalidInput("--expected-head takes ENTRY_ID:HASH (a release's entry_hash)")
        anchor = (int(seq), digest)
    with _open(args) as ledger:
        report = ledger.verify(expected_head=anchor)
    text = f"verified {report.entries_checked} entries: " + (
        "ok" if report.ok else "FAILED\n" + "\n".join(f"  - {p}" for p in report.problems)
    )
    _emit(
        {"ok": report.ok, "entries": report.entries_checked, "problems": list(report.problems)},
        args.json,
        text,
    )
    return EXIT_OK if report.ok else EXIT_REFUSED


def _cmd_export(args: argparse.Namespace) -> int:
    with _open(args) as ledger:
        out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout  # noqa: SIM115
        try:
            for e in ledger.entries():
                out.write(json.dumps(e.as_dict(), sort_keys=True) + "\n")
        finally:
            if out is not sys.stdout:
                out.close()
    return EXIT_OK


def _cmd_lifetime(args: argparse.Namespace) -> int:
    with _open(args) as ledger:
        life = ledger.lifetime(args.region, delta=args.delta)
        delta = args.delta or ledger.policy.delta
    basic = (
        "n/a (not all pure)" if life.epsilon_basic is None else f"{float(life.epsilon_basic):.6g}"
    )
    pld = (
        "not installed (pip install 'dpledger[pld]')"
        if life.epsilon_pld is None
        else f"{life.epsilon_pld:.6g}"
    )
    text = (
        f"lifetime loss of a client of region {life.region} over {life.releases} releases\n"
        f"  basic composition   ε = {basic}\n"
        f"  zCDP (ρ = {float(life.rho):.6g})   ε = {life.epsilon_zcdp:.6g} at δ = {delta:g}\n"
        f"  PLD                 ε = {pld}\n"
        f"  shown: ε = {life.epsilon:.6g}, δ = {life.delta:g} ({life.method})"
    )
    _emit(life.as_dict(), args.json, text)
    return EXIT_OK


def _ledger_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--policy",
        default=os.environ.get("DPLEDGER_POLICY"),
        help="policy TOML (or $DPLEDGER_POLICY)",
    )
    p.add_argument(
        "--ledger",
        default=os.environ.get("DPLEDGER_URL", "dpledger.db"),
        help="SQLite path or postgresql:// URL (or $DPLEDGER_URL)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _release_args(p: argparse.ArgumentParser) -> None:
    _ledger_args(p)
    p.add_argument("--request", help="JSON file with the request fields (flags override)")
    p.add_argument("--epoch", type=int)
    p.add_argument("--metric")
    p.add_argument("--region", help=f"a region, or {ALL!r} for a global release (required)")
    p.add_argument("--cohort", type=int, help="clients summed into the aggregate")
    p.add_argument("--edges-version", dest="edges_version")
    p.add_argument("--policy-version", dest="policy_version")
    p.add_argument(
        "--aggregate", required=True, help="the secure sum: .json (number or list) or .npy"
    )


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (subcommands from planning and the demo included)."""
    parser = argparse.ArgumentParser(prog="dpledger", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help="dry-run every approval check; spend nothing")
    _release_args(p)
    p.set_defaults(func=_cmd_check)
    p = sub.add_parser("release", help="check, spend, add OpenDP noise, record")
    _release_args(p)
    p.set_defaults(func=_cmd_release)
    lg = sub.add_parser("ledger", help="inspect and audit a ledger").add_subparsers(
        dest="action", required=True
    )
    for name, func, help_ in (
        ("show", _cmd_show, "spend and remaining budget per epoch and region"),
        ("verify", _cmd_verify, "hash chain + re-derive every ε via OpenDP"),
        ("export", _cmd_export, "entries as JSON lines"),
        ("lifetime", _cmd_lifetime, "a client's total loss over all epochs: basic, zCDP, PLD"),
    ):
        p = lg.add_parser(name, help=help_)
        _ledger_args(p)
        p.set_defaults(func=func)
        if name == "export":
            p.add_argument("--out", help="file to write (default stdout)")
        if name == "verify":
            p.add_argument("--expected-head", help="ENTRY_ID:HASH recorded outside the database")
        if name == "lifetime":
            p.add_argument("--region", default=ALL, help="a region, or '*' for the worst")
            p.add_argument("--delta", type=float, help="δ for the (ε, δ) views (default: policy's)")
    _register_subcommands(sub)
    return parser


def _register_subcommands(sub: Any) -> None:
    """Planning, calibration and the demo live in their own modules."""
    from dpledger import cli_planning, demo_report

    cli_planning.register(sub)
    demo_report.register(sub)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code."""
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except ReleaseRefused as e:
        print(verdict_text(e.verdict), file=sys.stderr)
        return EXIT_REFUSED
    except DpLedgerError as e:
        print(f"dpledger: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    return code


if __name__ == "__main__":
    sys.exit(main())

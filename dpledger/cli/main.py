"""The ``dpledger`` command: check, release, audit the ledger; plan, calibrate, demo.

Exit codes make it a CI gate: 0 approved/ok, 1 refused (or verification failed),
2 usage or input error, 3 internal error (a dpledger bug; ``--debug`` shows the
traceback). Reading commands (``check``, ``ledger show|verify|export|lifetime``) open
an existing ledger only; a ledger is created by ``release`` or ``ledger init``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dpledger.approval import ReleaseRequest, Verdict
from dpledger.errors import (
    DpLedgerError,
    InternalError,
    InvalidInput,
    MigrationRefused,
    ReleaseRefused,
)
from dpledger.ledger import Ledger, Release
from dpledger.ledger.lifetime import Lifetime
from dpledger.policy import ALL, Policy
from dpledger.types import Mode

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_REFUSED",
    "MAX_AGGREGATE_VALUES",
    "build_parser",
    "load_aggregate",
    "main",
]

EXIT_OK, EXIT_REFUSED, EXIT_ERROR, EXIT_INTERNAL = 0, 1, 2, 3
MAX_AGGREGATE_VALUES = 100_000
"""An aggregate file may hold at most this many numbers (a policy's largest dimension)."""
_MAX_JSON_BYTES = 8 << 20  # 8 MiB: 100,000 numbers in JSON fit several times over


def _emit(data: Any, as_json: bool, text: str) -> None:
    print(json.dumps(data, indent=2, sort_keys=True) if as_json else text)


def _open(args: argparse.Namespace, mode: Mode) -> Ledger:
    if not args.policy:
        raise InvalidInput("no policy: pass --policy FILE or set DPLEDGER_POLICY")
    return Ledger.open(args.ledger, Policy.load(args.policy), mode=mode)


def _read_json(path: str, what: str) -> Any:
    p = Path(path)
    try:
        if p.stat().st_size > _MAX_JSON_BYTES:
            raise InvalidInput(f"cannot read {what} {path}: larger than {_MAX_JSON_BYTES} bytes")
        return json.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise InvalidInput(f"cannot read {what} {path}: {e.strerror}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidInput(f"cannot read {what} {path}: not valid JSON ({e})") from None
    except RecursionError:
        raise InvalidInput(f"cannot read {what} {path}: JSON nested too deeply") from None


def _load_npy(p: Path) -> npt.NDArray[Any]:
    """An ``.npy`` array, its header checked before anything is allocated."""
    with p.open("rb") as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(f)
        elif version in ((2, 0), (3, 0)):
            shape, _, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError(f"unsupported .npy version {version}")
        size = int(np.prod(shape, dtype=object)) if shape else 1
        if size > MAX_AGGREGATE_VALUES:
            raise ValueError(f"claims {size} values, more than {MAX_AGGREGATE_VALUES}")
        if dtype.hasobject:
            raise ValueError("holds Python objects; save a numeric array")
        needed = f.tell() + size * dtype.itemsize
    if p.stat().st_size < needed:
        raise ValueError("is shorter than its header says (truncated)")
    arr: npt.NDArray[Any] = np.load(p, allow_pickle=False)
    return arr


def load_aggregate(path: str) -> npt.NDArray[Any]:
    """An aggregate from ``.npy`` or JSON (a number or a list of numbers), unvalidated.

    Sizes are checked before allocating: at most :data:`MAX_AGGREGATE_VALUES` numbers.
    """
    p = Path(path)
    if p.suffix == ".npy":
        try:
            return _load_npy(p)
        except (OSError, ValueError, EOFError) as e:
            raise InvalidInput(f"cannot read aggregate {path}: {e}") from None
    data = _read_json(path, "aggregate")
    try:
        arr = np.asarray(data)
    except (ValueError, TypeError) as e:
        raise InvalidInput(f"cannot read aggregate {path}: not an array of numbers ({e})") from None
    if arr.size > MAX_AGGREGATE_VALUES:
        raise InvalidInput(f"aggregate {path} holds {arr.size} values, more than allowed")
    return arr


def _request(args: argparse.Namespace) -> ReleaseRequest:
    fields: dict[str, Any] = {}
    if args.request:
        data = _read_json(args.request, "request")
        if not isinstance(data, dict):
            raise InvalidInput(f"request {args.request} must be a JSON object of fields")
        fields = dict(data)
    for name in ("epoch", "metric", "region", "cohort", "edges_version", "policy_version",
                 "release_id"):  # fmt: skip
        value = getattr(args, name, None)
        if value is not None:
            fields[name] = value
    try:
        return ReleaseRequest(**fields)
    except InvalidInput as e:
        raise InvalidInput(f"invalid release request: {e}") from None


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
    rid = f", release id {r.release_id}" if r.release_id else ""
    return (
        f"entry {r.entry_id}: {r.request.metric} (epoch {r.request.epoch}, "
        f"region {r.request.region}, n={r.request.cohort}{rid})\n"
        f"  value     {shown}\n  ± {r.bar:<7} {r.error_bar:.6g}\n"
        f"  scale     {r.scale:.6g}\n  charged   {r.unit} = {r.charge.text}"
    )


def _cmd_check(args: argparse.Namespace) -> int:
    request, aggregate = _request(args), load_aggregate(args.aggregate)
    with _open(args, "read") as ledger:
        v = ledger.check(request, aggregate)
    _emit(v.as_dict(), args.json, verdict_text(v))
    return EXIT_OK if v.approved else EXIT_REFUSED


def _cmd_release(args: argparse.Namespace) -> int:
    request, aggregate = _request(args), load_aggregate(args.aggregate)
    with _open(args, "create") as ledger:
        new = not ledger.exists
        try:
            r = ledger.release(request, aggregate)
        except ReleaseRefused as e:
            if e.verdict is None:
                raise
            _emit(e.verdict.as_dict(), args.json, verdict_text(e.verdict))
            return EXIT_REFUSED
        if new:  # a mistyped --ledger would start a new budget history: say so
            print(f"dpledger: created a new ledger at {ledger.location}", file=sys.stderr)
    _emit(r.as_dict(), args.json, release_text(r))
    return EXIT_OK


def _cmd_init(args: argparse.Namespace) -> int:
    with _open(args, "create") as ledger:
        created = ledger.init()
        where, name, version = ledger.location, ledger.policy.name, ledger.policy.version
    verb = "created" if created else "already exists:"
    _emit(
        {"created": created, "ledger": where, "policy": name},
        args.json,
        f"{verb} ledger {where} for policy {name} (opened with version {version})",
    )
    return EXIT_OK


def _cmd_migrate(args: argparse.Namespace) -> int:
    from dpledger.ledger.migrate import migrate

    try:
        done = migrate(args.ledger)
    except MigrationRefused as e:  # it fails its own schema's checks: nothing was changed
        print(f"dpledger: migration refused: {e}", file=sys.stderr)
        return EXIT_REFUSED
    head = f"{done.head[0]}:{done.head[1]}"
    text = (
        f"migrated {done.location} from schema {done.from_version} to {done.to_version}: "
        f"{done.entries} entries kept, chain head {head} unchanged (recorded anchors stay "
        "valid); check it with `dpledger ledger verify`"
        if done.changed
        else f"{done.location} is already at schema {done.to_version}: nothing to do"
    )
    _emit({**done.as_dict(), "changed": done.changed}, args.json, text)
    return EXIT_OK


def _unit_view(ledger: Ledger) -> str:
    """The epoch budget in its unit; under zCDP with its (ε, δ) view."""
    p = ledger.policy
    who = "client" if p.privacy_unit == "client" else "person (record unit)"
    if p.unit == "epsilon":
        return f"ε_eval {p.eval_budget} per {who} per epoch (pure DP)"
    from dpledger.accounting import zcdp_epsilon

    eps = zcdp_epsilon(p.eval_budget, p.delta)
    return f"ρ_eval {p.eval_budget} per {who} per epoch (zCDP; ≈ ε {eps:.4g} at δ = {p.delta:g})"


def _cmd_show(args: argparse.Namespace) -> int:
    with _open(args, "read") as ledger:
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
                        "spent": spent.text,
                        "remaining": ledger.remaining(epoch, region).text,
                    }
                )
        n, head = ledger.head()
        budget, unit, view = ledger.policy.eval_budget, ledger.policy.unit, _unit_view(ledger)
        notices = ledger.budget_changes()
    sym = "ε" if unit == "epsilon" else "ρ"
    text = [f"ledger {ledger.location}: {n} entries, head {head[:16]}…, {view}"]
    text += [
        f"  epoch {r['epoch']:>4}  {r['region']:<12} spent {sym} {r['spent']:>8}  "
        f"left {r['remaining']}"
        for r in rows
    ]
    text += [f"  notice: {x}" for x in notices]
    _emit(
        {
            "entries": n,
            "head": head,
            "unit": unit,
            "privacy_unit": ledger.policy.privacy_unit,
            "eval_budget": str(budget),
            "regions": rows,
            "notices": list(notices),
        },
        args.json,
        "\n".join(text),
    )
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    anchor = None
    if args.expected_head:
        seq, _, digest = args.expected_head.partition(":")
        if not (seq.isdigit() and len(seq) <= 19 and len(digest) == 64):
            raise InvalidInput("--expected-head takes ENTRY_ID:HASH (a release's entry_hash)")
        anchor = (int(seq), digest)
    with _open(args, "read") as ledger:
        report = ledger.verify(expected_head=anchor)
    text = f"verified {report.entries_checked} entries: " + (
        "ok" if report.ok else "FAILED\n" + "\n".join(f"  - {p}" for p in report.problems)
    )
    text += "".join(f"\n  notice: {x}" for x in report.notices)
    _emit(
        {
            "ok": report.ok,
            "entries": report.entries_checked,
            "problems": list(report.problems),
            "notices": list(report.notices),
        },
        args.json,
        text,
    )
    return EXIT_OK if report.ok else EXIT_REFUSED


def _export_target(args: argparse.Namespace) -> Path:
    """Where ``--out`` may write: never the ledger, never an existing file without --force."""
    out = Path(args.out)
    ledger_files = [Path(str(args.ledger) + s) for s in ("", "-wal", "-shm", "-journal")]
    try:
        if any(f.exists() and out.exists() and out.samefile(f) for f in ledger_files):
            raise InvalidInput(f"--out {out} is the ledger itself: choose another file")
        if out.is_dir():
            raise InvalidInput(f"--out {out} is a directory: name a file")
        if out.exists() and not args.force:
            raise InvalidInput(f"--out {out} exists: pass --force to replace it")
        if not out.parent.is_dir():
            raise InvalidInput(f"--out {out}: the directory {out.parent} does not exist")
    except OSError as e:
        raise InvalidInput(f"--out {out}: {e.strerror}") from None
    return out


def _cmd_export(args: argparse.Namespace) -> int:
    target = _export_target(args) if args.out else None
    with _open(args, "read") as ledger:
        lines = (json.dumps(e.as_dict(), sort_keys=True) + "\n" for e in ledger.entries())
        if target is None:
            for line in lines:
                sys.stdout.write(line)
            return EXIT_OK
        tmp = target.with_name(f".{target.name}.{os.getpid()}.partial")
        try:
            with tmp.open("w", encoding="utf-8") as out:
                out.writelines(lines)
            os.replace(tmp, target)  # complete or absent: never half an export
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise InvalidInput(f"cannot write --out {target}: {e.strerror}") from None
    return EXIT_OK


def _cmd_lifetime(args: argparse.Namespace) -> int:
    with _open(args, "read") as ledger:
        units = sorted({e.privacy_unit for e in ledger.entries()} | {ledger.policy.privacy_unit})
        lives = [ledger.lifetime(args.region, delta=args.delta, privacy_unit=u) for u in units]
        delta = args.delta or ledger.policy.delta
    blocks = [_lifetime_text(life, delta) for life in lives]
    payload = lives[0].as_dict() if len(lives) == 1 else {"by_unit": [x.as_dict() for x in lives]}
    _emit(payload, args.json, "\n".join(blocks))
    return EXIT_OK


def _lifetime_text(life: Lifetime, delta: float) -> str:
    pld = (
        "not installed (pip install 'dpledger[pld]')"
        if life.epsilon_pld is None
        else f"{life.epsilon_pld:.6g}"
    )
    who = "a client" if life.privacy_unit == "client" else "one person's records"
    head = f"lifetime loss of {who} of region {life.region} over {life.releases} releases"
    if life.method == "basic":
        headline = f"  ε = {life.total.text} (pure DP, exact; δ = 0)"
    else:
        headline = (
            f"  ρ = {life.total.text} (zCDP, exact) → ε = {life.epsilon:.6g} at δ = {delta:g} "
            f"({life.method})"
        )
    text = (
        f"{head}\n{headline}\n  (ε, δ = {delta:g}) views: zCDP conversion ε = "
        f"{life.epsilon_zcdp:.6g}; PLD ε = {pld}"
    )
    if life.unbounded:
        text += (
            f"\n  NOT BOUNDED for a client: {life.unbounded} record-level release(s) protect "
            "one person's records, not a client's aggregate"
        )
    return text


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


def _release_args(p: argparse.ArgumentParser, *, release: bool) -> None:
    _ledger_args(p)
    p.add_argument("--request", help="JSON file with the request fields (flags override)")
    p.add_argument("--epoch", type=int)
    p.add_argument("--metric")
    p.add_argument("--region", help=f"a region, or {ALL!r} for a global release (required)")
    p.add_argument("--cohort", type=int, help="clients summed into the aggregate")
    p.add_argument("--edges-version", dest="edges_version")
    p.add_argument("--policy-version", dest="policy_version")
    if release:
        p.add_argument(
            "--release-id",
            dest="release_id",
            help="idempotency key: a retry with the same id returns the recorded release",
        )
    p.add_argument(
        "--aggregate", required=True, help="the secure sum: .json (number or list) or .npy"
    )


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (subcommands from planning and the demo included)."""
    parser = argparse.ArgumentParser(prog="dpledger", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help="dry-run every approval check; spend nothing")
    _release_args(p, release=False)
    p.set_defaults(func=_cmd_check)
    p = sub.add_parser("release", help="check, spend, add OpenDP noise, record")
    _release_args(p, release=True)
    p.set_defaults(func=_cmd_release)
    lg = sub.add_parser("ledger", help="create, inspect and audit a ledger").add_subparsers(
        dest="action", required=True
    )
    for name, func, help_ in (
        ("init", _cmd_init, "create a new, empty ledger for a policy"),
        ("show", _cmd_show, "spend and remaining budget per epoch and region"),
        ("verify", _cmd_verify, "hash chain, recorded policies, every ε re-derived via OpenDP"),
        ("export", _cmd_export, "entries as JSON lines"),
        ("lifetime", _cmd_lifetime, "a client's total loss over all epochs"),
        ("migrate", _cmd_migrate, "upgrade a schema-1 or -2 ledger in place (keeps hashes)"),
    ):
        p = lg.add_parser(name, help=help_)
        _ledger_args(p)
        p.set_defaults(func=func)
        if name == "export":
            p.add_argument("--out", help="file to write (default stdout); never the ledger")
            p.add_argument("--force", action="store_true", help="replace an existing --out file")
        if name == "verify":
            p.add_argument("--expected-head", help="ENTRY_ID:HASH recorded outside the database")
        if name == "lifetime":
            p.add_argument("--region", default=ALL, help="a region, or '*' for the worst")
            p.add_argument("--delta", type=float, help="δ for the (ε, δ) views (default: policy's)")
    _register_subcommands(sub)
    return parser


def _register_subcommands(sub: Any) -> None:
    """Planning, calibration, the demo and the service live in their own modules."""
    from dpledger.cli import demo, plan, service

    plan.register(sub)
    demo.register(sub)
    service.register(sub)


def _warn(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    print(f"dpledger: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code (0 ok, 1 refused, 2 input error, 3 internal)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv  # accepted anywhere on the line
    args = build_parser().parse_args([a for a in argv if a != "--debug"])
    args.debug = debug
    shown = warnings.showwarning
    warnings.showwarning = _warn
    try:
        code: int = args.func(args)
    except ReleaseRefused as e:
        if e.verdict is None:
            print(f"dpledger: error: {e}", file=sys.stderr)
            return EXIT_ERROR
        print(verdict_text(e.verdict), file=sys.stderr)
        return EXIT_REFUSED
    except InternalError as e:
        return _internal(e, args.debug)
    except DpLedgerError as e:
        print(f"dpledger: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        return _internal(e, args.debug)
    finally:
        warnings.showwarning = shown
    return code


def _internal(e: BaseException, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    print(
        f"dpledger: internal error: {type(e).__name__}: {e}\nthis is a dpledger bug: please "
        "report it (rerun with --debug for the traceback)",
        file=sys.stderr,
    )
    return EXIT_INTERNAL

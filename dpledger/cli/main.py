"""The ``dpledger`` command: check, release, audit the ledger; plan, calibrate, demo.

Exit codes make it a CI gate: 0 approved/ok; 1 refused, failed verification, or a committed
result not delivered (standard output closed or full: standard error says what was committed
and how to read it back); 2 usage or input error; 3 internal error (a dpledger bug;
``--debug`` shows the traceback); 130 Ctrl-C, 143 SIGTERM (after a commit, standard error
says what it spent). Reading commands (``check``, ``ledger show|verify|export|lifetime``)
open an existing ledger only; a ledger is created by ``release`` or ``ledger init``."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dpledger._files import (
    check_path_text,
    check_sqlite_name,
    check_unpadded,
    postgres_url,
    read_bounded,
    strict_json,
)
from dpledger._npy import TooManyValues, load_npy
from dpledger._printed import outward, value_with_bar
from dpledger._shown import shown
from dpledger.approval import ReleaseRequest, Verdict
from dpledger.cli import interruption
from dpledger.cli.argtypes import Parser, UsageError, ascii_float, ascii_int, join_negative_numbers
from dpledger.cli.output import Undelivered, json_text, say, write_out
from dpledger.errors import (
    DpLedgerError,
    InternalError,
    InvalidInput,
    ReleaseRefused,
    error_code,
)
from dpledger.ledger import Ledger, Release
from dpledger.policy import ALL, Policy
from dpledger.service.store import default_location
from dpledger.types import Mode

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_UNDELIVERED",
    "MAX_AGGREGATE_VALUES",
    "at_args",
    "build_parser",
    "committed_but_undelivered",
    "json_error",
    "load_aggregate",
    "main",
]

EXIT_OK, EXIT_REFUSED, EXIT_ERROR, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_UNDELIVERED = EXIT_REFUSED
"""Committed (or done) but the result could not be written: the same code as a refusal."""
_INTERRUPTED_NOTE = ": it may have been committed: check `dpledger ledger show` (spend) and \
`ledger export` (value) before a rerun (a rerun with the same --release-id never spends twice)"
MAX_AGGREGATE_VALUES = 100_000
"""An aggregate file may hold at most this many numbers (a policy's largest dimension)."""
_HINT = "pass one metric's aggregate, its value or its vector of bins or cells"
_TOO_MANY = (
    f"more than the {MAX_AGGREGATE_VALUES:,} an aggregate may hold (no metric of a policy "
    f"has more): {_HINT}"
)
_MAX_JSON_BYTES = 8 << 20  # 8 MiB: 100,000 numbers in JSON (or .npy) fit several times over


def emit(data: Any, as_json: bool, text: str) -> None:
    """Print ``data`` as sorted JSON with ``--json``, else the human ``text``.

    :class:`Undelivered` if standard output cannot take it (closed, full, reader gone).
    """
    write_out(json_text(data) if as_json else text)


def at_args(policy: str, ledger: str) -> str:
    """``--policy P --ledger L``, quoted for a shell."""
    return f"--policy {shlex.quote(str(policy))} --ledger {shlex.quote(ledger)}"


def committed_but_undelivered(what: str, why: str, detail: str, recover: str) -> int:
    """Say on standard error that ``what`` was committed though its result could not be
    written (``why``), with ``detail`` and how to ``recover`` it; the exit code (1)."""
    say(
        f"dpledger: committed {what}, but the result could not be written to standard "
        f"output ({why}):\n{detail}\n{recover}"
    )
    return EXIT_UNDELIVERED


NO_LEDGER = "no ledger: pass --ledger PATH_OR_URL or set DPLEDGER_URL"


def check_ledger_target(target: str, flag: str = "--ledger") -> str:
    """``target`` if a command may use it as its ledger (or key store); else :class:`InvalidInput`.

    An in-memory SQLite database (``:memory:``, or an SQLite ``file:`` URI) is refused:
    each run would spend from a fresh, throwaway budget, so a release could be repeated
    with new noise and nothing would be recorded (a key store there would hold keys no
    service reads). So is a path with a NUL byte or one that is not UTF-8 (SQLite cannot
    open it), and one named like SQLite's own files (``X-wal``, ``X-shm``, ``X-journal``:
    SQLite would delete or overwrite it as ``X``'s), before anything is created; and one
    with leading or trailing whitespace or a control character (``L.db `` or ``L.db\\r``
    from an ``.env`` file: a new ledger beside ``L.db``, a fresh budget).
    """
    if target.strip() == ":memory:" or target.startswith("file:"):
        raise InvalidInput(
            f"{flag} {target!r} is an in-memory database or an SQLite URI, refused: each "
            "run would start from a fresh, throwaway database and record nothing; pass a "
            "file path or a postgresql:// URL"
        )
    text = check_path_text(target, f"{flag} path")
    check_unpadded(text, f"{flag} path")
    url = postgres_url(text, flag)
    if url is not None:
        return url
    return check_sqlite_name(text, f"{flag} path")


def ledger_target(args: argparse.Namespace) -> str:
    """The ledger ``--ledger`` (or ``$DPLEDGER_URL``) names; there is no default ledger."""
    if not args.ledger:
        raise InvalidInput(NO_LEDGER)
    return check_ledger_target(str(args.ledger))


def open_ledger(args: argparse.Namespace, mode: Mode) -> Ledger:
    """The ledger at ``--ledger`` under ``--policy``; ``mode`` "read" never creates one."""
    target = ledger_target(args)
    if not args.policy:
        raise InvalidInput("no policy: pass --policy FILE or set DPLEDGER_POLICY")
    return Ledger.open(target, Policy.load(args.policy), mode=mode)


def _read_file(path: str, what: str, limit: int) -> bytes:
    """At most ``limit`` bytes of the regular file ``path`` (a FIFO or device is refused)."""
    return read_bounded(
        path, limit, lambda problem: InvalidInput(f"cannot read {what} {path}: {problem}")
    )


_NPY_MAGIC = b"\x93NUMPY"
"""The bytes every ``.npy`` file starts with (numpy's format)."""


def _read_json(path: str, what: str, *, numbers: bool = False) -> Any:
    data = _read_file(path, what, _MAX_JSON_BYTES)
    if data.startswith(_NPY_MAGIC):  # else "not valid JSON (… can't decode byte 0x93 …)"
        do = (
            "name it with the .npy suffix (lower case) to read it as one"
            if what == "aggregate"
            else f"a {what} is a JSON file"
        )
        raise InvalidInput(f"cannot read {what} {path}: this is an .npy file, not JSON: {do}")
    try:
        return strict_json(data.decode("utf-8-sig"), numbers=numbers)  # a BOM is not JSON
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidInput(f"cannot read {what} {path}: not valid JSON ({e})") from None
    except RecursionError:
        raise InvalidInput(f"cannot read {what} {path}: JSON nested too deeply") from None


def load_aggregate(path: str) -> Any:
    """An aggregate from ``.npy`` or JSON (a number or a list of numbers), unvalidated:
    the ledger's checks read it by type (JSON ``true`` beside numbers is refused there as
    a lone ``true`` is, not promoted to 1 here; audit 6, G3).

    Sizes are checked before allocating: at most :data:`MAX_AGGREGATE_VALUES` numbers.
    """
    p = Path(path)
    if p.suffix == ".npy":
        data = _read_file(path, "aggregate", _MAX_JSON_BYTES)
        try:  # the header checked before allocating (dpledger._npy)
            return load_npy(data, MAX_AGGREGATE_VALUES)
        except TooManyValues as e:
            raise InvalidInput(f"cannot read aggregate {path}: it {e}; {_HINT}") from None
        except ValueError as e:
            raise InvalidInput(f"cannot read aggregate {path}: it {e}") from None
    data = _read_json(path, "aggregate", numbers=True)
    try:
        arr = np.asarray(data)
    except (ValueError, TypeError) as e:
        raise InvalidInput(f"cannot read aggregate {path}: not an array of numbers ({e})") from None
    if arr.size > MAX_AGGREGATE_VALUES:
        raise InvalidInput(f"aggregate {path} holds {arr.size:,} values, {_TOO_MANY}")
    return data


def _request(args: argparse.Namespace) -> ReleaseRequest:
    fields: dict[str, Any] = {}
    if args.request is not None:
        if not args.request:
            raise InvalidInput("--request needs a file name, got an empty one")
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
    rows = [f"  {c.status:<7} {c.name:<{width}}  {c.reason}" for c in v.checks]
    return "\n".join([v.summary(), "", *rows])


def release_text(r: Release) -> str:
    """The released value with its bar and charge."""
    v = r.value  # every value, never numpy's "..." summary past 1,000 of them: ε was spent
    # to a unit its bar can see, the bar rounded up (review 42: .6g rounded more than it)
    bar = outward(r.error_bar, ".6g", True)
    if isinstance(v, float):
        value = value_with_bar(v, r.error_bar, 6, 6)[0]
    else:  # each coordinate with numpy's former 4 decimals at least
        each = {"float_kind": lambda x: value_with_bar(x, r.error_bar, 6, 6, 4)[0]}
        value = np.array2string(v, threshold=sys.maxsize, formatter=each)  # type: ignore[arg-type]
    where = (
        f"on the sum; the value is the sum / {r.request.cohort}"
        if r.kind == "scalar_mean"
        else "per coordinate"
    )
    rid = f", release id {r.release_id}" if r.release_id else ""
    charged = (
        f"  retry     recorded earlier as entry {r.entry_id} ({r.unit} {r.charge.text} "
        f"charged then); charged now: 0"
        if r.retried
        else f"  charged   {r.unit} = {r.charge.text}"
    )
    return (
        f"entry {r.entry_id}: {r.request.metric} (epoch {r.request.epoch}, "
        f"region {r.request.region}, n={r.request.cohort}{rid})\n"
        f"  value     {value}\n  ± {r.bar:<7} {bar}\n"
        f"  scale     {r.scale:.6g} ({r.facts.mechanism} noise {where})\n{charged}"
    )


def _cmd_check(args: argparse.Namespace) -> int:
    request, aggregate = _request(args), load_aggregate(args.aggregate)
    with open_ledger(args, "read") as ledger:
        v = ledger.check(request, aggregate)
    emit(v.as_dict(), args.json, verdict_text(v))
    return EXIT_OK if v.approved else EXIT_REFUSED


def _cmd_release(args: argparse.Namespace) -> int:
    request, aggregate = _request(args), load_aggregate(args.aggregate)
    if not args.aggregate_error >= 0.0:  # checked before anything is spent
        raise InvalidInput(f"--aggregate-error must be >= 0, got {shown(args.aggregate_error)}")
    r: Release | None = None
    try:
        with open_ledger(args, "create") as ledger:
            new, where = not ledger.exists, ledger.location
            try:
                args.interrupted = _INTERRUPTED_NOTE  # a Ctrl-C from here may follow a commit
                r = ledger.release(request, aggregate)
            except ReleaseRefused as e:
                if e.verdict is None:
                    raise
                emit(e.verdict.as_dict(), args.json, verdict_text(e.verdict))
                return EXIT_REFUSED
            r = r.with_aggregate_error(args.aggregate_error)
            if new:  # a mistyped --ledger would start a new budget history: say so
                say(f"dpledger: created a new ledger at {where}")
        emit(r.as_dict(), args.json, release_text(r))
    except (Undelivered, KeyboardInterrupt) as e:  # the ε is spent: never lose the value
        if r is None:
            raise  # nothing was committed (a Ctrl-C mid-release: main says how to check)
        undelivered = isinstance(e, Undelivered)  # or Ctrl-C after the commit (review 41)
        retry = f"; a retry with --release-id {r.release_id} returns the same value"
        committed_but_undelivered(
            "a release (ε charged)",
            e.why if isinstance(e, Undelivered) else f"it was {interruption(e)[0]}",
            release_text(r),
            f"The ε is spent and the value is recorded in entry {r.entry_id}: read it back "
            f"with `dpledger ledger export {at_args(args.policy, where)}` ({_output_is(r)}; "
            f"`dpledger ledger show` shows the spend){retry if r.release_id else ''}. Do not "
            "release it again.",
        )
        return EXIT_UNDELIVERED if undelivered else interruption(e)[1]
    return EXIT_OK


def _output_is(r: Release) -> str:
    """What an exported entry's "output" is, against the value this release printed."""
    if r.kind == "scalar_mean":
        n = r.request.cohort
        return f'its "output" is [the noisy sum]: the value is output[0] / cohort = output[0] / {n}'
    return 'its "output" is the value, the noisy vector'


def ledger_args(p: argparse.ArgumentParser) -> None:
    """``--policy``, ``--ledger`` and ``--json``: what every command on a ledger takes."""
    p.add_argument(
        "--policy",
        default=os.environ.get("DPLEDGER_POLICY"),
        help="policy TOML (or $DPLEDGER_POLICY)",
    )
    p.add_argument(
        "--ledger",
        default=os.environ.get("DPLEDGER_URL") or None,
        help="SQLite path or postgresql:// URL (or $DPLEDGER_URL; required)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _release_args(p: argparse.ArgumentParser, *, release: bool) -> None:
    ledger_args(p)
    p.add_argument("--request", help="JSON file with the request fields (flags override)")
    p.add_argument("--epoch", type=ascii_int)
    p.add_argument("--metric")
    p.add_argument("--region", help=f"a region, or {ALL!r} for a global release (required)")
    p.add_argument(
        "--cohort", type=ascii_int,
        help="a public cohort: clients (records under a record-level policy) summed into the "
        "aggregate under replace; under add_remove the planned cohort fixed before the round "
        "(at or above the expected count; never truncate to it), never the count of who "
        "reported",
    )  # fmt: skip
    p.add_argument("--edges-version", dest="edges_version")
    p.add_argument("--policy-version", dest="policy_version")
    if release:
        p.add_argument(
            "--release-id",
            dest="release_id",
            help="idempotency key: a retry with the same id returns the recorded release",
        )
        p.add_argument(
            "--aggregate-error", dest="aggregate_error", type=ascii_float, default=0.0,
            help="a public bound on the aggregate's error per coordinate, added to the bar "
            "(a fixed-point secure sum of n clients: FixedPoint.sum_error(n))",
        )  # fmt: skip
    p.add_argument(
        "--aggregate", required=True, help="the secure sum: .json (number or list) or .npy"
    )


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (subcommands from planning and the demo included)."""
    parser = Parser(prog="dpledger", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help="dry-run every approval check; spend nothing")
    _release_args(p, release=False)
    p.set_defaults(func=_cmd_check)
    p = sub.add_parser("release", help="check, spend, add OpenDP noise, record")
    _release_args(p, release=True)
    p.set_defaults(func=_cmd_release)
    _register_subcommands(sub)
    return parser


def _register_subcommands(sub: Any) -> None:
    """The ledger actions, planning, calibration, the demo and the service: own modules."""
    from dpledger.cli import demo, ledger, plan, service

    ledger.register(sub)
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
    say(f"dpledger: warning: {message}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code (0 ok, 1 refused or undelivered, 2 input error,
    3 internal, 130 Ctrl-C, 143 SIGTERM)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv  # accepted anywhere on the line
    try:
        args = build_parser().parse_args(join_negative_numbers([a for a in argv if a != "--debug"]))
    except UsageError as e:  # the usage line is on standard error already
        say(str(e))  # argparse's own words: "dpledger plan: error: …"
        if any(a.startswith("--j") and "--json".startswith(a) for a in argv):  # or --js
            json_error(InvalidInput(str(e)), EXIT_ERROR)
        return EXIT_ERROR
    args.debug = debug
    shown = warnings.showwarning
    warnings.showwarning = _warn
    try:
        if getattr(args, "ledger", None):  # every command's --ledger, before it is used
            _not_written_into(check_ledger_target(str(args.ledger)))
        if hasattr(args, "keys") and (args.keys or args.ledger):  # and the key store, or
            keys = args.keys or default_location(str(args.ledger))  # the ledger's (review 41)
            _not_written_into(check_ledger_target(str(keys), "--keys"))
        code: int = args.func(args)
    except ReleaseRefused as e:
        if e.verdict is None:
            return _error(args, e)
        say(verdict_text(e.verdict))
        if getattr(args, "json", False):
            json_error(e, EXIT_REFUSED, verdict=e.verdict.as_dict())
        return EXIT_REFUSED
    except InternalError as e:
        return _internal(e, args)
    except DpLedgerError as e:
        return _error(args, e)
    except Undelivered as e:  # nothing was committed: only the output is lost
        if e.broken_pipe:  # the reader went away (`| head`): stop quietly
            return EXIT_OK
        say(f"dpledger: error: the result could not be written: {e.why}")
        return EXIT_UNDELIVERED
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt as e:  # before a commit, or one whose outcome is unknown
        say(f"dpledger: {interruption(e)[0]}{getattr(args, 'interrupted', '')}")  # may commit
        return interruption(e)[1]
    except Exception as e:
        return _internal(e, args)
    finally:
        warnings.showwarning = shown
    return code


def _not_written_into(target: str) -> None:
    """Refuse (InvalidInput) a database file that standard output or error is redirected
    into (``>> L.db``, ``2>> L.db-wal``): every result or message would be written into
    the ledger. The stream is pointed at the null device first, so not even the refusal
    is (review 40)."""
    if "://" in target:
        return
    for fd, stream in ((1, "standard output"), (2, "standard error")):
        with contextlib.suppress(OSError):
            out = os.fstat(fd)
            for name in (target, *(target + s for s in ("-wal", "-shm", "-journal"))):
                with contextlib.suppress(OSError):
                    st = os.stat(name)
                    if (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino):
                        null = os.open(os.devnull, os.O_WRONLY)
                        os.dup2(null, fd)
                        os.close(null)
                        raise InvalidInput(
                            f"{stream} is redirected into {name}, the database itself: every "
                            "result would be written into it (with '>', the shell emptied it "
                            "before dpledger ran: restore it from a backup); redirect it to "
                            "another file"
                        )


def _error(args: argparse.Namespace, e: DpLedgerError) -> int:
    """An input error: one line on standard error (and, with ``--json``, a JSON object)."""
    say(f"dpledger: error: {e}")
    if getattr(args, "json", False):
        json_error(e, EXIT_ERROR)
    return EXIT_ERROR


def json_error(e: BaseException, code: int, **extra: Any) -> None:
    """With ``--json``, an error too is a JSON object on standard output (the service's
    ``{error, message}`` shape and the exit code), so a JSON reader never gets nothing."""
    with contextlib.suppress(Undelivered):
        write_out(json_text({"error": error_code(e), "message": str(e), "exit_code": code,
                             **extra}))  # fmt: skip


def _internal(e: BaseException, args: argparse.Namespace) -> int:
    if args.debug:
        traceback.print_exc()
    say(
        f"dpledger: internal error: {type(e).__name__}: {e}\nthis is a dpledger bug: please "
        "report it (rerun with --debug for the traceback)"
    )
    if getattr(args, "json", False):
        json_error(e, EXIT_INTERNAL)
    return EXIT_INTERNAL

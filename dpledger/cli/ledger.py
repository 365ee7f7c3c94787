"""``dpledger ledger``: create, inspect, audit and migrate a ledger.

``init`` creates a ledger for a policy; ``show``, ``verify``, ``export`` and ``lifetime``
read an existing one only (they never create or change it); ``migrate`` upgrades an old
schema in place, keeping every hash. Exit codes are :mod:`dpledger.cli.main`'s.
"""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dpledger import _sqlite_files as sqlite_files
from dpledger._files import SQLITE_SIDECARS, names_directory, write_replacing
from dpledger._printed import outward
from dpledger.accounting import (
    PLD_MAX_EPSILON,
    PLD_MIN_EPSILON,
    PLD_MIN_GRID_STEPS,
    pld_installed,
)
from dpledger.cli.argtypes import ascii_fraction
from dpledger.cli.main import (
    EXIT_OK,
    EXIT_REFUSED,
    at_args,
    committed_but_undelivered,
    emit,
    json_error,
    ledger_args,
    ledger_target,
    open_ledger,
)
from dpledger.cli.output import Undelivered, json_text, say, write_out
from dpledger.errors import (
    InvalidInput,
    LedgerCorrupted,
    LedgerSchemaUnsupported,
    MigrationRefused,
    NotALedger,
    StoreError,
)
from dpledger.ledger import Ledger
from dpledger.ledger.lifetime import Lifetime
from dpledger.ledger.records import Entry, VerifyReport, is_chain_hash
from dpledger.ledger.regions import epoch_budgets
from dpledger.ledger.sqlite_errors import is_damage
from dpledger.policy import ALL

__all__ = ["register"]

_SQLITE_HEADER = b"SQLite format 3\x00"


def register(subparsers: Any) -> None:
    """Add ``dpledger ledger`` and its actions to the command's ``subparsers``."""
    actions = subparsers.add_parser(
        "ledger", help="create, inspect and audit a ledger"
    ).add_subparsers(dest="action", required=True)
    for name, func, help_ in (
        ("init", _cmd_init, "create a new, empty ledger for a policy"),
        ("show", _cmd_show, "spend and remaining budget per epoch and region"),
        ("verify", _cmd_verify, "hash chain, recorded policies, every ε re-derived via OpenDP"),
        ("export", _cmd_export, "entries as JSON lines"),
        ("lifetime", _cmd_lifetime, "a client's (record-level: a person's) loss over all epochs"),
        (
            "migrate",
            _cmd_migrate,
            "upgrade a schema-1, -2 or -3 ledger in place (keeps hashes) or re-create its "
            "dropped triggers",
        ),
    ):
        p = actions.add_parser(name, help=help_)
        ledger_args(p)
        p.set_defaults(func=func)
        if name == "export":
            p.add_argument("--out", help="file to write (default stdout); never the ledger")
            p.add_argument("--force", action="store_true", help="replace an existing --out file")
        if name == "verify":
            p.add_argument("--expected-head", help="ENTRY_ID:HASH recorded outside the database")
        if name == "lifetime":
            p.add_argument("--region", default=ALL, help="a region, or '*' for the worst")
            p.add_argument(
                "--delta", type=ascii_fraction, help="δ for the (ε, δ) views (default: policy's)"
            )


def _cmd_init(args: argparse.Namespace) -> int:
    with open_ledger(args, "create") as ledger:
        created = ledger.init()
        where, name, version = ledger.location, ledger.policy.name, ledger.policy.version
    verb = "created" if created else "already exists:"
    text = f"{verb} ledger {where} for policy {name} (opened with version {version})"
    try:
        emit({"created": created, "ledger": where, "policy": name}, args.json, text)
    except Undelivered as e:
        if not created:
            raise  # nothing was committed: only the output is lost
        return committed_but_undelivered(
            "a new ledger",
            e.why,
            text,
            f"`dpledger ledger show {at_args(args.policy, where)}` shows it.",
        )
    return EXIT_OK


def _cmd_migrate(args: argparse.Namespace) -> int:
    from dpledger.ledger.migrate import migrate

    try:
        done = migrate(ledger_target(args))
    except MigrationRefused as e:  # it fails its own schema's checks: nothing was changed
        say(f"dpledger: migration refused: {e}")
        if args.json:
            json_error(e, EXIT_REFUSED)
        return EXIT_REFUSED
    head, restored = f"{done.head[0]}:{done.head[1]}", ", ".join(done.restored)
    text = (
        f"migrated {done.location} from schema {done.from_version} to {done.to_version}: "
        f"{done.entries} entries kept, chain head {head} unchanged (recorded anchors stay "
        "valid)"
        + (f"; dpledger's own trigger(s) {restored} re-created (missing)" if restored else "")
        + "; check it with `dpledger ledger verify`"
        if done.from_version != done.to_version
        else f"re-created dpledger's own trigger(s) {restored} in "
        f"{done.location} (it verified without them: {done.entries} entries, chain head "
        f"{head}); writers open it again"
        if done.restored
        else f"{done.location} is already at schema {done.to_version}: nothing to do"
    )
    try:
        emit({**done.as_dict(), "changed": done.changed}, args.json, text)
    except Undelivered as e:
        if not done.changed:
            raise  # nothing was committed: only the output is lost
        return committed_but_undelivered("the migration", e.why, text, "Nothing more to do.")
    return EXIT_OK


def _unit_view(ledger: Ledger) -> str:
    """The epoch budget in its unit; under zCDP with its (ε, δ) view."""
    p = ledger.policy
    who = "client" if p.privacy_unit == "client" else "person (record unit)"
    if p.unit == "epsilon":
        return f"ε_eval {p.eval_budget} per {who} per epoch (pure DP)"
    from dpledger.accounting import zcdp_epsilon

    eps = zcdp_epsilon(p.eval_budget, p.delta)
    d = _delta_text(p.delta)  # not :g, which showed δ = 0.12345678 as 0.123457 (review 42)
    return f"ρ_eval {p.eval_budget} per {who} per epoch (zCDP; ≈ ε {eps:.4g} at δ = {d})"


_PAGE = 2000
"""Entries a read holds decoded at once (a whole 10^5-entry ledger took ~300 MB)."""


def _paged(ledger: Ledger) -> Iterator[Entry]:
    """Every entry in chain order, read :data:`_PAGE` at a time."""
    after = 0
    while page := ledger.entries(after=after, limit=_PAGE):
        yield from page
        after = page[-1].entry_id


def _cmd_show(args: argparse.Namespace) -> int:
    with open_ledger(args, "read") as ledger:
        epochs = sorted({e.draft.epoch for e in _paged(ledger)})  # a damaged one: exit 2
        rows = [  # the epochs' own (bound) policies' regions and budgets; the epoch's spend
            # read once, not once per region: quadratic with open regions (review 42)
            {"epoch": epoch, "region": region, "spent": spent.text, "remaining": left.text}
            for epoch in epochs
            for region, spent, left in epoch_budgets(ledger, epoch)
        ]
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
    emit(
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
    if args.expected_head is not None:
        seq, _, digest = args.expected_head.partition(":")
        if not (seq.isascii() and seq.isdigit() and len(seq) <= 19 and is_chain_hash(digest)):
            raise InvalidInput("--expected-head takes ENTRY_ID:HASH (a release's entry_hash)")
        anchor = (int(seq), digest)  # Ledger.verify reads hex in either case
    try:
        with open_ledger(args, "read") as ledger:
            report = ledger.verify(expected_head=anchor)
    except (LedgerSchemaUnsupported, NotALedger):
        raise  # not damage: the wrong path, or migrate / upgrade first (exit 2)
    except LedgerCorrupted as e:  # truncated or damaged: it fails verification
        report = VerifyReport(entries_checked=0, problems=(str(e),))
    except StoreError as e:
        if not is_damage(e):
            raise  # locked, unreachable: no verdict on the ledger (exit 2)
        report = VerifyReport(entries_checked=0, problems=(str(e),))
    text = f"verified {report.entries_checked} entries: " + (
        "ok" if report.ok else "FAILED\n" + "\n".join(f"  - {p}" for p in report.problems)
    )
    text += "".join(f"\n  notice: {x}" for x in report.notices)
    emit(
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


def _same_file(a: Path, b: str | None) -> bool:
    return bool(b) and a.exists() and Path(str(b)).exists() and a.samefile(str(b))


def _export_target(args: argparse.Namespace) -> Path:
    """Where ``--out`` may write: never the ledger, its policy or any SQLite database (a
    ledger or key store, even with --force), never a name SQLite gives a file beside an
    existing one (``X-wal`` beside ``X``), never an existing file without --force."""
    if not args.out:
        raise InvalidInput("--out needs a file name (leave --out out to write to stdout)")
    if "\x00" in args.out:
        raise InvalidInput(f"--out {args.out!r} contains a NUL byte: name a real file")
    out = Path(args.out)
    ledger = ledger_target(args)
    ledger_files = [ledger + s for s in ("", "-wal", "-shm", "-journal")]
    try:
        if any(_same_file(out, f) for f in ledger_files):
            raise InvalidInput(f"--out {out} is the ledger itself: choose another file")
        suffix = next((s for s in SQLITE_SIDECARS if out.name.lower().endswith(s)), "")
        base = out.with_name(out.name[: -len(suffix)]) if suffix else None
        if base is not None and base.name and base.is_file():
            raise InvalidInput(
                f"--out {out} is named like SQLite's file beside {base}: SQLite would delete or "
                "overwrite it whenever that database is used; choose another name"
            )
        if _same_file(out, args.policy):
            raise InvalidInput(f"--out {out} is the --policy file: choose another file")
        if out.is_dir() or names_directory(args.out):  # Path drops a trailing slash or /.
            raise InvalidInput(f"--out {args.out} is a directory: name a file")
        if out.is_symlink():  # the rename would replace the link, not its file (review 41)
            raise InvalidInput(
                f"--out {out} is a symbolic link (to {os.readlink(out)}): it would be replaced "
                "by a regular file; name the file itself (leave --out out for standard output)"
            )
        if out.exists() and not out.is_file():
            raise InvalidInput(f"--out {out} is not a regular file: name a file")
        if out.exists() and _is_sqlite(out):
            raise InvalidInput(
                f"--out {out} is an SQLite database (a ledger or key store?): never replaced, "
                "even with --force; choose another file"
            )
        if out.exists() and not args.force:
            raise InvalidInput(f"--out {out} exists: pass --force to replace it")
        if not out.parent.is_dir():
            raise InvalidInput(f"--out {out}: the directory {out.parent} does not exist")
    except OSError as e:
        raise InvalidInput(f"--out {out}: {e.strerror}") from None
    return out


def _is_sqlite(p: Path) -> bool:
    """Whether the regular file ``p`` starts with SQLite's header (read, never written;
    a file this process holds open in SQLite is one, and is not read: that would drop
    its locks)."""
    header = sqlite_files.read_header(p, len(_SQLITE_HEADER))
    return header is None or header == _SQLITE_HEADER


def _cmd_export(args: argparse.Namespace) -> int:
    if args.force and args.out is None:  # a flag that would do nothing is a mistake to name
        raise InvalidInput("--force replaces an existing --out file: give --out FILE with it")
    target = _export_target(args) if args.out is not None else None
    with open_ledger(args, "read") as ledger:
        lines = (json_text(e.as_dict(), indent=None) + "\n" for e in _paged(ledger))
        if target is None:  # every entry decodes before a line is printed: a damaged
            for _ in _paged(ledger):  # one prints none (exit 2), as when read whole
                pass
            for line in lines:
                write_out(line.rstrip("\n"), flush=False)
            write_out(None)
            return EXIT_OK
        write_replacing(
            target,
            lambda f: f.writelines(line.encode("utf-8") for line in lines),
            "--out",
        )  # complete or absent; its temporary is new, random and only ever its own
    return EXIT_OK


def _cmd_lifetime(args: argparse.Namespace) -> int:
    with open_ledger(args, "read") as ledger:
        units = sorted({e.privacy_unit for e in ledger.entries()} | {ledger.policy.privacy_unit})
        lives = [ledger.lifetime(args.region, delta=args.delta, privacy_unit=u) for u in units]
    blocks = [_lifetime_text(life, life.views_delta) for life in lives]
    payload = lives[0].as_dict() if len(lives) == 1 else {"by_unit": [x.as_dict() for x in lives]}
    emit(payload, args.json, "\n".join(blocks))
    return EXIT_OK


def _delta_text(delta: float) -> str:
    """δ as short as it reads exactly: ``1e-06``, and ``0.9999999``, not ``1`` (``:g``
    rounds to 6 digits; audit s29, F10)."""
    short = f"{delta:g}"
    return short if float(short) == delta else repr(float(delta))


def _lifetime_text(life: Lifetime, delta: float) -> str:
    up = functools.partial(outward, spec=".6g", up=True)  # bounds: never printed below them
    if life.epsilon_pld is not None:
        pld = up(life.epsilon_pld)
    elif pld_installed():
        pld = (  # pld_epsilon's two refusals: the text cannot tell which (review 44)
            f"none (the loss is outside the accountant's {PLD_MIN_EPSILON:g}–"
            f"{PLD_MAX_EPSILON:g}, or a release's noise spans under {PLD_MIN_GRID_STEPS:g} "
            "steps of OpenDP's output grid)"
        )
    else:
        pld = "not installed (pip install 'dpledger[pld]')"
    who = "a client" if life.privacy_unit == "client" else "one person's records"
    # '*' names the global region; here it means the worst region (audit s29, F10)
    where = (
        "in the worst region of each epoch" if life.region == ALL else f"of region {life.region}"
    )
    head = f"lifetime loss of {who} {where} over {life.releases} releases"
    d = _delta_text(delta)
    if life.method == "basic":
        headline = f"  ε = {life.total.text} (pure DP, exact; δ = 0)"
    else:
        headline = (
            f"  ρ = {life.total.text} (zCDP, exact) → ε = {up(life.epsilon)} at δ = {d} "
            f"({life.method})"
        )
    text = (
        f"{head}\n{headline}\n  (ε, δ = {d}) views: zCDP conversion ε = "
        f"{up(life.epsilon_zcdp)}; PLD ε = {pld}"
    )
    if life.unbounded:
        text += (
            f"\n  NOT BOUNDED for a client: {life.unbounded} record-level release(s) protect "
            "one person's records, not a client's aggregate"
        )
    return text

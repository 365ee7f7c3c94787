"""The ``dpledger serve`` and ``dpledger keys create|revoke|list`` subcommands.

:func:`register` adds them to the main parser. ``keys`` needs only the standard library
(and psycopg for a PostgreSQL ledger); ``serve`` needs the ``service`` extra (FastAPI and
uvicorn) and says how to install it when it is missing. Errors are typed
:class:`~dpledger.errors.DpLedgerError` subclasses, which the main command turns into
exit code 2 (never a traceback).
"""

from __future__ import annotations

import argparse
import getpass
import ipaddress
import logging
import os
import socket
import ssl
import sys
from typing import TYPE_CHECKING, Any

from dpledger._files import check_regular_file, postgres_url, shown_location
from dpledger.cli import interruption
from dpledger.cli.argtypes import ascii_int
from dpledger.cli.main import EXIT_UNDELIVERED, committed_but_undelivered
from dpledger.cli.output import Undelivered, json_text, say, write_out
from dpledger.errors import DpLedgerError, InvalidInput
from dpledger.ledger.schema import recorded_policy
from dpledger.policy import Policy
from dpledger.service.keys import ACTIONS, ApiKey, Scopes
from dpledger.service.store import ServiceStore, default_location

if TYPE_CHECKING:
    from dpledger.ledger.store import SqlStore

__all__ = ["cmd_keys_create", "cmd_keys_list", "cmd_keys_revoke", "cmd_serve", "register"]


def _read_store(location: str) -> SqlStore:
    """The ledger at ``location`` opened to read; :class:`LedgerNotFound` if there is none."""
    url = postgres_url(location)
    if url is not None:
        from dpledger.ledger.postgres import PostgresStore

        return PostgresStore(url, "read")
    from dpledger.ledger.sqlite import SqliteStore

    return SqliteStore(location, "read")


def _ledger_exists(location: str) -> None:
    """Raise :class:`LedgerNotFound` unless a ledger is at ``location`` (nothing is created)."""
    _read_store(location).close()


def _recorded_policy(location: str) -> Policy | None:
    """The policy of the ledger's newest epoch, as the ledger recorded it (read only).

    None when the ledger has released nothing yet (a policy is recorded with its first
    release). :class:`LedgerNotFound` when there is no ledger.
    """
    store = _read_store(location)
    try:
        epochs = store.epochs() if store.exists() else []
        bound = store.epoch_policy(epochs[-1]) if epochs else None
        body = None if bound is None else store.policy_body(bound[0])
        where = store.location
    finally:
        store.close()
    if bound is None:
        return None
    return recorded_policy(body, bound[0], where)


def _check_names(scopes: Scopes, policy_file: str | None, ledger: str) -> None:
    """Refuse region and metric names the policy does not have (the ledger must exist).

    The policy is ``--policy`` when given, else the one the ledger recorded last; with
    neither, named scopes are refused rather than accepted unchecked.
    """
    names = [r for r in scopes.regions or () if r != "*"] + list(scopes.metrics or ())
    if policy_file:
        _ledger_exists(ledger)
        policy, whose = Policy.load(policy_file), "policy"
        recorded = _recorded_policy(ledger)
        if recorded is not None and recorded.name != policy.name:  # as serve and releases
            raise InvalidInput(
                f"--policy is {policy.name!r}, but the ledger {shown_location(ledger)} is "
                f"bound to {recorded.name!r}: give a version of {recorded.name!r} (or no "
                "--policy, to check against the one it recorded)"
            )
    else:
        recorded = _recorded_policy(ledger)
        if recorded is None:
            if names:
                raise InvalidInput(
                    f"cannot check the names {names}: the ledger {shown_location(ledger)} has "
                    "released nothing yet, so it has no recorded policy; pass --policy FILE (the "
                    "policy the service will serve)"
                )
            return
        policy, whose = recorded, "the ledger's recorded policy"
    unknown = [r for r in scopes.regions or () if r != "*" and not policy.regions.admits(r)]
    unknown += [m for m in scopes.metrics or () if m not in policy.metrics]
    if unknown:
        hint = "" if policy_file else "; if a newer policy version has them, pass --policy FILE"
        raise InvalidInput(f"not in {whose} {policy.name} {policy.version}: {unknown}{hint}")


def _keys_location(args: argparse.Namespace) -> str:
    if not args.ledger:
        raise InvalidInput("no ledger: pass --ledger PATH_OR_URL or set DPLEDGER_URL")
    return str(args.keys or default_location(args.ledger))


def _owner(args: argparse.Namespace) -> str | None:
    """The ledger whose default key store is opened (None when ``--keys`` names one)."""
    return None if args.keys else str(args.ledger)


def _key_line(k: ApiKey) -> str:
    scopes = k.scopes
    regions = "any" if scopes.regions is None else ",".join(scopes.regions)
    metrics = "any" if scopes.metrics is None else ",".join(scopes.metrics)
    state = f"revoked {k.revoked_at}" if k.revoked_at else "active"
    return (
        f"{k.key_id}  {k.name:<20} {','.join(scopes.actions):<28} regions={regions} "
        f"metrics={metrics}  created {k.created_at[:19]}  {state}"
    )


def _scopes(args: argparse.Namespace) -> Scopes:
    actions = tuple(args.action or ())
    spends = bool({"check", "release"} & set(actions))
    if args.any_region and args.region:
        raise InvalidInput("give --region names or --any-region, not both")
    if args.any_metric and args.metric:
        raise InvalidInput("give --metric names or --any-metric, not both")
    if not spends and (args.region or args.metric or args.any_region or args.any_metric):
        raise InvalidInput(  # listed as "regions=na", it would read as a limit it is not
            f"--region/--metric scope only check and release; a key for {', '.join(actions)} "
            "reads every region and metric: leave them out (or add --action check/release)"
        )
    if spends and not (args.region or args.any_region):
        raise InvalidInput(
            "a key that may check or release needs its regions: --region NAME (repeat; "
            "'*' allows the global release) or --any-region"
        )
    if spends and not (args.metric or args.any_metric):
        raise InvalidInput(
            "a key that may check or release needs --metric NAME (repeat) or --any-metric"
        )
    regions = None if args.any_region or not args.region else tuple(args.region)
    metrics = None if args.any_metric or not args.metric else tuple(args.metric)
    return Scopes(actions, regions, metrics)


def cmd_keys_create(args: argparse.Namespace) -> int:
    """``dpledger keys create``: print a new key once (stdout); its record goes to stderr."""
    scopes = _scopes(args)
    location = _keys_location(args)  # no --ledger: named before anything reads it
    _check_names(scopes, args.policy, args.ledger)
    with ServiceStore.open(location, create=True, ledger=_owner(args)) as store:
        args.interrupted = (  # a Ctrl-C from here on may follow the key's commit (main says)
            f": a key named {args.name!r} may have been created and never shown: find it with "
            "`dpledger keys list` and revoke it with `dpledger keys revoke KEY_ID`"
        )
        made, record = store.create_key(args.name, scopes)
        where = store.location
        try:
            if args.json:
                shown = {"key": made.token, **record.as_dict()}
                write_out(json_text(shown))
            else:
                write_out(made.token)
        except Undelivered as e:
            return _unshown_key(store, record, e.why)
        except KeyboardInterrupt as e:  # a key nobody saw is revoked so too (review 41)
            word, code = interruption(e)
            _unshown_key(store, record, f"it was {word}", "create another if needed")
            return code
        args.interrupted = ""  # shown: nothing left to warn of
    say(
        f"dpledger: created key {record.key_id} for {record.name} in {where}:\n  "
        f"{_key_line(record)}\nThis is the only time the key is shown: keep it in a secret "
        "store. Only its salted digest is stored."
    )
    return 0


def _unshown_key(
    store: ServiceStore,
    record: ApiKey,
    why: str,
    then: str = "create another with standard output writable",
) -> int:
    """The new key could not be written, and it is never shown again: nobody can hold it,
    so it is revoked at once (a live secret no one has is only a risk); exit 1.

    The key itself never goes to standard error (often a log).
    """
    try:
        store.revoke(record.key_id)
    except DpLedgerError as e:
        say(
            f"dpledger: created key {record.key_id} for {record.name} in {store.location}, "
            f"but it could not be written to standard output ({why}), and revoking it failed "
            f"({e}): revoke it with `dpledger keys revoke {record.key_id}`, then {then}"
        )
        return EXIT_UNDELIVERED
    say(
        f"dpledger: created key {record.key_id} for {record.name} in {store.location}, but it "
        f"could not be written to standard output ({why}); it is shown only once, so it was "
        f"revoked at once (it works nowhere): {then}"
    )
    return EXIT_UNDELIVERED


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    """``dpledger keys revoke KEY_ID``: the key stops working at once, on every replica."""
    with ServiceStore.open(_keys_location(args), ledger=_owner(args)) as store:
        record = store.revoke(args.key_id)
    text = f"revoked {record.key_id} ({record.name}) at {record.revoked_at}"
    if args.json:
        text = json_text(record.as_dict())
    try:
        write_out(text)
    except Undelivered as e:
        return committed_but_undelivered("a revocation", e.why, text, "Nothing more to do.")
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    """``dpledger keys list``: every key's id, name, scopes and state (never a secret)."""
    with ServiceStore.open(_keys_location(args), read_only=True, ledger=_owner(args)) as store:
        records = store.list_keys()
    if args.json:
        write_out(json_text([k.as_dict() for k in records]))
    else:
        write_out("\n".join(_key_line(k) for k in records) or "no keys")
    return 0


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: any free port)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as e:
        raise InvalidInput(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.set_inheritable(True)
    return sock


_MAX_TLS_BYTES = 1 << 20
"""A PEM certificate chain or key larger than this (1 MiB) is refused unread."""


def _check_tls(cert: str, key: str) -> str | None:
    """Load the certificate and key now, so a bad one is an input error before any bind.

    Each must be a regular file of at most :data:`_MAX_TLS_BYTES` (a FIFO or device would
    hang or exhaust the loader), checked before OpenSSL opens it. An encrypted key's
    passphrase is asked for once, here, and returned for the server's own load (which
    would otherwise ask again: review 40); None for a key without one.
    """
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):

        def fail(problem: str, f: str = flag, p: str = path) -> InvalidInput:
            return InvalidInput(f"{f} {p}: {problem}")

        check_regular_file(path, _MAX_TLS_BYTES, fail)
    asked: list[str] = []

    def passphrase() -> str:
        if not asked:
            try:
                asked.append(getpass.getpass(f"Enter PEM pass phrase for {key}: "))
            except EOFError:
                raise InvalidInput(
                    f"--tls-key {key} is encrypted: no pass phrase was given"
                ) from None
        return asked[0]

    try:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key, password=passphrase)
    except (OSError, ssl.SSLError) as e:
        why = e.strerror or getattr(e, "reason", None) or e
        raise InvalidInput(
            f"cannot use --tls-cert {cert} with --tls-key {key}: {why}; pass a PEM "
            "certificate and its PEM private key"
        ) from None
    return asked[0] if asked else None


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def cmd_serve(args: argparse.Namespace) -> int:
    """``dpledger serve``: the HTTP service in front of one ledger (runs until Ctrl-C)."""
    try:
        import uvicorn

        from dpledger.service.app import create_app
        from dpledger.service.state import Settings
    except ImportError as e:
        raise InvalidInput(
            f"dpledger serve needs the service extra ({e.name} is missing): "
            "pip install 'dpledger[service]'"
        ) from None
    if not args.policy:
        raise InvalidInput("no policy: pass --policy FILE or set DPLEDGER_POLICY")
    if not args.ledger:
        raise InvalidInput("no ledger: pass --ledger PATH_OR_URL or set DPLEDGER_URL")
    if (args.tls_cert is None) != (args.tls_key is None):
        raise InvalidInput("HTTPS needs both --tls-cert and --tls-key")
    if args.tls_cert == "" or args.tls_key == "":
        raise InvalidInput("--tls-cert and --tls-key need file names, got an empty one")
    if not 0 <= args.port <= 65535:  # the OS would silently take it modulo 65536
        raise InvalidInput(f"--port must lie in [0, 65535] (0: any free port), got {args.port}")
    passphrase = None if args.tls_cert is None else _check_tls(args.tls_cert, args.tls_key)
    _ledger_exists(args.ledger)  # name a missing ledger before its missing key store
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = Settings(
        ledger=args.ledger,
        policy=Policy.load(args.policy),
        keys=args.keys,
        connections=args.connections,
        max_body_bytes=args.max_body_bytes,
    )
    app = create_app(settings)
    sock = _listen(args.host, args.port)
    host, port = sock.getsockname()[:2]
    scheme = "https" if args.tls_cert else "http"
    shown = f"[{host}]" if ":" in host else host
    print(
        f"dpledger: serving {app.state.service.location} at {scheme}://{shown}:{port}/ "
        f"(keys in {shown_location(settings.keys_location)}; Ctrl-C stops)",
        file=sys.stderr,
        flush=True,
    )
    if scheme == "http" and not _loopback(args.host):
        print(
            "dpledger: warning: plain HTTP on a non-loopback address sends API keys in clear "
            "text: put TLS in front (a proxy) or pass --tls-cert/--tls-key",
            file=sys.stderr,
        )
    config = uvicorn.Config(
        app,
        log_level=args.log_level,
        access_log=not args.no_access_log,
        lifespan="on",
        server_header=False,
        ssl_certfile=args.tls_cert,
        ssl_keyfile=args.tls_key,
        ssl_keyfile_password=passphrase,
        timeout_graceful_shutdown=10,
    )
    quiet = _CutShort()  # SIGTERM is uvicorn's: the console script leaves serve's alone
    logging.getLogger("uvicorn.error").addFilter(quiet)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        logging.getLogger("uvicorn.error").removeFilter(quiet)
        sock.close()
        app.state.service.close()
    return 0


class _CutShort(logging.Filter):
    """uvicorn logs a shutdown cut short by a second Ctrl-C with the Python traceback of
    the lifespan's CancelledError: one line instead (the CLI shows no traceback)."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if text.startswith("Traceback") and text.rstrip().endswith("CancelledError"):
            record.msg, record.args, record.exc_info = _CUT_SHORT, (), None
        return True


_CUT_SHORT = (
    "shutdown cut short by a second Ctrl-C: requests still open were dropped (a release "
    "retried with its release_id never spends twice)"
)


def _store_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ledger",
        default=os.environ.get("DPLEDGER_URL"),
        help="the ledger: SQLite path or postgresql:// URL (or $DPLEDGER_URL)",
    )
    p.add_argument(
        "--keys",
        help="the key store (default: L.keys.db beside a SQLite ledger L.db; the same "
        "database for PostgreSQL)",
    )


def register(subparsers: Any) -> None:
    """Add ``serve`` and ``keys`` to the main parser's subcommands."""
    p = subparsers.add_parser("serve", help="the HTTP service: approve releases for many teams")
    _store_args(p)
    p.add_argument(
        "--policy",
        default=os.environ.get("DPLEDGER_POLICY"),
        help="policy TOML (or $DPLEDGER_POLICY)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=ascii_int, default=8000, help="port (8000; 0 picks a free one)")
    p.add_argument("--connections", type=ascii_int, default=4, help="ledger connections (4)")
    p.add_argument(
        "--max-body-bytes", type=ascii_int, default=1 << 20, help="largest request body (1 MiB)"
    )
    p.add_argument("--tls-cert", help="serve HTTPS with this certificate (PEM)")
    p.add_argument("--tls-key", help="… and this private key (PEM)")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    p.add_argument("--no-access-log", action="store_true", help="no per-request log lines")
    p.set_defaults(func=cmd_serve)

    keys = subparsers.add_parser("keys", help="API keys of the service: create, revoke, list")
    sub = keys.add_subparsers(dest="keys_action", required=True)
    c = sub.add_parser("create", help="a new key, shown once")
    _store_args(c)
    c.add_argument("--name", required=True, help="who holds it, e.g. a team (a-z 0-9 . _ -)")
    c.add_argument(
        "--action", action="append", choices=ACTIONS, required=True, help="repeat per action"
    )
    c.add_argument("--region", action="append", help="a region it may check/release (repeat)")
    c.add_argument("--any-region", action="store_true", help="every region, and '*'")
    c.add_argument("--metric", action="append", help="a metric it may check/release (repeat)")
    c.add_argument("--any-metric", action="store_true", help="every metric")
    c.add_argument(
        "--policy",
        help="check the region and metric names against this policy (default: the one "
        "the ledger recorded last; needed before the ledger's first release)",
    )
    c.add_argument("--json", action="store_true", help="machine-readable output")
    c.set_defaults(func=cmd_keys_create)
    r = sub.add_parser("revoke", help="revoke a key now (every replica)")
    _store_args(r)
    r.add_argument(
        "key_id",
        help="the key's id as `keys list` prints it (the <id> in dpl_<id>_…; never the secret)",
    )
    r.add_argument("--json", action="store_true", help="machine-readable output")
    r.set_defaults(func=cmd_keys_revoke)
    ls = sub.add_parser("list", help="every key's id, name, scopes and state")
    _store_args(ls)
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    ls.set_defaults(func=cmd_keys_list)

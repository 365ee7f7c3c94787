"""The service's own state beside the ledger: API keys, the refusal log, page sessions.

This is operator state, not the audit record: keys are revoked (rows change), refusals
are pruned, and none of it is hash-chained or read by :meth:`Ledger.verify`. It is kept
out of the ledger's tables so that nothing the service does outside a release — a
login, a refused request, a revocation — changes a byte of the ledger:

- beside a SQLite ledger ``L.db`` it is its own SQLite file, ``L.keys.db`` (created
  ``0600``); the ledger file is never touched by it;
- beside a PostgreSQL ledger it is three tables (``dpl_svc_meta``, ``dpl_svc_keys``,
  ``dpl_svc_refusals``) in the same database and ``search_path`` schema, so that every
  replica of the service sees the same keys, revocations and refusals at once.

**The refusal log** records, for each refused release and each request refused for
lack of scope: when, the principal, the action, the HTTP status, the error code, the
request's public fields and the *names* of the failed checks. Never an aggregate, a
key, or a check's reason text (an aggregate check's reason may describe the
aggregate). The newest :data:`REFUSALS_KEPT` rows are kept.

Opening never creates: :meth:`ServiceStore.open` with ``create=False`` (what the
service does) refuses a missing store; ``dpledger keys create`` creates it. Like a
ledger, a store is never a path named like SQLite's own files (``…-wal``, ``…-shm``,
``…-journal``), nor opened while such a file beside it is not SQLite's own. A creator
killed half way leaves a temporary file that the next open for creating or writing
removes, a read-only open never (:mod:`dpledger.service.store_files`).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from dpledger import _sqlite_files as sqlite_files
from dpledger._files import check_path_text, check_sqlite_name, postgres_url, redact_url
from dpledger._pg_schema import found_sql, in_own_schema
from dpledger._sqlite_removed import unless_removed
from dpledger.errors import (
    InvalidInput,
    LedgerCorrupted,
    LedgerNotFound,
    StoreError,
    UnknownResource,
)
from dpledger.ledger.sqlite_copy import drop_copy
from dpledger.service import store_files
from dpledger.service.keys import ALGO, ApiKey, NewKey, Scopes, check_name, new_key
from dpledger.service.store_sql import TABLES, statements

__all__ = ["REFUSALS_KEPT", "Refusal", "ServiceStore", "default_location"]

REFUSALS_KEPT = 10_000
"""How many of the newest refusals the log keeps (older ones are pruned)."""
_SCHEMA_VERSION = "1"
_PRUNE_EVERY = 500
_OWNER = "ledger_file"  # the ledger whose default location made a SQLite store
_PG_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('dpledger-service', 0))"
_IN_TEMP = "SELECT 1 FROM pg_class WHERE oid = to_regclass('dpl_svc_meta') AND relpersistence = 't'"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _is_pg(location: str) -> bool:
    return postgres_url(location, "key store location") is not None


def default_location(ledger: str) -> str:
    """Where the service store of ``ledger`` lives: ``L.keys.db`` beside a SQLite ledger
    ``L.db``; the same database for a PostgreSQL ledger."""
    if _is_pg(ledger):
        return ledger
    return str(Path(ledger).with_suffix(".keys.db"))


@dataclass(frozen=True, slots=True)
class Refusal:
    """One refused request, as the operator log keeps it: public fields and check names."""

    at: str  # UTC ISO time; "" when logging: the store stamps it
    principal: str
    action: str
    status: int
    error: str
    epoch: int | None = None
    region: str | None = None
    metric: str | None = None
    cohort: int | None = None
    release_id: str | None = None
    failed: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "at": self.at,
            "principal": self.principal,
            "action": self.action,
            "status": self.status,
            "error": self.error,
            "epoch": self.epoch,
            "region": self.region,
            "metric": self.metric,
            "cohort": self.cohort,
            "release_id": self.release_id,
            "failed_checks": list(self.failed),
        }


def _missing(location: str) -> str:
    return (
        f"no dpledger key store at {location}: create a key first with "
        "`dpledger keys create --ledger LEDGER --name NAME --action ...`"
    )


_SQLITE = statements("?")
_PG = statements("%s")


class ServiceStore:
    """Keys, refusals and page sessions (secret, sign-outs) of a service (thread-safe).

    Open with :meth:`open`. Every statement runs under one lock on one connection.
    """

    def __init__(self, location: str, conn: Any, pg: bool, url: str = "") -> None:
        self.location = location
        self._conn = conn
        self._pg = pg
        self._url = url  # PostgreSQL: to reconnect after the server dropped the session
        self._in_txn = False
        self._copy: Path | None = None  # the private copy read instead (sqlite_copy)
        self._sql = _PG if pg else _SQLITE
        self._lock = threading.Lock()
        self._schema: list[Any] | None = None  # PostgreSQL: where the tables were found
        self._moved: str | None = None  # why no later call may use this store (moved)

    # -- opening ----------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        location: str,
        *,
        create: bool = False,
        read_only: bool = False,
        ledger: str | None = None,
    ) -> ServiceStore:
        """Open the store at ``location`` (a path, or the ledger's PostgreSQL URL).

        ``create=True`` creates it if missing (``dpledger keys create``); otherwise a
        missing store is :class:`LedgerNotFound`, naming the command that creates one.
        A file is checked through a read-only connection before anything may write to it:
        a directory, an empty (0-byte) file or any file that is not a key store is refused
        and left byte-identical, never adopted. ``read_only=True`` (``dpledger keys
        list``) keeps that read-only connection: nothing is written at all.

        ``ledger``: the SQLite ledger whose default store (:func:`default_location`) this
        is. Several ledger names share one (``eval.v1`` and ``eval.v2`` both map to
        ``eval.keys.db``), so a store made there records its ledger's file name, and is
        refused (:class:`InvalidInput`) to any other: one ledger's keys never open another's."""
        if not isinstance(location, str) or not location:
            raise InvalidInput("the key store location must be a path or a postgresql:// URL")
        check_path_text(location, "key store location")
        url = postgres_url(location, "key store location")
        if url is None:
            owner = None if ledger is None or _is_pg(ledger) else Path(ledger).name
            store = cls._open_sqlite(location, create, read_only, owner)
            try:
                store._check_owner(owner, claim=create and not read_only)
            except BaseException:
                store.close()
                raise
            return store
        store = cls._open_pg(url)
        try:
            if not store._exists():
                if not create:
                    raise LedgerNotFound(_missing(store.location))
                store._create()
            store._schema = [r[0] for r in store._run(found_sql("dpl_svc_meta"))]
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def _open_sqlite(
        cls, path: str, create: bool, read_only: bool, owner: str | None
    ) -> ServiceStore:
        check_sqlite_name(path, "key store path")  # never a name SQLite gives its own files
        p = Path(path)
        try:
            present = p.exists() or p.is_symlink()
        except OSError as e:  # e.g. a name too long for the filesystem
            raise StoreError(f"cannot use {path[:80]!r} as a key store path: {e.strerror}") from e
        if not present:
            if not create:
                raise LedgerNotFound(_missing(path))
            cls._build_sqlite(p, owner)
        store_files.check_file(p, write=not read_only)
        conn, copy = store_files.connect(p, read_only=True, private=True)  # a look: writes nothing
        try:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'dpl_svc_meta'"
            ).fetchall()
        except sqlite3.DatabaseError as e:
            sqlite_files.close(conn)
            drop_copy(copy)
            raise LedgerCorrupted(f"{path} is not a readable SQLite database: {e}") from e
        if not found:
            sqlite_files.close(conn)
            drop_copy(copy)
            raise LedgerCorrupted(
                f"{path} is an SQLite database but not a dpledger key store: move it away "
                "or pass another --keys path (it is never adopted as a key store)"
            )
        if not read_only:  # it is ours: now it may be written (revocations, refusals)
            sqlite_files.close(conn)
            drop_copy(copy)  # the look's private copy, if it took one (review 39)
            conn, copy = store_files.connect(p, read_only=False)
        store = cls(path, conn, pg=False)
        store._copy = copy
        return store

    @classmethod
    def _build_sqlite(cls, target: Path, owner: str | None) -> None:
        """Create a complete key store at ``target`` (:func:`store_files.build`), recording
        ``owner``, the file name of the ledger whose default store it is."""

        def fill(tmp: Path) -> None:
            built = cls(str(tmp), sqlite3.connect(str(tmp), isolation_level=None), pg=False)
            try:
                built._run("PRAGMA journal_mode=WAL")
                built._create()
                if owner is not None:
                    built._run(built._sql["set_meta"], (_OWNER, owner))
            finally:
                built.close()

        store_files.build(target, fill)

    def _check_owner(self, owner: str | None, *, claim: bool) -> None:
        """Refuse a store that another ledger's default location made (see :meth:`open`).
        ``claim`` (``keys create``): a store made before stores recorded their ledger is
        recorded as ``owner``'s, the ledger it now adds a key for."""
        if owner is None:
            return
        rows = self._query("meta", (_OWNER,))
        if not rows and claim:
            with self._transaction():  # a racing claim for another ledger keeps its own
                self._run(self._sql["set_meta"], (_OWNER, owner))
            rows = self._query("meta", (_OWNER,))
        if rows and str(rows[0][0]) != owner:
            raise InvalidInput(
                f"the key store {self.location} was made for the ledger {str(rows[0][0])!r}, "
                f"not {owner!r} (names like eval.v1 and eval.v2 share one default key store): "
                f"pass --keys PATH to name {owner!r}'s own (this file, if the ledger was renamed)"
            )

    @classmethod
    def _open_pg(cls, url: str) -> ServiceStore:
        try:
            import psycopg

        except ImportError as e:
            raise StoreError(
                f"a PostgreSQL key store needs psycopg ({e}): pip install 'dpledger[postgres]'"
            ) from e
        where = redact_url(url)
        try:
            conn = psycopg.connect(url, autocommit=True, application_name="dpledger-service")
        except psycopg.Error as e:
            raise StoreError(f"cannot connect to the key store in {where}") from e
        return cls(where, conn, pg=True, url=url)

    def _exists(self) -> bool:
        """Whether a PostgreSQL database holds the store's tables."""
        return in_own_schema(self._run(found_sql("dpl_svc_meta")), "key store", self.location)

    def _create(self) -> None:
        with self._transaction():
            if self._pg:
                self._run(_PG_LOCK)  # CREATE TABLE IF NOT EXISTS is not race-safe in PostgreSQL
            ident = "BIGSERIAL PRIMARY KEY" if self._pg else "INTEGER PRIMARY KEY AUTOINCREMENT"
            for statement in TABLES:
                self._run(statement.format(id=ident))
            if self._pg and self._run(_IN_TEMP):  # pg_temp first: gone with the session
                raise StoreError(
                    f"{self.location}: the session's search_path creates tables in its "
                    "temporary schema (pg_temp), which vanish when the session ends, with "
                    "every key; name the store's schema first (?options=-c%20search_path%3D"
                    "NAME); nothing was created"
                )
            secret = secrets.token_hex(32)
            self._run(self._sql["set_meta"], ("schema_version", _SCHEMA_VERSION))
            self._run(self._sql["set_meta"], ("session_secret", secret))

    # -- plumbing ---------------------------------------------------------------------

    def _run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if self._moved is not None:  # every later call meets it again
            raise StoreError(self._moved)
        if not self._pg:  # a store removed or restored over by mv: never its stale keys
            unless_removed(self._conn, f"key store {self.location}")
        try:
            try:
                return self._once(sql, params)
            except Exception:
                # PostgreSQL restarted or dropped an idle session: outside a transaction
                # a statement may run again on a new session (inside one, it may not)
                if not (self._pg and self._conn.broken and not self._in_txn):
                    raise
                import psycopg

                self._conn = psycopg.connect(
                    self._url, autocommit=True, application_name="dpledger-service"
                )
                self._same_schema()
                return self._once(sql, params)
        except Exception as e:
            if isinstance(e, sqlite3.Error) or type(e).__module__.startswith("psycopg"):
                raise StoreError(f"key store {self.location}: {type(e).__name__}") from e
            raise

    def _same_schema(self) -> None:
        """A new session reads the role's search_path as it is now: one that finds the
        store's tables in another schema is not used (another deployment's keys)."""
        now = [r[0] for r in self._once(found_sql("dpl_svc_meta"), ())]
        if self._schema is not None and now != self._schema:
            self._conn.close()
            why = "its search_path changed" if now else "it was dropped or its search_path changed"
            self._moved = (
                f"a new session on {self.location} finds the key store's tables in "
                f"{now or 'no schema'}, not in {self._schema} where it was opened ({why}): "
                "nothing was read or written; find the key store and open it again"
            )
            raise StoreError(self._moved)

    def _once(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        cur = self._conn.execute(sql, tuple(params))
        return list(cur.fetchall()) if cur.description is not None else []

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._lock:
            self._run("BEGIN" if self._pg else "BEGIN IMMEDIATE")
            self._in_txn = True
            try:
                yield
            except BaseException:
                with contextlib.suppress(Exception):
                    self._run("ROLLBACK")
                raise
            else:
                self._run("COMMIT")
            finally:
                self._in_txn = False

    def _query(self, name: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._run(self._sql[name], params)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with contextlib.suppress(Exception):
            if self._pg:
                self._conn.close()
            else:
                sqlite_files.close(self._conn)
        drop_copy(self._copy)
        self._copy = None

    def __enter__(self) -> ServiceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- keys -------------------------------------------------------------------------

    def create_key(self, name: str, scopes: Scopes) -> tuple[NewKey, ApiKey]:
        """Make and store a new key; the returned :class:`NewKey` holds its only copy."""
        if not isinstance(scopes, Scopes):
            raise InvalidInput("scopes must be a Scopes value")
        made = new_key()
        record = ApiKey(made.key_id, check_name(name), scopes, _now())
        row = (
            made.key_id,
            record.name,
            ALGO,
            made.salt.hex(),
            made.digest.hex(),
            json.dumps(scopes.as_dict(), sort_keys=True),
            record.created_at,
            None,
        )
        with self._transaction():
            self._run(self._sql["insert_key"], row)
        return made, record

    def _record(self, row: Sequence[Any]) -> ApiKey:
        key_id, name, _algo, _salt, _digest, scopes, created, revoked = row
        try:
            s = json.loads(scopes)
            return ApiKey(
                str(key_id),
                str(name),
                Scopes(
                    tuple(s["actions"]),
                    None if s["regions"] is None else tuple(s["regions"]),
                    None if s["metrics"] is None else tuple(s["metrics"]),
                ),
                str(created),
                None if revoked is None else str(revoked),
            )
        except (ValueError, KeyError, TypeError, InvalidInput) as e:
            raise LedgerCorrupted(f"key {key_id!r} in {self.location} is unreadable: {e}") from e

    def lookup(self, key_id: str) -> tuple[ApiKey, tuple[bytes, bytes]] | None:
        """The key ``key_id`` and its ``(salt, digest)``, or None if there is none."""
        rows = self._query("key", (key_id,))
        if not rows:
            return None
        row = rows[0]
        if row[2] != ALGO:
            raise LedgerCorrupted(f"key {key_id} uses an unknown digest {row[2]!r}")
        return self._record(row), (bytes.fromhex(row[3]), bytes.fromhex(row[4]))

    def key(self, key_id: str) -> ApiKey | None:
        """The key ``key_id`` (revoked or not), or None."""
        found = self.lookup(key_id)
        return None if found is None else found[0]

    def list_keys(self) -> list[ApiKey]:
        """Every key, oldest first (revoked ones included, marked)."""
        return [self._record(r) for r in self._query("keys")]

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke a key (at once, for every replica); revoking twice keeps the first time."""
        with self._transaction():
            self._run(self._sql["revoke"], (_now(), key_id))
        found = self.key(key_id)
        if found is None:
            raise UnknownResource(f"no key with id {key_id!r}; `dpledger keys list` shows them")
        return found

    def session_secret(self) -> bytes:
        """The secret that signs page sessions (made when the store was created)."""
        rows = self._query("meta", ("session_secret",))
        if not rows:
            raise LedgerCorrupted(f"{self.location} has no session secret")
        return bytes.fromhex(str(rows[0][0]))

    def session_epoch(self, key_id: str) -> int:
        """How often the page sessions of ``key_id`` were ended (signed out): a session
        names the count it was made at, and is void once the count has moved on."""
        rows = self._query("meta", (f"sessions:{key_id}",))
        try:
            return int(rows[0][0]) if rows else 0
        except ValueError as e:
            raise LedgerCorrupted(f"{self.location}: key {key_id}'s session count") from e

    def end_sessions(self, key_id: str) -> None:
        """End every page session of ``key_id`` (sign-out), for every replica at once."""
        with self._transaction():
            self._run(self._sql["end_sessions"], (f"sessions:{key_id}",))

    # -- refusals ---------------------------------------------------------------------

    def log_refusal(self, refusal: Refusal) -> None:
        """Append a refusal; every :data:`_PRUNE_EVERY` rows, drop all but the newest."""
        r = refusal
        row = (
            r.at or _now(), r.principal, r.action, r.status, r.error, r.epoch, r.region, r.metric,
            r.cohort, r.release_id, json.dumps(list(r.failed)),
        )  # fmt: skip
        with self._transaction():
            (new_id,) = self._run(self._sql["insert_refusal"], row)[0]
            if int(new_id) % _PRUNE_EVERY == 0:
                self._run(self._sql["prune"], (int(new_id) - REFUSALS_KEPT,))

    def refusals(self, limit: int = 50) -> list[Refusal]:
        """The newest ``limit`` refusals, newest first."""
        out = []
        for row in self._query("refusals", (int(limit),)):
            at, who, action, status, error, epoch, region, metric, cohort, rid, failed = row
            names = tuple(str(n) for n in cast(list[object], json.loads(failed)))
            head = (str(at), str(who), str(action), int(status), str(error))
            out.append(Refusal(*head, epoch, region, metric, cohort, rid, names))
        return out

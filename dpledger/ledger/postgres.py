"""The shared PostgreSQL store: one ledger-wide advisory transaction lock per write.

When evaluation runs on many hosts, the ledger lives in PostgreSQL (psycopg 3, the
``postgres`` extra). Semantics are the SQLite store's, through the shared
:class:`~dpledger.ledger.store.SqlStore`: same schema, same hash chain, same spend table.

**Locking.** Every write transaction starts with
``BEGIN ISOLATION LEVEL READ COMMITTED`` followed by
``SELECT pg_advisory_xact_lock(LOCK_KEY)`` on one fixed 64-bit key derived from
``"dpledger"``. One ledger-wide lock, rather than row locks on the spend rows of an
epoch, because a release touches more than its own scope: it reads the chain head
(which every release, in every epoch, moves) and, for a global release, the spend of
every region. Row locks would have to cover the head row anyway, i.e. serialise all
writers, only with more ways to deadlock and to lock a row that does not exist yet (the
first release of a scope inserts its spend row). Under the single lock the budget
re-check, the entry, the spend update and the new head of one release are serialised
against every other writer on any host, so racing writers never overspend and the
chain stays linear (the ``seq`` primary key would refuse a fork regardless).
A transaction-level advisory lock is released by PostgreSQL at ``COMMIT`` or
``ROLLBACK`` — and when the client dies, because the server then aborts the
transaction — so a killed writer can never leave the ledger locked. Advisory locks
are per database: ledgers in different databases do not contend.

READ COMMITTED is stated explicitly, not inherited: the lock is taken by the
transaction's first statement, and under REPEATABLE READ or SERIALIZABLE (should a
server default to them) the snapshot would be taken *before* the lock wait, so the
budget re-check would read stale spend. Under READ COMMITTED every statement after
the lock sees everything committed by the previous holder.

Schema creation takes the same lock, so concurrent creators do not race on
``CREATE TABLE IF NOT EXISTS`` (which is not concurrency-safe in PostgreSQL). Opening
creates nothing: a database (or ``search_path`` schema) without the ledger's tables is
:class:`~dpledger.errors.LedgerNotFound` unless the store was opened with
``mode="create"``, and then the tables appear with the first approved release. A store
opened with ``mode="read"`` sets ``default_transaction_read_only`` on its session, so
the server itself refuses any write through it.

**Durability.** A release's value is returned only after ``COMMIT`` returns, and with
``synchronous_commit = on`` (PostgreSQL's default; a session that inherits ``off`` is
switched back on) that means the commit record is flushed. If a ``COMMIT`` fails half
way (connection lost), its outcome is unknown and the value is not returned: the
ledger may over-count, never under-count. A server running with ``fsync = off``
triggers a :class:`RuntimeWarning`: it could lose committed spend in a crash.

**Two round trips per write transaction** (:mod:`~dpledger.ledger.pgpipe`, libpq
pipeline mode, statements prepared once per session): ``BEGIN``, the lock and the read
of the head, the spend and the entries of the release ids the writer looked up without
the lock (a retry's check) in the first; the entries, spend and head in one statement (a
very large round: several of at most 32,000 parameters each) plus ``COMMIT`` in the
second. A write the server refuses there means ``COMMIT`` never ran; a ``COMMIT`` not
seen to succeed is the unknown outcome above.

**Append-only.** A row trigger refuses ``UPDATE`` and ``DELETE`` on ``dpl_entries``
and a statement trigger refuses ``TRUNCATE``; on ``dpl_spend`` (schema 4) they refuse
lowering, moving, deleting or truncating a total. The table owner can still disable
them; :meth:`Ledger.verify` detects what such an editor changes.

Every psycopg error is raised as :class:`~dpledger.errors.StoreError`; messages name
the ledger by its URL without the password.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from dpledger._files import redact_url
from dpledger._pg_schema import IN_TEMP, creating, found_sql, in_own_schema, in_temp, moved
from dpledger.errors import LedgerChanged, LedgerCorrupted, LedgerNotFound, StoreError
from dpledger.ledger.pgsql import (
    ADVICE,
    EPOCH_POLICIES,
    RELEASES,
    RESTORE,
    SCHEMA_1,
    SCHEMA_3_UPGRADE,
    SQL,
    trigger_refusal,
    triggers_read,
)
from dpledger.ledger.records import Entry
from dpledger.ledger.schema import SCHEMA, SCHEMA_VERSION, missing_hint, row_to_entry
from dpledger.ledger.store import SqlStore
from dpledger.types import Mode

try:
    import psycopg
    from psycopg import conninfo as _conninfo
except ImportError as _e:  # the optional extra is not installed
    _MISSING: ImportError | None = _e
else:
    _MISSING = None

if TYPE_CHECKING or _MISSING is None:
    from dpledger.ledger import pgpipe
    from dpledger.ledger.pgwrite import PipelinedWrites
else:

    class PipelinedWrites:  # without psycopg the store refuses to open (StoreError)
        """Stands in for the write path, which needs psycopg."""

        def _write_rows(self, *rows: object) -> None:
            raise NotImplementedError


if TYPE_CHECKING:
    from psycopg.rows import TupleRow

__all__ = ["LOCK_KEY", "PostgresStore"]

LOCK_KEY = int.from_bytes(hashlib.sha256(b"dpledger").digest()[:8], "big", signed=True)
"""The ledger-wide advisory lock key: the first 8 bytes of SHA-256("dpledger"), signed."""

_LOCK_NOT_AVAILABLE = "55P03"
# one round trip: durability settings, the lock wait (a client's own lock_timeout kept)
_SESSION_SQL = """SELECT current_setting('synchronous_commit'), current_setting('fsync'),
  CASE WHEN source = 'client' THEN setting || COALESCE(unit, '') END,
  CASE WHEN source = 'client' THEN NULL ELSE set_config('lock_timeout', %s, false) END
FROM pg_settings WHERE name = 'lock_timeout'"""
_SCHEMA_GONE = frozenset({"42P01", "42703"})  # undefined table, undefined column


def _bigints(values: Sequence[int]) -> bytes:
    """A text-format ``bigint[]`` parameter."""
    return ("{" + ",".join(str(int(v)) for v in values) + "}").encode()


def _url_secrets(url: str) -> list[str]:
    """Text of ``url`` that may be a password, read without parsing it (libpq quotes an
    unparseable URL, or a token of it, in its error): what follows the user's ``:`` up to
    each ``@``, and every ``password=`` value; longest first."""
    rest = url.partition("://")[2]
    found = {rest[:i].partition(":")[2] for i, c in enumerate(rest) if c == "@"}
    found.update(v for k, _, v in (p.partition("=") for p in re.split(r"[?&#]", rest))
                 if k.lower() == "password")  # fmt: skip
    return sorted((f for f in found if f), key=len, reverse=True)


class PostgresStore(PipelinedWrites, SqlStore):
    """A ledger in a PostgreSQL database, shared by writers on any number of hosts.

    ``url`` is a libpq URL (``postgresql://user@host:port/dbname?...``). ``timeout_s`` bounds
    the wait for the ledger lock (``lock_timeout``) and the connect. A ``lock_timeout`` the
    client set at connection start (the URL's ``options=-c lock_timeout=250``, or
    ``PGOPTIONS`` when the URL has no ``options``: ``pg_settings.source`` is ``client``) is
    kept and bounds that wait; one from the server's configuration, role or database is not.
    """

    sql = SQL
    schema_1 = SCHEMA_1
    schema_3_upgrade = SCHEMA_3_UPGRADE
    guards = RESTORE
    lock_key = LOCK_KEY
    state_sql = SQL.state.replace("%s", "$1")

    def __init__(self, url: str, mode: Mode = "write", *, timeout_s: float = 60.0) -> None:
        super().__init__(mode)
        self._url = url
        self._location = redact_url(url)
        self._timeout_s = timeout_s
        if _MISSING is not None:
            raise StoreError(
                f"cannot open the PostgreSQL ledger {self._location}: psycopg is not "
                f"installed ({_MISSING}); run: pip install 'dpledger[postgres]'"
            ) from _MISSING
        try:
            params = _conninfo.conninfo_to_dict(url)
        except psycopg.Error as e:
            raise StoreError(
                f"not a valid PostgreSQL URL: {self._location}: {self._clean(e)}; "
                "use postgresql://user@host:port/dbname"
            ) from e
        self._password = str(params.get("password") or "")
        self._connect_kwargs: dict[str, Any] = {}
        if "connect_timeout" not in params:
            self._connect_kwargs["connect_timeout"] = max(1, round(timeout_s))
        if "application_name" not in params:
            self._connect_kwargs["application_name"] = "dpledger"
        self._closed = False
        self._in_txn = False
        self._prefetched: tuple[tuple[int, ...], list[tuple[Any, ...]]] | None = None
        self._prefound: tuple[frozenset[str], list[tuple[Any, ...]]] | None = None
        self._prebound: dict[int, tuple[str, str] | None] | None = None
        self._ids_hint: tuple[str, ...] = ()  # ids the next write transaction reads first
        self._pending: list[tuple[str, list[Any]]] = []  # writes sent with the COMMIT
        self._pipeline = pgpipe.Pipeline(frozenset([RELEASES, EPOCH_POLICIES]))
        self._exists = False
        self._found: list[tuple[Any, ...]] = []  # the ledger's schema and the session's own
        self._client_lock_wait: str | None = None  # a lock_timeout the URL set (kept)
        self._conn = self._connect()
        if not self.exists() and mode != "create":
            self.close()
            raise LedgerNotFound(
                f"no dpledger ledger in {self._location} (no dpl_meta table in its "
                f"search_path): check the URL; {missing_hint(mode)}"
            )

    @property
    def location(self) -> str:
        """The ledger's URL, without the password."""
        return self._location

    # -- connection -------------------------------------------------------------------

    def _clean(self, e: BaseException) -> str:
        text = str(e).strip()
        for secret in [getattr(self, "_password", ""), *_url_secrets(self._url)]:
            text = text.replace(secret, "***") if secret else text
        return text

    def _connect(self) -> psycopg.Connection[TupleRow]:
        try:
            conn = psycopg.connect(self._url, autocommit=True, **self._connect_kwargs)
            conn.prepare_threshold = None  # its ROLLBACK would DEALLOCATE ALL (see pgpipe)
        except psycopg.Error as e:
            raise StoreError(
                f"cannot connect to the PostgreSQL ledger {self._location}: {self._clean(e)}; "
                "nothing was recorded: check that the server is running and that the URL (or "
                "DPLEDGER_URL) names the right host, port, database and user"
            ) from e
        try:
            sync, fsync, client_wait, _ = conn.execute(
                _SESSION_SQL, (f"{int(self._timeout_s * 1000)}ms",)
            ).fetchall()[0]
            self._client_lock_wait = client_wait
            if sync == "off":  # a release must not be returned before its commit is durable
                conn.execute("SELECT set_config('synchronous_commit', 'on', false)")
            if self.mode == "read":
                conn.execute("SELECT set_config('default_transaction_read_only', 'on', false)")
            refused = None if self.mode == "read" else trigger_refusal(conn, self._location)
        except psycopg.Error as e:
            with contextlib.suppress(psycopg.Error):
                conn.close()
            raise StoreError(
                f"cannot set up the PostgreSQL ledger session on {self._location}: "
                f"{self._clean(e)}; check the server log"
            ) from e
        if refused is not None:  # nothing is written through a foreign trigger
            with contextlib.suppress(psycopg.Error):
                conn.close()
            raise refused
        if fsync == "off":
            warnings.warn(
                f"PostgreSQL at {self._location} runs with fsync=off: a server crash can "
                "lose committed releases (under-counted spend); turn fsync on",
                RuntimeWarning,
                stacklevel=3,
            )
        return conn

    def _connection(self) -> psycopg.Connection[TupleRow]:
        """The live connection; reconnects once it broke, outside a transaction."""
        if self._closed:
            raise StoreError(f"the ledger {self._location} is closed; open it again")
        if (self._conn.broken or self._conn.closed) and not self._in_txn:
            self._reconnect()
        return self._conn

    def _reconnect(self) -> None:
        with contextlib.suppress(psycopg.Error):
            self._conn.close()
        self._pipeline.forget()  # prepared statements live and die with their session
        self._conn = self._connect()
        try:  # a new session reads the search_path as it is now (review 41)
            now = self._conn.execute(found_sql("dpl_meta")).fetchall() if self._exists else []
        except psycopg.Error as e:  # it failed too (a failover under way): a session's failure
            self._conn.close()  # so that the next call asks again (review 41 diff 2)
            raise self._error(e) from e
        if self._exists and [r[0] for r in now] != [r[0] for r in self._found]:
            self._conn.close()  # so that every later call meets this again
            raise moved(self._found, now, self._location)

    def _lock_wait_text(self) -> str:
        """How long a writer waits for the ledger lock, for an error message."""
        if self._client_lock_wait is None:
            return f"{self._timeout_s:g} s"
        return f"{self._client_lock_wait} (the lock_timeout the connection set at its start)"

    def _error(self, e: Exception) -> StoreError:
        if getattr(e, "sqlstate", None) == _LOCK_NOT_AVAILABLE:
            return StoreError(
                f"PostgreSQL ledger {self._location}: another writer held the ledger lock "
                f"for over {self._lock_wait_text()}; nothing was recorded, retry the release"
            )
        if getattr(e, "sqlstate", None) in _SCHEMA_GONE:  # opened as a ledger, so: damage
            return StoreError(
                f"PostgreSQL ledger {self._location} is damaged: {self._clean(e)}; it fails "
                "`dpledger ledger verify`: restore it from a backup"
            )
        advice = ADVICE.get(str(getattr(e, "sqlstate", "")), "retry, or check the server log")
        return StoreError(
            f"PostgreSQL ledger {self._location}: {type(e).__name__}: {self._clean(e)}; "
            f"nothing was recorded by this statement; {advice}"
        )

    # -- SqlStore ---------------------------------------------------------------------

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        args = tuple(params) if params else None
        conn = self._connection()
        try:
            try:
                return self._run(conn, sql, args)
            except psycopg.OperationalError:
                if self._in_txn or not conn.broken:
                    raise
            # The session died since the last call (server restart, failover, idle
            # timeout). Outside a transaction only reads and BEGIN run, so running the
            # statement again on a new session is safe; inside one it is not (the
            # transaction is gone) and the error propagates: nothing was recorded.
            self._reconnect()
            return self._run(self._conn, sql, args)
        except psycopg.Error as e:
            raise self._error(e) from e

    @staticmethod
    def _run(
        conn: psycopg.Connection[TupleRow], sql: str, args: tuple[Any, ...] | None
    ) -> list[tuple[Any, ...]]:
        cur = conn.execute(sql, args)  # args=None: no placeholder parsing ('%' is literal)
        rows = cur.fetchall() if cur.description is not None else []
        while cur.nextset():  # several statements in one query: the last result's rows
            rows = cur.fetchall() if cur.description is not None else []
        return rows

    def _list(self, values: Sequence[object]) -> object:
        return list(values)

    def exists(self) -> bool:
        """Whether the ledger's tables exist in this database (its ``search_path``)."""
        if not self._exists:
            rows = self._execute(found_sql("dpl_meta"))
            writer = self.mode != "read"
            self._exists = in_own_schema(rows, "ledger", self._location, writer=writer)
            self._found = rows
        return self._exists

    def check_as_writer(self) -> None:
        """A dry run (``check``) decides as the release would: a ledger found further down
        the search_path (:mod:`dpledger._pg_schema`), or a foreign trigger (review 42), refused."""
        if self.exists():
            in_own_schema(self._found, "ledger", self._location)
        if self.mode == "read" and (found := self.integrity_problems()):
            raise LedgerCorrupted(f"{self._location}: {found[0]}; nothing was written")

    def create(self, meta: dict[str, str]) -> None:
        """Create tables, append-only triggers and ``meta`` under the ledger lock."""
        if self.exists():
            return
        if self.mode != "create":
            raise StoreError(f"{self._location} was not opened for creation (mode='create')")
        with self._lock, self._write_transaction():
            with creating(self._location):  # the DDL's refusal: what creating needs
                for statement in (SCHEMA[0], IN_TEMP, *SCHEMA[1:], *RESTORE):  # not foreign
                    if self._execute(statement) and statement == IN_TEMP:  # dpl_meta is temp:
                        raise in_temp(self._location)  # gone with the session (review 41)
            if not self._execute("SELECT 1 FROM dpl_meta LIMIT 1"):  # a racing creator's
                self._set_meta(("schema_version", SCHEMA_VERSION), *meta.items())
        self._exists = False
        self.exists()  # where it now is, for a session opened again later

    @contextmanager
    def _begin_write(
        self, epochs: Sequence[int], meanwhile: Callable[[], object] | None
    ) -> Iterator[None]:
        # what the transaction will read first is read in the same round trip as BEGIN
        # and the lock, after the lock (READ COMMITTED: each statement a fresh snapshot):
        # the head and ``epochs``' spend, the entries of the release ids the last
        # find_releases asked for (a writer looks ids up without the lock, to answer a
        # retry without noise, then under it) and the policy binding of epochs not seen
        # bound yet; ``meanwhile`` runs while that round trip is under way
        ids, self._ids_hint = self._ids_hint, ()
        unbound = [e for e in epochs if e not in self._bound]
        reads: list[pgpipe.Command] = [(self.state_sql, [_bigints(epochs)])] if epochs else []
        if ids and all(i.isascii() for i in ids):  # as ReleaseRequest's: any encoding's bytes
            reads.append((RELEASES, [pgpipe.text_array(ids).encode()]))
        else:
            ids = ()
        if unbound:
            reads.append((EPOCH_POLICIES, [_bigints(unbound)]))
        begin = "BEGIN ISOLATION LEVEL READ COMMITTED"
        try:
            with self._transaction(begin, lock=True, reads=reads, meanwhile=meanwhile) as rows:
                got = iter(rows)
                if epochs:
                    self._prefetched = (tuple(epochs), next(got))
                if ids:
                    self._prefound = (frozenset(ids), next(got))
                if unbound:
                    found = {int(e): (str(h), str(v)) for e, h, v in next(got)}
                    self._prebound = {e: found.get(e) for e in unbound}
                yield
        finally:
            self._prefetched = self._prefound = self._prebound = None

    def _state_rows(self, epochs: Sequence[int]) -> list[tuple[Any, ...]]:
        held, self._prefetched = self._prefetched, None
        if held is not None and held[0] == tuple(epochs):
            return held[1]
        return super()._state_rows(epochs)

    def find_releases(self, release_ids: Sequence[str]) -> dict[str, Entry]:
        """:meth:`SqlStore.find_releases`; the next write reads them again with its lock."""
        with self._lock:  # a writer looks ids up without the lock (a retry needs no
            self._ids_hint = tuple(sorted(set(release_ids)))  # noise), then under it
            return super().find_releases(release_ids)

    def _epoch_policy(self, epoch: int) -> tuple[str, str] | None:
        held = self._prebound
        if held is None or epoch not in held:
            return super()._epoch_policy(epoch)
        binding = held[epoch]  # read under this transaction's lock
        if binding is not None:
            self._bound[epoch] = binding  # an epoch's first entry never changes
        return binding

    def _find_releases(self, release_ids: Sequence[str]) -> dict[str, Entry]:
        held = self._prefound
        if held is None or not held[0].issuperset(release_ids):
            return super()._find_releases(release_ids)
        wanted = set(release_ids)  # read under this transaction's lock: answers any subset
        entries = [row_to_entry(r) for r in held[1]]
        # a row below the chain (seq <= 0) is no release (review 40; the audit fails it)
        return {rid: e for e in entries if (rid := e.draft.release_id) in wanted and e.seq > 0}

    def integrity_problems(self) -> list[str]:
        """Foreign or changed triggers on the ledger's tables (:func:`foreign_triggers`)."""
        with self._lock:
            return triggers_read(self._execute, self._location)

    @contextmanager
    def _read_transaction(self) -> Iterator[None]:
        # one snapshot for every read inside (verify), without taking the write lock
        try:
            with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", lock=False):
                yield
        except StoreError as e:  # the session failed (killed, failover, a timeout), not the
            cause = e.__cause__  # ledger: a read to do again, never a verdict (review 41)
            state = str(getattr(cause, "sqlstate", None) or "")[:2]  # any operational error
            lost = isinstance(cause, psycopg.OperationalError) and state != "58"  # (a lock or
            lost = lost or self._conn is None or self._conn.broken  # standby's wait) but storage
            if not isinstance(cause, psycopg.Error) or self._closed or not lost:
                raise
            raise LedgerChanged(f"PostgreSQL ledger {self._location}: the session reading it "
                                f"failed ({self._clean(cause)}): nothing is wrong with the "
                                "ledger, nothing was written; read again") from cause  # fmt: skip

    @contextmanager
    def _transaction(
        self,
        begin: str,
        *,
        lock: bool,
        epochs: Sequence[int] = (),
        reads: Sequence[pgpipe.Command] = (),
        meanwhile: Callable[[], object] | None = None,
    ) -> Iterator[list[list[tuple[Any, ...]]]]:
        # BEGIN, the lock and ``reads`` in one round trip; yields each read's rows
        self._pending = []  # writes are only ever sent with their own transaction's COMMIT
        try:
            rows = self._begin_locked(begin, reads, meanwhile) if lock else []
            if not lock:
                self._execute(begin)
        except BaseException:
            self._rollback_quietly()  # e.g. the lock wait timed out after BEGIN
            raise
        self._in_txn = True
        try:
            yield rows
        except BaseException:
            self._rollback_quietly()
            raise
        try:
            self._commit()
        finally:
            self._in_txn = False

    def _rollback_quietly(self) -> None:
        # a failed rollback (e.g. the connection died) must not mask the original error;
        # the server aborts the transaction and drops the lock when the session ends
        self._pending = []  # held-back writes die with their transaction
        try:
            with contextlib.suppress(psycopg.Error):
                self._conn.execute("ROLLBACK")
        finally:
            self._in_txn = False

    def close(self) -> None:
        """Close the connection (idempotent); an open transaction is rolled back."""
        self._closed = True
        try:
            self._conn.close()
        except psycopg.Error as e:
            raise StoreError(f"closing {self._location}: {self._clean(e)}") from e

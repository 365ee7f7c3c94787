"""The embedded SQLite store: WAL, ``synchronous=FULL``, ``BEGIN IMMEDIATE`` writes.

``BEGIN IMMEDIATE`` takes SQLite's single write lock at the start of the transaction, so the
budget re-check, the entry and the spend update of one release are serialised against every
other writer — threads and processes alike. Triggers refuse UPDATE and DELETE on entries
(append-only) and lowering or deleting a spend total (schema 4); :meth:`Ledger.verify`
detects an edited or removed entry unless the editor also rewrites every later hash, the
head and the spend — which ``verify(expected_head=…)`` catches against a head recorded
outside the database. A writer keeps the head and spend its last committed write left, and
re-uses them under the next write lock only if ``PRAGMA data_version`` is unchanged — i.e.
no other connection (thread or process) has committed since; otherwise it reads them again.

**Opening never creates or changes a file.** An existing path must be a dpledger ledger: a
directory, a 0-byte file (perhaps a truncated ledger) or any other file is refused. A new
ledger is built in a temporary file beside the target and hard-linked into place, so it
appears complete or not at all, and concurrent creators cannot clobber each other. Reading
(mode ``read``) never writes: a ledger nobody has open is read ``immutable`` (no
``-wal``/``-shm`` is created beside it, no write permission is needed: a read-only copy or
another user's ledger verifies in place); a ledger in use is read through a read-only
connection, which never checkpoints the WAL into the file nor removes it; one a crashed
writer left with a ``-wal`` and no ``-shm`` or one nobody uses (SQLite would create or
rebuild it) is read from a private copy (:mod:`dpledger.ledger.sqlite_copy`), as is one
left with a hot rollback journal. Neither takes SQLite's locks, so a read handle
reconnects when the file or its sidecars changed (:mod:`.sqlite_fresh`). A path named like
SQLite's own files (``…-wal``, ``…-shm``, ``…-journal``) is refused, and so is opening
``X`` while a file SQLite would take for ``X``'s journal is not one (another database
named ``X-wal``): SQLite would delete or overwrite it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any
from urllib.parse import quote

from dpledger import _sqlite_files as sqlite_files
from dpledger._creating import check_room, remove_dead, temp_for, unwritable
from dpledger._files import SQLITE_SIDECARS, check_path_text, check_sidecars, check_sqlite_name
from dpledger._sqlite_removed import unless_removed
from dpledger.errors import (
    LedgerChanged,
    LedgerCorrupted,
    LedgerNotFound,
    NotALedger,
    StoreError,
)
from dpledger.ledger.schema import SCHEMA_VERSION, missing_hint
from dpledger.ledger.sqlite_copy import drop_copy, lacks_table, read_copy
from dpledger.ledger.sqlite_errors import is_damage, not_a_ledger, out_of_reach, unrecorded
from dpledger.ledger.sqlite_fresh import Seen, identity, seen, successor
from dpledger.ledger.sqlite_sql import (
    GUARDS,
    INSERT_ENTRY,
    SCHEMA_1,
    SCHEMA_3_UPGRADE,
    SQL,
    TABLES,
    TRIGGERS,
    UPSERT_SPEND,
    foreign_triggers,
    guard_spend,
)
from dpledger.ledger.store import SqlStore
from dpledger.ledger.txn import TxnState
from dpledger.types import Mode

__all__ = ["SqliteStore"]

MEMORY = ":memory:"
_ATTEMPTS = 4  # reads of one statement by a handle whose file keeps changing under it

_KEPT_EPOCHS = 64
"""Epochs whose spend a connection keeps between its own write transactions."""


@dataclass(frozen=True, slots=True)
class _Kept:
    """The head and spend a committed write left, at the data_version it was read under."""

    version: int
    head: tuple[int, str]
    spend: dict[int, dict[tuple[str, str], Fraction]]
    scopes: dict[int, dict[str, Fraction]]  # the same spend summed per scope


class SqliteStore(SqlStore):
    """A ledger in one SQLite file (or ``:memory:`` for throwaway use)."""

    sql = SQL
    schema_1 = SCHEMA_1
    schema_3_upgrade = SCHEMA_3_UPGRADE
    schema_3_refuses = "SELECT seq FROM dpl_entries WHERE typeof(seq) != 'integer' LIMIT 5"
    guards = GUARDS

    def __init__(self, path: str | Path, mode: Mode = "write", *, timeout_s: float = 60.0) -> None:
        super().__init__(mode)
        self._path = check_path_text(path)  # NUL or not UTF-8: refused before any file is made
        self._timeout_s = timeout_s
        self._conn: sqlite3.Connection | None = None
        # the state this connection's last write left, valid while PRAGMA data_version
        # (which changes when any other connection commits) still reads the same
        self._kept: _Kept | None = None
        self._version: int | None = None  # data_version read under the current write lock
        self._pending: _Kept | None = None  # what the current transaction leaves if it commits
        self._copy_gone: weakref.finalize[[Path], SqliteStore] | None = None  # sqlite_copy's
        # a read without SQLite's locks (immutable, or a private copy): the file as it was
        # then (sqlite_fresh); a statement reconnects when it differs
        self._seen: Seen | None = None
        self._reading = 0  # read transactions open: their statements do not reconnect
        self._gone = ""  # why this read handle stopped: another ledger is at its path
        if self._path != MEMORY:  # never a name SQLite gives another database's files
            check_sqlite_name(self._path)
        if self._path == MEMORY:
            if mode != "create":
                raise LedgerNotFound("an in-memory ledger exists only once created: mode='create'")
            return
        p = Path(self._path)
        try:
            present = p.exists() or p.is_symlink()
        except OSError as e:  # e.g. a name too long for the filesystem
            said = f"cannot use {self._path[:80]!r} as a ledger path: {e.strerror}"
            raise StoreError(said) from e
        if present:
            self._check_file(p)
            self._conn = self._connect(p)
        elif mode != "create":
            raise LedgerNotFound(f"no ledger at {self._path}: check the path; {missing_hint(mode)}")
        else:
            check_room(p, "ledger path")
            stale = [s for s in SQLITE_SIDECARS if Path(self._path + s).exists()]
            if stale:
                raise StoreError(
                    f"{self._path} does not exist but {', '.join(self._path + s for s in stale)}"
                    " does: a ledger's journal without its database; move it away (it may be "
                    "all that is left of a ledger) before creating a new ledger here"
                )

    # -- opening -----------------------------------------------------------------------

    def _check_file(self, p: Path) -> None:
        """Refuse anything at ``p`` that is not an SQLite database file; a write first
        removes what killed creators left (:mod:`dpledger._creating`), a read never does."""
        at = self._path
        if self.mode != "read":
            remove_dead(p, only_if_linked=self.mode == "write")
        sqlite_files.check_sqlite_file(p, f"SQLite ledger {at}", {
            "directory": f"{at} is a directory, not a ledger file",
            "special": f"{at} is not a regular file, not a ledger",
            "empty": f"{at} is an empty file (0 bytes), not a dpledger ledger: if it was one, "
                     "it was truncated; restore it from a backup (it is never adopted as a new "
                     "ledger)",
            "foreign": f"{at} is not an SQLite database, so not a ledger",
        })  # fmt: skip

    def _uri(self, p: Path) -> str:
        path = quote(str(p.resolve()))
        if self.mode != "read":
            return f"file:{path}?mode=rw"
        if Path(f"{p.resolve()}-wal").exists():
            # in use, or a writer crashed: read through its WAL; a read-only connection
            # never checkpoints, so it neither writes the file nor removes the WAL
            return f"file:{path}?mode=ro"
        # nobody has it open (a WAL ledger in use always has its -wal, made before its -shm
        # and removed after it; a -shm alone is a copy's, and mode=ro would add a -wal):
        # read the file as it is, creating nothing beside it, needing no write permission
        return f"file:{path}?immutable=1"

    def _connect(self, p: Path | None) -> sqlite3.Connection:
        if p is not None:  # before SQLite opens (and would adopt) a file beside it
            sqlite_files.unless_held(p, lambda: check_sidecars(self._path))
            if self.mode != "read":  # before SQLite creates a -wal/-shm it could not use
                sqlite_files.check_writable(p, "SQLite ledger")
                if lacks_table(p, "dpl_meta"):  # before SQLite recovers another's WAL
                    raise NotALedger(not_a_ledger(self._path))
        options: dict[str, Any] = {"timeout": self._timeout_s, "isolation_level": None,
                                   "check_same_thread": False}  # fmt: skip
        self._seen = None
        try:
            if p is None:
                conn: sqlite3.Connection = sqlite3.connect(MEMORY, **options)
            else:
                before = seen(os.path.realpath(p)) if self.mode == "read" else None
                target, uri = self._target(p)
                conn = sqlite_files.connect(target, uri, **options)
                if target != p or uri.endswith("immutable=1"):
                    self._seen = before
        except sqlite3.Error as e:
            self._drop_copy()
            raise StoreError(f"cannot open SQLite ledger {self._path}: {e}") from e
        try:
            conn.execute(f"PRAGMA busy_timeout={int(self._timeout_s * 1000)}")
            if self.mode == "read":
                conn.execute("PRAGMA query_only=ON")
            else:
                conn.execute("PRAGMA synchronous=FULL")
                guard_spend(conn, self._path)  # its spend triggers compare totals exactly
            if (
                p is not None
                and not conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'dpl_meta'"
                ).fetchall()
            ):
                raise NotALedger(not_a_ledger(self._path))
        except sqlite3.DatabaseError as e:
            sqlite_files.close(conn)
            self._drop_copy()
            if hint := out_of_reach(e):  # the file may be fine
                raise StoreError(f"cannot open SQLite ledger {self._path}: {e}: {hint}") from e
            raise LedgerCorrupted(f"{self._path} is not a readable SQLite database: {e}") from e
        except BaseException:
            sqlite_files.close(conn)
            self._drop_copy()
            raise
        return conn

    def _target(self, p: Path) -> tuple[Path, str]:
        """The file to open for ``p`` and its URI: a private copy when a read would create
        a ``-shm`` beside it (see :mod:`dpledger.ledger.sqlite_copy`)."""
        found = read_copy(p, os.path.realpath(p)) if self.mode == "read" else None
        if found is not None:  # a -wal without its -shm, or a hot journal
            self._copy_gone = weakref.finalize(self, drop_copy, found[0].parent)
            return found
        return p, self._uri(p)

    def _drop_copy(self) -> None:
        """Remove the private copy this store read, if any (after its connection closed)."""
        if self._copy_gone is not None:
            self._copy_gone()
        self._copy_gone = None

    def exists(self) -> bool:
        """Whether the ledger exists; a pending store attaches to one created meanwhile."""
        if self._gone:  # another ledger is at the path now: never read as this one
            raise StoreError(self._gone)
        if self._conn is None and self._path != MEMORY:
            with self._lock:
                p = Path(self._path)
                if self._conn is None and p.exists():
                    self._check_file(p)
                    self._conn = self._connect(p)
        return self._conn is not None

    def create(self, meta: dict[str, str]) -> None:
        """Build the ledger in a temporary file, then link it into place atomically:
        ``os.link`` refuses to replace an existing file, so a concurrent creator that won
        the race keeps its ledger, and this store opens that one instead."""
        with self._lock:  # threads sharing this store create (and connect) once
            if self._conn is None:
                self._create(meta)

    def _create(self, meta: dict[str, str]) -> None:
        if self.mode != "create":
            raise StoreError(f"{self._path} was not opened for creation (mode='create')")
        if self._path == MEMORY:
            self._conn = self._connect(None)
            self._build(self._conn, meta)
            return
        target = Path(self._path)
        tmp = temp_for(target)  # records pid and host: a killed creator's is removed later
        try:
            built = sqlite3.connect(str(tmp), isolation_level=None)
            try:
                built.execute("PRAGMA journal_mode=WAL")
                self._build(built, meta)
            finally:
                built.close()
            with contextlib.suppress(FileExistsError):  # another creator won: open its ledger
                os.link(tmp, target)
        except (OSError, sqlite3.Error) as e:
            why = f"{e}{unwritable(target)}"
            raise StoreError(f"cannot create the SQLite ledger {self._path}: {why}") from e
        finally:
            sqlite_files.remove_built(tmp)
        self._check_file(target)
        self._conn = self._connect(target)

    @staticmethod
    def _build(conn: sqlite3.Connection, meta: dict[str, str]) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for stmt in TABLES:
                conn.execute(stmt)
            rows = [("schema_version", SCHEMA_VERSION), *meta.items()]
            conn.executemany("INSERT INTO dpl_meta (key, value) VALUES (?, ?)", rows)
            conn.execute("COMMIT")
        except BaseException:
            conn.rollback()
            raise

    @property
    def location(self) -> str:
        """The database file path."""
        return self._path

    # -- SqlStore ---------------------------------------------------------------------

    def _no_ledger(self) -> str:
        return f"no ledger at {self._path} (not created yet, or moved away)"

    def _stale(self) -> bool:
        """Whether this handle reads without SQLite's locks and the file changed since."""
        return self._seen is not None and seen(os.path.realpath(self._path)) != self._seen

    def _reconnect(self) -> None:
        """A new connection to the ledger as it is now (:mod:`.sqlite_fresh`)."""
        conn, self._conn, self._seen = self._conn, None, None
        was = identity(conn) if conn is not None else None  # what this handle has seen
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                sqlite_files.close(conn)
        self._drop_copy()
        p = Path(self._path)
        self._check_file(p)
        self._conn = self._connect(p)
        why = successor(self._conn, was) if was is not None else ""
        if why:
            sqlite_files.close(self._conn)
            self._conn = None
            self._drop_copy()
            self._gone = (
                f"{self._path} is now {why}: it was moved, linked or copied over the ledger "
                "this handle read; open it anew"
            )
            raise StoreError(self._gone)

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        for _ in range(_ATTEMPTS):  # no connection: _connection() says why
            fresh = self._seen is None or self._reading > 0  # SQLite's locks, or pinned
            if not fresh and self._stale():
                self._reconnect()
            try:
                rows = self._connection().execute(sql, tuple(params)).fetchall()
            except sqlite3.Error as e:
                if fresh or not self._stale():
                    raise self._failure(e) from e
                continue  # it changed while read: read it again
            except OverflowError as e:  # an integer beyond SQLite's 64 bits
                raise StoreError(f"SQLite ledger {self._path}: {e}") from e
            if fresh or not self._stale():
                return rows
        raise self._changed()

    def _changed(self) -> LedgerChanged:
        return LedgerChanged(
            f"SQLite ledger {self._path} changed while this read handle read it (another "
            "process wrote to it; nothing is wrong with it): read again"
        )

    def _failure(self, e: sqlite3.Error) -> StoreError:
        """The StoreError for an SQLite error met reading or writing."""
        if is_damage(e):
            return StoreError(
                f"SQLite ledger {self._path} is damaged: {e}; it fails `dpledger ledger "
                "verify`: restore it from a backup"
            )
        return StoreError(f"SQLite ledger {self._path}: {e}")

    def _list(self, values: Sequence[object]) -> object:
        return json.dumps(list(values))

    def _write_rows(
        self,
        entries: Sequence[tuple[Any, ...]],
        spend: Sequence[tuple[int, str, str, str]],
        head: tuple[int, str],
    ) -> None:
        conn = self._connection()
        try:
            conn.executemany(INSERT_ENTRY, entries)
            conn.executemany(UPSERT_SPEND, spend)
            conn.executemany(SQL.set_meta, [("head_seq", str(head[0])), ("head_hash", head[1])])
        except (sqlite3.Error, OverflowError) as e:
            raise StoreError(f"SQLite ledger {self._path}: {e}") from e

    @contextmanager
    def _begin_write(
        self, epochs: Sequence[int], meanwhile: Callable[[], object] | None
    ) -> Iterator[None]:
        # ``meanwhile`` runs before the lock
        del epochs  # an in-process read costs no round trip: loaded as usual
        if meanwhile is not None:
            meanwhile()
        kept, self._kept, self._pending = self._kept, None, None
        try:
            self._execute("BEGIN IMMEDIATE")
            unless_removed(self._connection(), f"SQLite ledger {self._path}")
            # read under the write lock: equal to the kept state's version only if no
            # other connection committed since this one's last write transaction began
            (version,) = self._execute("PRAGMA data_version")[0]
            self._version = int(version)
            if kept is not None and kept.version == self._version:
                self._kept = kept
            yield
        except BaseException as e:
            self._kept = self._pending = self._version = None
            # a failed rollback must not mask the original error
            with contextlib.suppress(sqlite3.Error):
                self._connection().rollback()
            unrecorded(e, self._timeout_s)  # raises e, a store's failure saying what became of it
        pending, self._pending, self._kept, self._version = self._pending, None, None, None
        try:
            self._execute("COMMIT")
        except StoreError as e:
            # leave no half-open transaction behind: every later BEGIN would fail
            with contextlib.suppress(sqlite3.Error):
                self._connection().rollback()
            unrecorded(e, self._timeout_s, commit=True)
        sqlite_files.save_if_moved(self._connection())  # renamed meanwhile: keep its commits
        self._kept = pending  # only a committed flush is kept; any other write drops it

    def _flushed(
        self,
        head: tuple[int, str],
        spend: dict[int, dict[tuple[str, str], Fraction]],
        scopes: dict[int, dict[str, Fraction]],
    ) -> None:
        if self._version is None:
            return
        # epochs kept from earlier transactions are still valid (the version is unchanged):
        # extended in place, not copied (a transaction that fails drops the kept state whole)
        kept = self._kept
        totals, sums = (kept.spend, kept.scopes) if kept is not None else ({}, {})
        for e, t in spend.items():
            totals[e], sums[e] = dict(t), dict(scopes[e])
        while len(totals) > _KEPT_EPOCHS:  # the oldest epochs go first
            oldest = min(totals)
            del totals[oldest], sums[oldest]
        self._pending = _Kept(self._version, head, totals, sums)
        self._kept = None  # a read later in this transaction must see what it just wrote

    def _load_state(self, epochs: Sequence[int], release_ids: Sequence[str]) -> TxnState:
        """The kept state when no other connection has written since, else a fresh read."""
        kept = self._kept
        if (
            kept is None
            or kept.version != self._version
            or any(e not in kept.spend for e in epochs)
        ):
            return super()._load_state(epochs, release_ids)
        spend = {e: dict(kept.spend[e]) for e in epochs}
        scopes = {e: dict(kept.scopes[e]) for e in epochs}
        return TxnState(spend, kept.head, self._find_releases(release_ids), scopes)

    def check_as_writer(self) -> None:
        """A read handle's dry run meets a writer's refusal of a foreign trigger (review 42)."""
        if self.mode == "read" and (found := foreign_triggers(self._execute(TRIGGERS))):
            raise LedgerCorrupted(f"{self._path}: {found[0]}; nothing was written")

    def integrity_problems(self) -> list[str]:
        """SQLite's ``PRAGMA quick_check``: damaged pages or indexes the chain never reads
        (a broken unique index on release ids would let a retry be recorded twice)."""
        with self._lock:
            rows, triggers = self._execute("PRAGMA quick_check(20)"), self._execute(TRIGGERS)
        found = [str(r[0]) for r in rows if str(r[0]) != "ok"]
        return [f"SQLite integrity check: {p}" for p in found] + foreign_triggers(triggers)

    @contextmanager
    def _read_transaction(self) -> Iterator[None]:
        # in WAL mode a deferred transaction reads one snapshot from its first read on;
        # read without SQLite's locks, it is one only if the file did not change meanwhile
        self._execute("BEGIN DEFERRED")  # reconnects first if the file changed
        self._reading += 1
        try:
            yield
        except (StoreError, LedgerCorrupted, sqlite3.Error) as e:  # a mixed read's symptoms
            if self._reading == 1 and self._stale():
                raise self._changed() from e
            raise
        else:
            if self._reading == 1 and self._stale():
                raise self._changed()
        finally:
            self._reading -= 1
            with contextlib.suppress(sqlite3.Error):
                self._connection().rollback()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(self._gone) if self._gone else LedgerNotFound(self._no_ledger())
        return self._conn

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self._conn is None:
            return
        try:
            sqlite_files.close(self._conn)
        except sqlite3.Error as e:
            raise StoreError(f"closing {self._path}: {e}") from e
        finally:
            self._drop_copy()

"""The embedded SQLite store: WAL, ``synchronous=FULL``, ``BEGIN IMMEDIATE`` writes.

``BEGIN IMMEDIATE`` takes SQLite's single write lock at the start of the transaction,
so the budget re-check, the entry and the spend update of one release are serialised
against every other writer — threads and processes alike. Triggers refuse UPDATE and
DELETE on entries (append-only); :meth:`Ledger.verify` detects an edited or removed
entry unless the editor also rewrites every later hash, the head and the spend — which
``verify(expected_head=…)`` catches against a head recorded outside the database.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dpledger.errors import StoreError
from dpledger.ledger.store import SqlStore

__all__ = ["SqliteStore"]

_TRIGGERS = (
    """CREATE TRIGGER IF NOT EXISTS dpl_entries_no_update BEFORE UPDATE ON dpl_entries
       BEGIN SELECT RAISE(ABORT, 'dpledger entries are append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS dpl_entries_no_delete BEFORE DELETE ON dpl_entries
       BEGIN SELECT RAISE(ABORT, 'dpledger entries are append-only'); END""",
)


class SqliteStore(SqlStore):
    """A ledger in one SQLite file (or ``:memory:`` for throwaway use)."""

    def __init__(self, path: str | Path, *, timeout_s: float = 60.0) -> None:
        super().__init__()
        self._path = str(path)
        try:
            self._conn = sqlite3.connect(
                self._path, timeout=timeout_s, isolation_level=None, check_same_thread=False
            )
            self._conn.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
            self._enable_wal(timeout_s)
            self._conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as e:
            raise StoreError(f"cannot open SQLite ledger {self._path}: {e}") from e

    def _enable_wal(self, timeout_s: float) -> None:
        """Switch to WAL, retrying while another process holds the file.

        Changing the journal mode answers "database is locked" at once, without the
        busy handler, when a second process is opening the same fresh file.
        """
        deadline = time.monotonic() + timeout_s
        delay = 0.001
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.05)

    @property
    def location(self) -> str:
        """The database file path."""
        return self._path

    def init_schema(self, binding: dict[str, str], policy: tuple[str, str, str]) -> None:
        """Create tables, append-only triggers and the policy binding."""
        super().init_schema(binding, policy)
        with self._write_transaction():
            for t in _TRIGGERS:
                self._raw_execute(t)

    def _raw_execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._conn.execute(sql, tuple(params)).fetchall()
        except sqlite3.Error as e:
            raise StoreError(f"SQLite ledger {self._path}: {e}") from e

    @contextmanager
    def _write_transaction(self) -> Iterator[None]:
        self._raw_execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            # a failed rollback must not mask the original error
            with contextlib.suppress(sqlite3.Error):
                self._conn.rollback()
            raise
        try:
            self._raw_execute("COMMIT")
        except StoreError:
            # leave no half-open transaction behind: every later BEGIN would fail
            with contextlib.suppress(sqlite3.Error):
                self._conn.rollback()
            raise

    @contextmanager
    def _read_transaction(self) -> Iterator[None]:
        # in WAL mode a deferred transaction reads one snapshot from its first read on
        self._raw_execute("BEGIN DEFERRED")
        try:
            yield
        finally:
            with contextlib.suppress(sqlite3.Error):
                self._conn.rollback()

    def close(self) -> None:
        """Close the connection (idempotent)."""
        try:
            self._conn.close()
        except sqlite3.Error as e:
            raise StoreError(f"closing {self._path}: {e}") from e

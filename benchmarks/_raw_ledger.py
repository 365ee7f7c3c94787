"""The floor of a durable ledger write: the ledger's own SQL, replayed by a raw loop.

:class:`RawLedgerTxn` sends exactly the statements :class:`~dpledger.ledger.sqlite.
SqliteStore` sends in one write transaction — ``BEGIN IMMEDIATE``, ``PRAGMA
data_version``, the entries' ``INSERT``, the spend upserts, the head's two meta upserts,
``COMMIT`` — to a file with the ledger's schema and pragmas (WAL, synchronous=FULL), with
the rows a real ledger wrote for the same releases (captured once, ``seq`` renumbered
per call). It is "the same transaction" the issue's floors ask for: what a release
costs over it is dpledger's own work in Python (checks, noise, hashing, the Release
values), not SQLite's cost of storing entries of the real width and indexes.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dpledger.ledger import Ledger
from dpledger.ledger.schema import COLUMNS
from dpledger.ledger.sqlite_sql import INSERT_ENTRY, SQL, UPSERT_SPEND, guard_spend
from dpledger.policy import Policy

__all__ = ["RawLedgerTxn", "captured_rows"]

Rows = list[tuple[Any, ...]]


def captured_rows(policy: Policy, release: Callable[[Ledger], object]) -> tuple[Rows, Rows]:
    """(entry rows, spend rows) a fresh ledger writes for ``release(ledger)``."""
    with tempfile.TemporaryDirectory(prefix="dpledger-bench-rows-") as d:
        path = Path(d) / "capture.db"
        with Ledger.open(path, policy, mode="create") as ledger:
            release(ledger)
        conn = sqlite3.connect(path)
        try:
            entries = conn.execute(f"SELECT {COLUMNS} FROM dpl_entries ORDER BY seq").fetchall()
            spend = conn.execute("SELECT epoch, scope, metric, total FROM dpl_spend").fetchall()
        finally:
            conn.close()
    if not entries:
        raise RuntimeError("the captured release wrote no entry")
    return entries, spend


class RawLedgerTxn:
    """One raw durable write transaction per call: the ledger's statements and rows."""

    def __init__(self, path: Path, policy: Policy, entries: Rows, spend: Rows) -> None:
        with Ledger.open(path, policy, mode="create") as ledger:  # the SQLite store's own
            ledger.init()  # schema (seq is the rowid: no extra index) and WAL journal
        self._conn = sqlite3.connect(path, isolation_level=None)
        guard_spend(self._conn)  # schema 4: the spend guard's function, as the ledger registers
        self._conn.execute("PRAGMA synchronous=FULL")
        self._entries = entries
        self._spend = spend
        self._seq = 0

    def __call__(self, i: int) -> None:
        """BEGIN IMMEDIATE, data_version, entries, spend, head, COMMIT."""
        del i
        base, self._seq = self._seq, self._seq + len(self._entries)
        rows = [
            (base + k + 1, *r[1:14], None if r[14] is None else f"{r[14]}/{base}", *r[15:])
            for k, r in enumerate(self._entries)
        ]
        c = self._conn
        c.execute("BEGIN IMMEDIATE")
        c.execute("PRAGMA data_version").fetchall()
        c.executemany(INSERT_ENTRY, rows)
        c.executemany(UPSERT_SPEND, self._spend)
        c.executemany(SQL.set_meta, [("head_seq", str(self._seq)), ("head_hash", rows[-1][-1])])
        c.execute("COMMIT")

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

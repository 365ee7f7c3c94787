"""Whether a ledger read without SQLite's locks has changed since its handle opened it.

A read handle on a ledger nobody had open reads the file ``immutable`` (no ``-wal`` or
``-shm`` is created beside it), or a private copy of it (:mod:`.sqlite_copy`). SQLite
then assumes the file never changes: a long-lived read handle missed every later release
of another process, and once that process's checkpoint rewrote pages under it, reported
the sound ledger "damaged … database disk image is malformed; restore it from a backup"
(review s26). :func:`seen` records what the file and its sidecars looked like when the
handle connected; the store reconnects when they differ (each statement checks first, and
a statement during which they changed is read again), so a read handle sees the ledger
as it is and never calls a change damage.
"""

from __future__ import annotations

import os
import sqlite3

from dpledger.errors import DpLedgerError
from dpledger.ledger.schema import head_of

__all__ = ["Identity", "Seen", "identity", "seen", "successor"]

Seen = tuple[tuple[int, ...], tuple[int, ...] | None, tuple[int, ...] | None]
"""(the file's device, inode, size, modification and change times in ns; the ``-wal``'s
and the ``-shm``'s inode, size and modification time, or None where there is none)."""


def seen(name: str) -> Seen | None:
    """The file at the resolved path ``name`` and its sidecars as they are now; None
    when the file cannot be read (removed or replaced: the next connect says why). A
    log's size and time are in it: a copy read of a crashed writer's log sees another
    writer's commits appended to it (review 40)."""
    try:
        st = os.stat(name)
    except OSError:
        return None
    ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return ident, _side(f"{name}-wal"), _side(f"{name}-shm")


def _side(path: str) -> tuple[int, ...] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


Identity = tuple[tuple[str, str], int, str]
"""What a read handle has seen of its ledger: (policy name, unit), head seq, head hash."""


def identity(conn: sqlite3.Connection) -> Identity | None:
    """The ledger's :data:`Identity` through ``conn``; None when it cannot be read
    (nothing to compare)."""
    try:
        rows = dict(
            conn.execute(
                "SELECT key, value FROM dpl_meta WHERE key IN "
                "('policy_name', 'unit', 'head_seq', 'head_hash')"
            ).fetchall()
        )
        head = head_of(rows, "")
    except (sqlite3.Error, DpLedgerError):
        return None
    return (str(rows.get("policy_name")), str(rows.get("unit"))), *head


def successor(conn: sqlite3.Connection, was: Identity) -> str:
    """Why the ledger through ``conn`` is not the one seen as ``was`` (another ledger, or
    an older copy: its chain does not hold the head seen), or "" when it extends it."""
    now = identity(conn)
    if now is None:
        return ""  # unreadable: the read that follows says why
    if now[0] != was[0]:
        return f"another ledger (policy and unit {now[0]}, not {was[0]})"
    if was[1] == 0:
        return ""
    try:
        row = conn.execute("SELECT hash FROM dpl_entries WHERE seq = ?", (was[1],)).fetchone()
    except sqlite3.Error:
        return ""
    if row is None or str(row[0]) != was[2]:
        return f"a ledger whose chain does not hold entry {was[1]} as this handle read it"
    return ""

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

__all__ = ["Seen", "binding", "seen"]

Seen = tuple[tuple[int, ...], bool, bool]
"""(the file's device, inode, size, modification and change times in ns; whether a
``-wal``, whether a ``-shm`` is beside it)."""


def seen(name: str) -> Seen | None:
    """The file at the resolved path ``name`` and its sidecars as they are now; None
    when the file cannot be read (removed or replaced: the next connect says why)."""
    try:
        st = os.stat(name)
    except OSError:
        return None
    ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return ident, os.path.lexists(f"{name}-wal"), os.path.lexists(f"{name}-shm")


def binding(conn: sqlite3.Connection) -> tuple[tuple[str, str], ...] | None:
    """The ledger's policy binding (policy name, budget unit) read through ``conn``;
    None when it cannot be read (the caller then has nothing to compare)."""
    try:
        rows = conn.execute(
            "SELECT key, value FROM dpl_meta WHERE key IN ('policy_name', 'unit') ORDER BY key"
        ).fetchall()
    except sqlite3.Error:
        return None
    return tuple((str(k), str(v)) for k, v in rows)

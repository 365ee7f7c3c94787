"""Whether a held SQLite file still has a name: a process never writes into, or reads
from, a ledger or key store that was removed or had another file moved over its name."""

from __future__ import annotations

import contextlib
import os
import sqlite3

from dpledger._sqlite_files import opened_as
from dpledger.errors import StoreError

__all__ = ["unless_removed"]


def unless_removed(conn: sqlite3.Connection, what: str) -> None:
    """Refuse (:class:`StoreError`) to use ``conn`` once its file has no name left
    (removed, or another file moved over its name: a restore by ``mv``). SQLite writes on
    into the unlinked file, and every commit would vanish with it, its spend with it (review
    42: a long-lived ``serve`` answered 201 for each). A renamed file keeps its commits and
    passes. One ``stat`` while the file is at its name; then Linux's ``/proc/self/fd``
    tells its link count (elsewhere it cannot be told, and passes)."""
    where = opened_as(conn)
    if where is None:
        return
    with contextlib.suppress(OSError):
        st = os.stat(where[1])
        if (st.st_dev, st.st_ino) == where[0]:
            return  # at its name
    with contextlib.suppress(OSError):
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                st = os.stat(f"/proc/self/fd/{fd}")
                if (st.st_dev, st.st_ino) == where[0] and st.st_nlink == 0:
                    raise StoreError(
                        f"{what}: the file this process opened was removed (deleted, or "
                        "another moved over its name) while it held it: a write would be "
                        "lost with it, a read would miss what was written at the name since; "
                        "stop every process using it, put it back at its name (a ledger: "
                        "verify it against the last head kept outside it), start them again"
                    )

"""The service key store's SQLite file: checked, connected to and created safely.

Kept apart from :mod:`dpledger.service.store`, which uses it. A store is built in a
temporary file beside it (:func:`dpledger._creating.temp_for`: its name records the
creator's pid and host), then linked into place; a creator killed (``kill -9``) in between
leaves that file, which the next open for creating or writing removes
(:func:`dpledger._creating.remove_dead`: only files of that form whose creator no longer
runs on this host). A read-only open removes nothing.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from dpledger import _sqlite_files as sqlite_files
from dpledger._creating import check_room, remove_dead, temp_for, unwritable
from dpledger._files import SQLITE_SIDECARS, check_sidecars
from dpledger._sqlite_files import check_sqlite_file
from dpledger.errors import StoreError
from dpledger.ledger.sqlite_copy import drop_copy, read_copy
from dpledger.ledger.sqlite_errors import out_of_reach

__all__ = ["build", "check_file", "connect"]


def check_file(p: Path, *, write: bool) -> None:
    """Refuse anything at ``p`` that is not an SQLite database file (reading only). An open
    that may write (create or write) first removes what killed creators of it left
    (:func:`dpledger._creating.remove_dead`); a read never removes anything."""
    if write:
        remove_dead(p)
    check_sqlite_file(p, f"the key store {p}", kind="key store", why={
        "directory": f"{p} is a directory, not a dpledger key store: pass another --keys path",
        "special": f"{p} is not a regular file, so not a dpledger key store",
        "empty": f"{p} is an empty file (0 bytes), not a dpledger key store: move it away "
                 "(it is never adopted as a key store)",
        "foreign": f"{p} is not an SQLite database, so not a dpledger key store: move it away "
                   "or pass another --keys path",
    })  # fmt: skip


def connect(
    p: Path, *, read_only: bool, private: bool = False
) -> tuple[sqlite3.Connection, Path | None]:
    """A connection to the existing file ``p`` that can never create it, and the private
    copy it reads, if any (the caller removes it with ``drop_copy`` after closing).

    Read-only, it writes nothing: through the WAL when one is beside it (a read-only
    connection never checkpoints), else ``immutable`` (no ``-wal``/``-shm`` is made).
    ``private``: a store left with a ``-wal`` but no ``-shm``, where SQLite would create
    the ``-shm``, or with a hot journal, is read from a private copy
    (:mod:`dpledger.ledger.sqlite_copy`).
    """
    # before SQLite adopts a file beside it (skipped while this process has it open)
    sqlite_files.unless_held(p, lambda: check_sidecars(str(p), "key store"))
    if not read_only:  # before SQLite creates a -wal/-shm it could not use
        sqlite_files.check_writable(p, "key store")
    path, target = quote(str(p.resolve())), p
    found = read_copy(p, os.path.realpath(p)) if private and read_only else None
    where = None if found is None else found[0].parent  # the directory drop_copy removes
    if found is not None:  # a -wal without its -shm, or a hot journal
        target, uri = found
    elif not read_only:
        uri = f"file:{path}?mode=rw"
    elif Path(f"{p.resolve()}-wal").exists():  # a -shm alone is a copy's: mode=ro adds a -wal
        uri = f"file:{path}?mode=ro"
    else:
        uri = f"file:{path}?immutable=1"
    try:
        conn = sqlite_files.connect(target, uri, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as e:
        drop_copy(where)
        raise _unopened(p, e) from e
    try:
        conn.execute("PRAGMA busy_timeout=30000")
        if read_only:
            conn.execute("PRAGMA query_only=ON")
        else:
            conn.execute("PRAGMA synchronous=FULL")
    except sqlite3.Error as e:
        sqlite_files.close(conn)
        drop_copy(where)
        raise _unopened(p, e) from e
    return conn, where


def _unopened(p: Path, e: sqlite3.Error) -> StoreError:
    """Why the key store ``p`` could not be opened: SQLite's words, and what to check when
    it is only out of reach (a full disk: "disk I/O error" alone, review 41)."""
    hint = out_of_reach(e)
    return StoreError(f"cannot open the key store {p}: {e}" + (f": {hint}" if hint else ""))


def build(target: Path, fill: Callable[[Path], None]) -> None:
    """Create the key store ``target``: ``fill`` builds it complete in a ``0600`` temporary
    file, which is then linked into place.

    ``os.link`` never replaces a file: a concurrent creator that won keeps its store (and
    this one opens theirs); a half-built store is never seen at ``target``.
    """
    check_room(target, "key store path")
    stale = [s for s in SQLITE_SIDECARS if Path(f"{target}{s}").exists()]
    if stale:
        raise StoreError(
            f"{target} does not exist but {', '.join(f'{target}{s}' for s in stale)} does: "
            "a key store's journal without its database; move it away first"
        )
    tmp = temp_for(target)  # records pid and host: a killed creator's is removed later
    try:  # the file holds key digests: readable by its owner only
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        fill(tmp)
        with contextlib.suppress(FileExistsError):  # another creator won: open theirs
            os.link(tmp, target)
    except (OSError, sqlite3.Error, StoreError) as e:
        why = e.__cause__ if isinstance(e.__cause__, sqlite3.Error) else e  # SQLite's words
        raise StoreError(f"cannot create the key store {target}: {why}{unwritable(target)}") from e
    finally:
        sqlite_files.remove_built(tmp)

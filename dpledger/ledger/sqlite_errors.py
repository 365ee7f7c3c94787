"""What an SQLite error says about a ledger file: damaged, or only out of reach."""

from __future__ import annotations

import sqlite3
from typing import NoReturn

from dpledger.errors import CommitUnknown, StoreError

__all__ = ["is_damage", "not_a_ledger", "out_of_reach", "unrecorded"]

_ACCESS = frozenset({3, 8, 14})  # SQLITE_PERM, SQLITE_READONLY, SQLITE_CANTOPEN
_BUSY = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED: another writer holds the lock
_DAMAGED = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB: the file, not the moment


def is_damage(e: BaseException | None) -> bool:
    """Whether ``e`` (or the SQLite error behind it) says the database file is damaged.

    A damaged file stays a :class:`StoreError` where it is met (the write did not happen),
    but ``dpledger ledger verify`` reports it as a failed verification.
    """
    while e is not None and not isinstance(e, sqlite3.Error):
        e = e.__cause__
    if e is None:
        return False
    # a table or column of the schema the ledger was opened with is gone (audit s29, F13)
    return getattr(e, "sqlite_errorcode", 0) & 0xFF in _DAMAGED or str(e).startswith(_MISSING)


_MISSING = ("no such table: dpl_", "no such column: ")


def out_of_reach(e: sqlite3.Error) -> str:
    """What to check when SQLite could not open the file for lack of permission or of
    disk space, or for an I/O error (the file may be fine); "" for any other error.

    A full disk fails opening a WAL database with SQLITE_IOERR_SHMSIZE (its ``-shm``
    cannot grow): it was reported as "not a readable SQLite database" (review 41)."""
    code = getattr(e, "sqlite_errorcode", 0) & 0xFF
    if code in _ACCESS:
        return "check the permissions of the file, of its directory and of any -wal/-shm beside it"
    if code in (10, 13):  # SQLITE_IOERR, SQLITE_FULL
        return (
            "SQLite could not read or write it or its -wal/-shm: check the free space and "
            "health of its file system, then retry (nothing was changed)"
        )
    return ""


def not_a_ledger(path: str) -> str:
    """Why the SQLite database at ``path`` is refused as a ledger."""
    return (
        f"{path} is an SQLite database but not a dpledger ledger (no dpl_meta table); use "
        "another path for a new ledger"
    )


def unrecorded(e: BaseException, wait_s: float, *, commit: bool = False) -> NoReturn:
    """Raise ``e``, an SQLite write transaction's failure, saying what became of the write
    and what to do (review 41: "database or disk is full" alone said neither). Only a
    plain :class:`StoreError` is reworded; anything else (a refusal, a missing ledger, an
    interrupt) is raised as it is."""
    if type(e) is not StoreError:
        raise e
    cause = e.__cause__ or e  # the database's own error stays the cause (the stores' contract)
    code = getattr(cause, "sqlite_errorcode", 0) & 0xFF
    if code in _BUSY:
        said = f"another writer held the ledger's write lock for over {wait_s:g} s; nothing "
        raise StoreError(f"{e}: {said}was recorded, retry") from cause
    if commit:
        raise CommitUnknown(
            f"{e}: COMMIT failed, its outcome is unknown and no value was returned (the spend "
            "may have been recorded: over-counted, never under-counted); check the ledger's "
            "entries (a request made with a release_id: a retry under it returns the "
            "recorded release, if there is one)"
        ) from cause
    said = "nothing was recorded (rolled back): fix the cause, then retry"
    raise StoreError(f"{e}; {said}") from cause

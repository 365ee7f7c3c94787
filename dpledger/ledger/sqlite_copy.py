"""A private copy to read a ledger left with a ``-wal`` but no ``-shm``, or with a hot
rollback journal.

SQLite reads a WAL database only through its ``-shm`` (the index of the log), and creates
one beside the file when none is there, even on a read-only connection: a read of a copy
of a crashed ledger (its file and ``-wal``, as a backup takes them) created a 32 KiB
``-shm`` beside it, and in a directory its reader cannot write failed with "unable to open
database file". Nobody holds such a ledger (a WAL connection keeps its ``-shm``), so the
file and its log are copied into a directory this process creates and removes, and read
there: nothing is created or changed beside the ledger, and no write permission is
needed. The copy costs the ledger's size in the system's temporary directory while the
read handle is open; when the ledger or its sidecars change, the handle reconnects
(:mod:`.sqlite_fresh`): to a new copy, or in place once a ``-shm`` is there.

A ledger in rollback-journal mode whose writer was killed mid-transaction has a hot
``-journal``: the file holds pages of a transaction that never committed, which the next
writer rolls back. Read ``immutable``, SQLite ignores the journal and the torn file read as
"damaged … restore it from a backup"; read ``mode=ro``, SQLite refuses it (it must roll
back first). So the file and its journal are copied alike and the copy, opened read-write
(it is private), is rolled back there: the read sees the committed ledger (review 39).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from dpledger import _sqlite_files as sqlite_files
from dpledger._sqlite_files import _SHM_LOCK_BYTES as SHM_LOCK_BYTES
from dpledger._sqlite_files import _SHM_LOCKS as SHM_LOCKS
from dpledger._sqlite_files import _locked as locked
from dpledger.errors import StoreError

__all__ = [
    "drop_copy",
    "hot_journal",
    "lacks_table",
    "left_by_a_crash",
    "log_without_index",
    "private_copy",
    "read_copy",
]

_JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")  # a rollback journal's live header

_Seen = tuple[tuple[int, ...], tuple[int, ...]]


def log_without_index(name: str) -> bool:
    """Whether the database at the resolved path ``name`` has a ``-wal`` but no ``-shm``."""
    return os.path.lexists(f"{name}-wal") and not os.path.lexists(f"{name}-shm")


def hot_journal(name: str) -> bool:
    """Whether the database at the resolved path ``name`` has no ``-wal`` and a ``-journal``
    with a live header (a transaction's, not yet committed or rolled back); read without
    blocking or writing (the sidecar check already refused anything not SQLite's)."""
    if os.path.lexists(f"{name}-wal"):
        return False
    return _probe(f"{name}-journal", lambda fd: os.read(fd, 8) == _JOURNAL_MAGIC)


def _probe(path: str, test: Callable[[int], bool]) -> bool:
    """``test`` on a descriptor of ``path`` if it is a regular file, opened without blocking
    (a FIFO never hangs the read); False if it cannot be opened or read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and test(fd)
    except OSError:
        return False
    finally:
        os.close(fd)


def left_by_a_crash(p: Path, name: str) -> bool:
    """Whether the database ``p`` (resolved: ``name``) has a ``-wal`` and a ``-shm`` that
    no connection has open (Linux: nobody holds a lock in the ``-shm``, where every WAL
    connection holds one while open; this process holds no connection to ``p``): what a
    writer killed with its log uncheckpointed leaves. SQLite opening it even read-only
    takes the index over, truncates and rebuilds it: a read rewrote the ``-shm`` beside
    the ledger (review 40). Elsewhere (no lock probe): False, read in place."""
    if sys.platform != "linux" or not os.path.lexists(f"{name}-wal") or sqlite_files.held(p):
        return False
    return _probe(f"{name}-shm", lambda fd: not locked(fd, SHM_LOCKS, SHM_LOCK_BYTES))


def read_copy(p: Path, name: str) -> tuple[Path, str] | None:
    """The private copy to read the database ``p`` (resolved: ``name``) from and its URI,
    when it has a ``-wal`` without a ``-shm`` (or with one nobody uses: a crashed
    writer's, :func:`left_by_a_crash`) or a hot journal; else None."""
    crashed = not log_without_index(name) and left_by_a_crash(p, name)
    side = "-wal" if log_without_index(name) or crashed else None
    side = side or ("-journal" if hot_journal(name) else None)
    copy = private_copy(p, name, side, crashed=crashed) if side is not None else None
    if copy is None:
        return None
    return copy, f"file:{quote(str(copy))}?mode={'ro' if side == '-wal' else 'rw'}"


def _seen(name: str, side: str = "-wal", crashed: bool = False) -> _Seen | None:
    """The file and its ``side`` file as they are (inode, size, change time), or None when
    that is gone or no longer calls for a copy (a ``-shm`` appeared beside a log, or, for
    a ``crashed`` writer's, its index's size or time changed: someone opened it, and it is
    read in place; a ``-wal`` appeared beside a journal)."""
    try:
        db, wal = os.stat(name), os.stat(f"{name}{side}")
    except OSError:
        return None
    if crashed:
        with contextlib.suppress(OSError):
            shm = os.stat(f"{name}-shm")
            return (db.st_ino, db.st_size, db.st_mtime_ns), (
                wal.st_ino, wal.st_size, wal.st_mtime_ns, shm.st_size, shm.st_mtime_ns
            )  # fmt: skip
        return None
    if os.path.lexists(f"{name}-shm" if side == "-wal" else f"{name}-wal"):
        return None
    return (db.st_ino, db.st_size, db.st_mtime_ns), (wal.st_ino, wal.st_size, wal.st_mtime_ns)


def private_copy(p: Path, name: str, side: str = "-wal", *, crashed: bool = False) -> Path | None:
    """A copy of the database ``p`` (resolved: ``name``) and its ``side`` file (``-wal`` or
    ``-journal``), in a new private temporary directory (remove it with :func:`drop_copy`);
    None when it stopped calling for a copy meanwhile (then read it in place). A file that
    keeps changing while it is copied is a :class:`StoreError`."""
    why = "a writer killed mid-transaction left a hot -journal"
    if side == "-wal":
        why = "it has a -wal but no -shm (a copy of a crashed ledger?)"
    try:
        where = Path(tempfile.mkdtemp(prefix="dpledger-read-"))
    except OSError as e:  # no usable temporary directory (read-only, missing, full)
        raise StoreError(
            f"cannot read {p}: {why}, so it is read from a private copy, and no temporary "
            f"directory could be made for it ({e.strerror or e}); set TMPDIR to a writable "
            "directory, then retry"
        ) from e
    copy = where / "ledger.db"
    try:
        for _ in range(3):
            before = _seen(name, side, crashed)
            if before is None:
                drop_copy(where)
                return None

            def refuse() -> BaseException:
                return StoreError(f"{p} is open in this process; read it through that handle")

            try:
                with sqlite_files.unheld(p, refuse):  # a copy's descriptor drops no lock
                    shutil.copyfile(name, copy)
                    shutil.copyfile(f"{name}{side}", f"{copy}{side}")
            except FileNotFoundError:  # a writer checkpointed and removed the log meanwhile
                if not where.is_dir():  # no: the temporary directory itself went away
                    raise
                continue  # _seen decides again: read in place, or copy again
            if crashed and not left_by_a_crash(p, name):  # someone opened it meanwhile:
                drop_copy(where)  # a checkpoint may have raced the copy; read in place
                return None
            if _seen(name, side, crashed) == before:
                return copy
    except OSError as e:
        drop_copy(where)
        raise StoreError(
            f"cannot read {p}: {why}, so it is read from a private copy, and copying it "
            f"failed: {e.strerror}; copy the file and its {side} elsewhere and read that copy"
        ) from e
    except BaseException:
        drop_copy(where)
        raise
    drop_copy(where)
    raise StoreError(
        f"{p} changed each time it was copied to be read ({why}, and a process is writing "
        f"it): retry"
    )


def drop_copy(where: Path | None) -> None:
    """Remove a directory :func:`private_copy` made (None: nothing to do)."""
    if where is not None:
        with contextlib.suppress(OSError):
            shutil.rmtree(where)


def lacks_table(p: Path, table: str) -> bool:
    """Whether the SQLite database file ``p`` itself, read ``immutable`` (no sidecar opened,
    nothing written), has no table ``table``; False when it has it or cannot be read so.

    A writer asks first: SQLite opening another application's database read-write
    recovers its WAL and, on closing, checkpoints it into that file and deletes its ``-wal``
    and ``-shm`` (review 39). A ledger's tables are in its file, whatever its WAL holds:
    it is built, closed (checkpointed) and only then linked into place — except one
    dpledger 0.1 created in place, whose writer was killed (or still runs) before its
    first checkpoint: its tables are only in its ``-wal``, so a file without ``table`` is
    read once more with its log, in a private copy (review 41). A file
    with a hot journal is torn until that is rolled back, which the read-write open would
    do in place (rewriting another application's file, deleting its journal): it is read
    in a private copy, rolled back there, as a read does (False when no copy can be made)."""
    name = os.path.realpath(p)
    target, uri, where = p, f"file:{quote(name)}?immutable=1", None
    if hot_journal(name):
        try:
            copy = private_copy(p, name, "-journal")
        except StoreError:  # no temporary directory, or the file keeps changing
            return False  # whoever opens it next says why
        if copy is not None:  # else the journal is gone: read the file as it is
            target, uri, where = copy, f"file:{quote(str(copy))}?mode=rw", copy.parent
    try:
        missing = not _has_table(target, uri, table)
    except sqlite3.Error:
        return False  # whoever opens it next says why
    finally:
        drop_copy(where)
    return missing and not _in_log(p, name, table)


def _has_table(target: Path, uri: str, table: str) -> bool:
    conn = sqlite_files.connect(target, uri)
    try:
        return bool(
            conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
            ).fetchall()
        )
    finally:
        sqlite_files.close(conn)


def _in_log(p: Path, name: str, table: str) -> bool:
    """Whether the database ``p`` (resolved: ``name``) has ``table`` as its ``-wal``
    leaves it: read in a private copy of both (nothing beside it is opened or made)."""
    if not os.path.lexists(f"{name}-wal"):
        return False
    try:
        where = Path(tempfile.mkdtemp(prefix="dpledger-read-"))
    except OSError:
        return False
    copy = where / "ledger.db"
    try:
        with sqlite_files.unheld(p, lambda: StoreError(f"{p} is open in this process")):
            shutil.copyfile(name, copy)  # a copy's descriptor drops no lock
            shutil.copyfile(f"{name}-wal", f"{copy}-wal")
        return _has_table(copy, f"file:{quote(str(copy))}?mode=ro", table)
    except (OSError, sqlite3.Error, StoreError):
        return False  # refused as no ledger, as before
    finally:
        drop_copy(where)

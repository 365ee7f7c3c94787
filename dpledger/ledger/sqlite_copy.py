"""A private copy to read a ledger left with a ``-wal`` but no ``-shm``.

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
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from dpledger import _sqlite_files as sqlite_files
from dpledger.errors import StoreError

__all__ = ["drop_copy", "log_without_index", "private_copy"]

_Seen = tuple[tuple[int, int, int], tuple[int, int, int]]


def log_without_index(name: str) -> bool:
    """Whether the database at the resolved path ``name`` has a ``-wal`` but no ``-shm``."""
    return os.path.lexists(f"{name}-wal") and not os.path.lexists(f"{name}-shm")


def _seen(name: str) -> _Seen | None:
    """The file and its log as they are (inode, size, change time), or None when the
    log is gone or a ``-shm`` appeared (someone opened it: it is read in place)."""
    try:
        db, wal = os.stat(name), os.stat(f"{name}-wal")
    except OSError:
        return None
    if os.path.lexists(f"{name}-shm"):
        return None
    return (db.st_ino, db.st_size, db.st_mtime_ns), (wal.st_ino, wal.st_size, wal.st_mtime_ns)


def private_copy(p: Path, name: str) -> Path | None:
    """A copy of the database ``p`` (resolved: ``name``) and its ``-wal``, in a new private
    temporary directory (remove it with :func:`drop_copy`); None when it stopped being a
    log without an index meanwhile (then read it in place). A file that keeps changing
    while it is copied is a :class:`StoreError`."""
    try:
        where = Path(tempfile.mkdtemp(prefix="dpledger-read-"))
    except OSError as e:  # no usable temporary directory (read-only, missing, full)
        raise StoreError(
            f"cannot read {p}: it has a -wal but no -shm (a copy of a crashed ledger?), so it "
            f"is read from a private copy, and no temporary directory could be made for it "
            f"({e.strerror or e}); set TMPDIR to a writable directory, then retry"
        ) from e
    copy = where / "ledger.db"
    try:
        for _ in range(3):
            before = _seen(name)
            if before is None:
                drop_copy(where)
                return None

            def refuse() -> BaseException:
                return StoreError(f"{p} is open in this process; read it through that handle")

            try:
                with sqlite_files.unheld(p, refuse):  # a copy's descriptor drops no lock
                    shutil.copyfile(name, copy)
                    shutil.copyfile(f"{name}-wal", f"{copy}-wal")
            except FileNotFoundError:  # a writer checkpointed and removed the log meanwhile
                if not where.is_dir():  # no: the temporary directory itself went away
                    raise
                continue  # _seen decides again: read in place, or copy again
            if _seen(name) == before:
                return copy
    except OSError as e:
        drop_copy(where)
        raise StoreError(
            f"cannot read {p}: it has a -wal but no -shm (a copy of a crashed ledger?), so "
            f"it is read from a private copy, and copying it failed: {e.strerror}; copy the "
            f"file and its -wal elsewhere and read that copy"
        ) from e
    except BaseException:
        drop_copy(where)
        raise
    drop_copy(where)
    raise StoreError(
        f"{p} changed each time it was copied to be read (it has a -wal but no -shm, and a "
        f"process is writing it): retry"
    )


def drop_copy(where: Path | None) -> None:
    """Remove a directory :func:`private_copy` made (None: nothing to do)."""
    if where is not None:
        with contextlib.suppress(OSError):
            shutil.rmtree(where)

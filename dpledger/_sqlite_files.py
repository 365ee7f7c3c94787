"""SQLite files this process holds open: read a header without dropping their locks.

POSIX advisory locks belong to a (process, file) pair: closing *any* descriptor of a file
releases every lock the process holds on it (sqlite.org/howtocorrupt.html, §2.2). A plain
``open()``/``close()`` of a database file (SQLite defers its own) drops the SHARED lock a
WAL connection keeps: another process takes itself for the last user, checkpoints and
deletes the live WAL, and both approve the same allocation (one entry is later lost).

So dpledger opens and closes every SQLite ledger and key store connection through
:func:`connect` and :func:`close`, which count connections per file (device, inode);
:func:`read_header` reads a file's first bytes, :func:`unheld` guards any other read of a
user-named file (one named by mistake may be a ledger the process holds), and
:func:`unless_held` runs a check that opens the files beside it (its ``-shm`` holds the
WAL locks) only when no connection of this process has it open (then they are SQLite's).
SQLite names those files after the path, so a path another file was renamed or moved over
while a process holds the previous one is refused (:class:`StoreError`): its
``-wal``/``-shm`` are the held file's (copying into the held file itself writes the same
inode and cannot be seen). This process knows what it holds; another process is seen on
Linux, by ``F_GETLK`` probes of SQLite's locks (its ``-shm`` in use while nobody holds the
file now at the path; or the file held while no ``-shm`` is beside this name: it was
opened by another name). A holder killed meanwhile leaves no lock: its ``-wal`` beside the
path cannot be told from the file's own. :func:`check_sqlite_file` is the check before a
ledger or key store file is opened, :func:`check_writable` the one before it is opened for
writing (SQLite would create the ``-wal``/``-shm`` as a user who cannot write the file).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import os
import sqlite3
import stat
import struct
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from dpledger import _creating as creating
from dpledger.errors import LedgerCorrupted, NotALedger, StoreError

__all__ = [
    "FileProblem",
    "check_sqlite_file",
    "check_writable",
    "close",
    "connect",
    "held",
    "opened_as",
    "read_header",
    "remove_built",
    "save_if_moved",
    "unheld",
    "unless_held",
]

_Key = tuple[int, int]  # (st_dev, st_ino)

_LOCK = threading.Lock()
_COUNT: dict[_Key, int] = {}  # open connections per file
_NAMES: dict[str, dict[_Key, int]] = {}  # open connections per resolved path, per file
_FINAL: dict[
    int, weakref.finalize[[int, _Key, str], sqlite3.Connection]
] = {}  # id(conn) → uncounts it once: at close, or at GC
_WHERE: dict[int, tuple[_Key, str]] = {}  # id(conn) → the file and name it was opened at
_GONE: deque[tuple[int, _Key, str]] = deque()
"""Connections closed or collected, uncounted by the next holder of ``_LOCK``: a collection
can run the finalizer while this very thread holds the (non-reentrant) lock, so the
finalizer only appends here (``deque.append`` is atomic) and never takes the lock."""


class _Counted(sqlite3.Connection):
    """An ``sqlite3.Connection`` that can be weakly referenced: a connection dropped
    without :func:`close` is uncounted when it is collected (and SQLite closes it)."""


def _key(p: Path | str) -> _Key | None:
    try:
        st = os.stat(p)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def held(p: Path) -> bool:
    """Whether a connection of this process (opened by :func:`connect`) has ``p`` open."""
    key = _key(p)
    with _LOCK:
        _drain()
        return key is not None and key in _COUNT


def remove_built(tmp: Path) -> None:
    """Remove a database this process built at ``tmp`` (to link into place) and any
    -wal/-shm/-journal beside it; none there is fine, and so is a ``tmp`` under a regular
    file (``NotADirectoryError``: it was never made), which must not mask why building
    failed."""
    with contextlib.suppress(NotADirectoryError):  # only names that are there: on a read-
        for suffix in ("", "-wal", "-shm", "-journal"):  # only file system, unlinking a
            if os.path.lexists(f"{tmp}{suffix}"):  # missing one fails, EROFS (review 41)
                Path(f"{tmp}{suffix}").unlink(missing_ok=True)


def read_header(p: Path, n: int) -> bytes | None:
    """The first ``n`` bytes of the regular file at ``p``; None when a connection of this
    process has it open (closing a descriptor would drop that connection's locks; it is
    SQLite's). Opened without blocking (a FIFO swapped in is refused, not waited on);
    OSError propagates (the caller names the file)."""
    key = _key(p)
    with _LOCK:  # no connection of this process opens the file meanwhile
        _drain()
        if key is not None and key in _COUNT:
            return None
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file")
            return os.read(fd, n)
        finally:
            os.close(fd)


def unless_held(p: Path, check: Callable[[], None]) -> None:
    """Run ``check`` (which opens files beside ``p``: its ``-shm`` holds SQLite's WAL
    locks) only while no connection of this process has ``p`` open; else skip it: the
    files beside an open database are SQLite's own.

    Two names for one database are :class:`StoreError`, because SQLite names the
    ``-wal``/``-shm`` after the path and two names would keep two logs: a ``p`` that names
    another file than the one this process opened there (renamed or copied over since: its
    sidecars are the held file's), a file this process holds under another name, and, seen
    in another process (:func:`_other_process_problem`), a file held there under another
    name or one put over the file that process holds under this name."""
    key, name = _key(p), _name(p)
    with _LOCK:  # no connection of this process opens the file meanwhile
        _drain()
        if any(k != key for k in _NAMES.get(name, {})):
            gc.collect()  # a handle dropped without close() but not yet collected, first
            _drain()  # (its finalizer only queues: safe under the lock)
        if any(k != key for k in _NAMES.get(name, {})):
            raise StoreError(
                f"{p} is not the file this process opened at that path: another file was "
                f"renamed, copied or created there while a handle to the first is still open "
                f"in this process, and SQLite names its -wal and -shm after the path, so the "
                f"two would share them and corrupt each other; close every handle to {p} in "
                f"this process (or restart it), then open it again"
            )
        if key is not None and key in _COUNT and key not in _NAMES.get(name, {}):
            raise StoreError(
                f"{p} is open in this process under another name (it was renamed, moved or "
                f"linked while open), and SQLite names its -wal and -shm after the path, so "
                f"the two names would keep two logs and lose or double writes; open it by the "
                f"name it was opened with, or close that handle first"
            )
        if key is None or key not in _COUNT:
            problem = _other_process_problem(p, name)
            if problem == "moved":
                raise StoreError(
                    f"{p} is in use by another process under another name: it was renamed "
                    f"or moved while open there, and SQLite names its -wal and -shm after the "
                    f"path, so the two names would keep two logs and lose or double writes; "
                    f"stop the process that has it open (or open it by the name that process "
                    f"uses), then retry; nothing was opened or changed"
                )
            if problem == "replaced":
                raise StoreError(
                    f"{p} is not the file that another process has open under this name: "
                    f"this file was moved over it (mv) while that process held it, and "
                    f"SQLite would apply that process's log (the -wal and -shm beside {p}) to "
                    f"this file and lose entries of both; stop the process that still holds "
                    f"the previous file (or let it finish), then retry; nothing was opened or "
                    f"changed"
                )
            check()


_PENDING_BYTE = 0x40000000  # SQLite's lock bytes in a database file (os_unix.c): PENDING,
_LOCK_BYTES = 512  # RESERVED, then the 510 SHARED bytes a WAL connection holds while open
_SHM_LOCKS, _SHM_LOCK_BYTES = 120, 9  # in a -shm: the 8 WAL-index locks, then the DMS byte
# (os_unix.c UNIX_SHM_BASE, UNIX_SHM_DMS) every connection with the -shm open has locked
_FLOCK = "@hhqqixxxx"  # Linux's struct flock: type, whence, start, len, pid

OtherProcess = Literal["moved", "replaced"]


def _locked(fd: int, start: int, length: int) -> bool:
    """Whether another process holds a lock on these bytes (``F_GETLK``: takes none)."""
    probe = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, start, length, 0)
    return bool(struct.unpack(_FLOCK, fcntl.fcntl(fd, fcntl.F_GETLK, probe))[0] != fcntl.F_UNLCK)


def _other_process_problem(p: Path, name: str) -> OtherProcess | None:
    """How another process uses the database at ``p`` under another name (Linux; elsewhere
    this cannot be seen, and None):

    * ``moved``: it holds SQLite's lock on this WAL database while no ``-shm`` is beside
      this name: it opened the file by another name (renamed or moved since);
    * ``replaced``: a ``-shm`` beside this name is in use (its lock bytes held) while nobody
      holds SQLite's lock on the file now at this name: those users opened another file
      here, and this one was moved over it since. SQLite would apply their log
      to this file.

    A connection holds its lock on the database file from before it opens the ``-shm``
    until after it closes it, so a legitimate user of this name is never either; one
    starting or closing is given up to ~0.5 s. Only ``F_GETLK`` (no lock is taken), one
    read-only descriptor per file (the ``-shm`` is never created), and this runs only
    while no connection of this process has ``p`` (or another file under this name) open,
    so closing them drops no lock of ours.
    """
    if sys.platform != "linux":
        return None
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None  # the caller's next step names the problem
    shm = -1
    try:
        wal = os.read(fd, 20)[18:20] == b"\x02\x02"  # a rollback-journal file never has one
        found: OtherProcess | None = None
        for _ in range(20):
            shm_here = os.path.lexists(f"{name}-shm")
            if shm_here and shm < 0:
                with contextlib.suppress(OSError):  # unreadable: its users cannot be seen
                    shm = os.open(f"{name}-shm", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                    if not stat.S_ISREG(os.fstat(shm).st_mode):
                        return None  # not SQLite's: the sidecar check names it
            shm_used = shm >= 0 and _locked(shm, _SHM_LOCKS, _SHM_LOCK_BYTES)
            db_used = _locked(fd, _PENDING_BYTE, _LOCK_BYTES)
            if db_used and not shm_here and wal:
                found = "moved"
            elif shm_used and not db_used:
                found = "replaced"
            else:
                return None
            time.sleep(0.025)
        return found
    except OSError:
        return None
    finally:
        os.close(fd)
        if shm >= 0:
            os.close(shm)


def connect(p: Path, uri: str, **kwargs: Any) -> sqlite3.Connection:
    """``sqlite3.connect(uri, uri=True, **kwargs)`` for the file at ``p``, counted before
    it exists, so no header read of this process overlaps it."""
    key, name = _key(p), _name(p)
    if key is None:  # gone meanwhile: SQLite names the problem
        conn: sqlite3.Connection = sqlite3.connect(uri, uri=True, **kwargs)
        return conn
    with _LOCK:
        _drain()
        _count(key, name)
    try:
        conn = sqlite3.connect(uri, uri=True, factory=_Counted, **kwargs)
    except BaseException:
        with _LOCK:
            _drain()
            _uncount(key, name)
        raise
    with _LOCK:
        _drain()
        _FINAL[id(conn)] = weakref.finalize(conn, _gone, id(conn), key, name)
        _WHERE[id(conn)] = (key, name)
    return conn


def close(conn: sqlite3.Connection) -> None:
    """Close ``conn`` and uncount it (idempotent; any connection may be passed)."""
    try:
        save_if_moved(conn, wait=True)
        conn.close()
    finally:
        with _LOCK:
            _drain()
            done = _FINAL.get(id(conn))
        if done is not None:
            done()  # queues _gone once; later calls (and the collection) do nothing
            with _LOCK:
                _drain()


@contextmanager
def unheld(p: Path, refuse: Callable[[], BaseException]) -> Iterator[None]:
    """Hold the registry while the body opens and closes the file at ``p`` itself; raise
    ``refuse()`` instead when a connection of this process has it open (closing any
    descriptor of it would drop that connection's locks)."""
    key, name = _key(p), _name(p)
    with _LOCK:
        _drain()
        if key is not None and key in _COUNT:
            raise refuse()
        base = next((name[: -len(s)] for s in _SIDECARS if name.endswith(s)), None)
        if base is not None and (base in _NAMES or _held_key(base)):
            raise refuse()  # a held database's -wal/-shm: SQLite keeps its WAL locks there
        yield


_SIDECARS = ("-wal", "-shm", "-journal")


def _held_key(name: str) -> bool:
    """Whether the file at ``name`` is one this process holds (under ``_LOCK``)."""
    key = _key(Path(name))
    return key is not None and key in _COUNT


def save_if_moved(conn: sqlite3.Connection, *, wait: bool = False) -> None:
    """Checkpoint ``conn``'s write-ahead log into its file and empty it if the file was
    renamed or moved since it was opened. SQLite names the log after the old path and, once
    the file has moved, its last connection neither checkpoints nor removes it: the commits
    in it would be lost to the file's new name, and replayed over it (over every later
    commit) if it ever came back to the old name. ``TRUNCATE`` after each commit (without
    waiting: a busy reader of this process makes it fail quietly, and the next commit or the
    close retries) and at close (``wait``: up to the busy timeout), so a process killed after
    a commit leaves the old name's log empty. What remains: a kill in the moment between a
    commit and its checkpoint, or while a reader of this process kept the log busy, leaves
    those commits in the old name's log. One ``stat`` when the file has not moved."""
    where = _WHERE.get(id(conn))
    if where is None or _key(where[1]) == where[0]:
        return
    with contextlib.suppress(sqlite3.Error):  # a busy reader: the next commit or close
        if wait:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return
        (waits,) = conn.execute("PRAGMA busy_timeout").fetchone()
        conn.execute("PRAGMA busy_timeout=0")
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.execute(f"PRAGMA busy_timeout={int(waits)}")


def opened_as(conn: sqlite3.Connection) -> tuple[_Key, str] | None:
    """The file (device, inode) and the resolved name :func:`connect` opened ``conn`` at."""
    return _WHERE.get(id(conn))


def _gone(ident: int, key: _Key, name: str) -> None:
    """The finalizer of a counted connection: queued, never locked (see ``_GONE``)."""
    _GONE.append((ident, key, name))


def _drain() -> None:
    """Uncount the connections closed or collected since (under ``_LOCK``)."""
    while _GONE:
        ident, key, name = _GONE.popleft()
        _FINAL.pop(ident, None)
        _WHERE.pop(ident, None)
        _uncount(key, name)


def _name(p: Path) -> str:
    """``p`` resolved as SQLite resolves it to name its ``-wal`` and ``-shm``."""
    try:
        return os.path.realpath(p)
    except (OSError, ValueError):  # a loop or an unusable name: SQLite fails on it too
        return os.path.abspath(p)


def _count(key: _Key, name: str) -> None:
    _COUNT[key] = _COUNT.get(key, 0) + 1
    files = _NAMES.setdefault(name, {})
    files[key] = files.get(key, 0) + 1


def _uncount(key: _Key, name: str) -> None:
    left = _COUNT.get(key, 0) - 1
    if left > 0:
        _COUNT[key] = left
    else:
        _COUNT.pop(key, None)
    files = _NAMES.get(name, {})
    left = files.get(key, 0) - 1
    if left > 0:
        files[key] = left
    else:
        files.pop(key, None)
        if not files:
            _NAMES.pop(name, None)


_HEADER = b"SQLite format 3\x00"

FileProblem = Literal["directory", "special", "empty", "foreign"]
"""Why a path is not an SQLite database file: a directory, not a regular file, 0 bytes, or
a file without SQLite's header."""


def check_sqlite_file(
    p: Path, what: str, why: Mapping[FileProblem, str], *, kind: str = "ledger"
) -> None:
    """Refuse ``p`` unless it is an SQLite database file, reading it without writing.

    ``what`` names the file in an OS error ("cannot open WHAT: …"); ``why`` is the message
    for each problem; ``kind`` names what it is in the hint about a killed creator's
    temporary file. A directory or special file is a :class:`StoreError`; an empty or
    foreign file is :class:`LedgerCorrupted` (never adopted: it may be what is left of one;
    a foreign one is its subclass :class:`NotALedger`).
    """
    try:
        st = p.stat()
    except OSError as e:
        if isinstance(e, FileNotFoundError) and p.is_symlink():
            raise StoreError(
                f"cannot open {what}: it is a dangling symbolic link (to {os.readlink(p)}); "
                "point it at an existing file, or remove it to create one there"
            ) from e
        raise StoreError(f"cannot open {what}: {e.strerror}") from e
    if stat.S_ISDIR(st.st_mode):
        raise StoreError(why["directory"])
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(why["special"])
    links = _settled_links(p, st.st_nlink)
    if links > 1:
        hint = creating.hint(p, kind)
        raise StoreError(
            f"{what} has {links} names (hard links){hint}: SQLite names its write-ahead log "
            f"after the path, so processes opening it by different names would each keep "
            f"their own log and lose or double writes (for a ledger: spend one budget twice); "
            f"remove the other links so that one name is left (copy with `cp` while nobody "
            f"writes, never with `ln`), then retry; nothing was opened or changed"
        )
    if st.st_size == 0:
        raise LedgerCorrupted(why["empty"])
    try:
        header = read_header(p, len(_HEADER))
    except OSError as e:
        raise StoreError(f"cannot read {what}: {e.strerror}") from e
    if header is not None and header != _HEADER:  # None: this process has it open in SQLite
        raise NotALedger(why["foreign"])


def check_writable(p: Path, what: str) -> None:
    """Refuse (:class:`StoreError`) to open ``p`` for writing unless this user may write the
    file, its directory and any ``-wal``/``-shm``/``-journal`` beside it. SQLite opens a file
    it cannot write read-only, creates the ``-wal`` and ``-shm`` as this user all the same,
    and fails only at the first write: those files, left owned by this user, then keep the
    file's owner from writing it (and, in a sticky directory like /tmp, from removing them).
    Checked before SQLite opens anything, so a refusal creates nothing."""
    name = _name(p)
    where = os.path.dirname(name) or "."
    effective = os.access in os.supports_effective_ids
    fix = (
        f"run as a user who may write them, grant that permission, or open the {what} for "
        "reading only; nothing was opened or changed"
    )
    if creating.read_only_fs(where):  # not a permission a user could be granted (review 41)
        raise StoreError(
            f"{what} {p} is on a read-only file system ({where}): remount it read-write "
            "to write it (reading needs no change); nothing was opened or changed"
        )
    if not os.access(name, os.W_OK, effective_ids=effective):
        raise StoreError(
            f"{what} {p} is not writable by this user (uid {os.geteuid()}): writing needs "
            f"write permission on the file and on its directory, where SQLite keeps its -wal "
            f"and -shm; {fix}"
        )
    if not os.access(where, os.W_OK | os.X_OK, effective_ids=effective):
        raise StoreError(
            f"the directory {where} of {what} {p} is not writable by this user (uid "
            f"{os.geteuid()}): SQLite creates and removes the -wal and -shm of a file opened "
            f"for writing there; {fix}"
        )
    for side in _SIDECARS:  # one a writer's close removed meanwhile is no obstacle
        f = name + side
        if (
            os.path.lexists(f)
            and not os.access(f, os.W_OK, effective_ids=effective)
            and os.path.exists(f)
        ):
            raise StoreError(
                f"{name + side} beside {what} {p} is not writable by this user (uid "
                f"{os.geteuid()}; another user's process may have left it or be using it): "
                f"SQLite writes there for every write to the file; {fix}"
            )


def _settled_links(p: Path, links: int) -> int:
    """``p``'s link count, given a creator up to ~0.5 s to drop its temporary name (a new
    ledger is built under a temporary name, linked into place, then unlinked there)."""
    for _ in range(20):
        if links <= 1:
            break
        time.sleep(0.025)
        try:
            links = p.stat().st_nlink
        except OSError:
            break  # gone meanwhile: the caller's next step names it
    return links

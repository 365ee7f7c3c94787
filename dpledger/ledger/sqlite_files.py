"""SQLite files this process holds open: read a header without dropping their locks.

POSIX advisory locks belong to a (process, file) pair: closing *any* descriptor of a file
releases every lock the process holds on it (sqlite.org/howtocorrupt.html, §2.2). SQLite
defers closing its own descriptors while another connection of the process holds a lock,
but a plain ``open()``/``close()`` of the database file does not: the process's write
connection then loses the SHARED lock it keeps in WAL mode, another process takes itself
for the last user, checkpoints and deletes the live WAL, and both approve the same
allocation (one of the two entries is later lost).

So dpledger opens every SQLite ledger and key store connection through :func:`connect`
and closes it through :func:`close`, which count the connections per file (device,
inode); :func:`read_header` reads a file's first bytes, and :func:`unless_held` runs a
check that opens the files beside it (its ``-shm`` holds the WAL locks), only when no
connection of this process has it open (one that has is an SQLite database already, and
the files beside it are SQLite's own). SQLite names those files after the path, so a
path another file was renamed or copied over while this process holds the previous one
is refused (:class:`StoreError`): its ``-wal``/``-shm`` are the held file's.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dpledger.errors import StoreError

__all__ = ["close", "connect", "held", "read_header", "unless_held"]

_Key = tuple[int, int]  # (st_dev, st_ino)

_LOCK = threading.Lock()
_COUNT: dict[_Key, int] = {}  # open connections per file
_NAMES: dict[str, dict[_Key, int]] = {}  # open connections per resolved path, per file
_FINAL: dict[
    int, weakref.finalize[[int, _Key, str], sqlite3.Connection]
] = {}  # id(conn) → uncounts it once: at close, or at GC


class _Counted(sqlite3.Connection):
    """An ``sqlite3.Connection`` that can be weakly referenced: a connection dropped
    without :func:`close` is uncounted when it is collected (and SQLite closes it)."""


def _key(p: Path) -> _Key | None:
    try:
        st = p.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def held(p: Path) -> bool:
    """Whether a connection of this process (opened by :func:`connect`) has ``p`` open."""
    key = _key(p)
    with _LOCK:
        return key is not None and key in _COUNT


def read_header(p: Path, n: int) -> bytes | None:
    """The first ``n`` bytes of the regular file at ``p``; None when a connection of this
    process has it open (closing a descriptor would drop that connection's locks; it is
    SQLite's). Opened without blocking (a FIFO swapped in is refused, not waited on).

    OSError propagates (the caller names the file).
    """
    key = _key(p)
    with _LOCK:  # no connection of this process opens the file meanwhile
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

    A ``p`` that names another file than the one this process opened at that path (it was
    renamed or copied over since) is :class:`StoreError`: the ``-wal``/``-shm`` beside it
    are the held file's, which opening (or checking) them would corrupt or unlock.
    """
    key, name = _key(p), _name(p)
    with _LOCK:  # no connection of this process opens the file meanwhile
        others = [k for k in _NAMES.get(name, {}) if k != key]
        if others:
            raise StoreError(
                f"{p} is not the file this process opened at that path: another file was "
                f"renamed or copied over it while the first is still open here, and SQLite "
                f"names its -wal and -shm after the path, so the two would share them and "
                f"corrupt each other; close every handle to {p} in this process (or restart "
                f"it), then open it again"
            )
        if key is None or key not in _COUNT:
            check()


def connect(p: Path, uri: str, **kwargs: Any) -> sqlite3.Connection:
    """``sqlite3.connect(uri, uri=True, **kwargs)`` for the file at ``p``, counted before
    it exists, so no header read of this process overlaps it."""
    key, name = _key(p), _name(p)
    if key is None:  # gone meanwhile: SQLite names the problem
        conn: sqlite3.Connection = sqlite3.connect(uri, uri=True, **kwargs)
        return conn
    with _LOCK:
        _count(key, name)
    try:
        conn = sqlite3.connect(uri, uri=True, factory=_Counted, **kwargs)
    except BaseException:
        with _LOCK:
            _uncount(key, name)
        raise
    with _LOCK:
        _FINAL[id(conn)] = weakref.finalize(conn, _gone, id(conn), key, name)
    return conn


def close(conn: sqlite3.Connection) -> None:
    """Close ``conn`` and uncount it (idempotent; any connection may be passed)."""
    try:
        conn.close()
    finally:
        with _LOCK:
            done = _FINAL.get(id(conn))
        if done is not None:
            done()  # runs _gone once; later calls (and the collection) do nothing


def _gone(ident: int, key: _Key, name: str) -> None:
    with _LOCK:
        _FINAL.pop(ident, None)
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

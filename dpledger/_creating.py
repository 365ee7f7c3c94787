"""The temporary file a new SQLite ledger is built in, and what a killed creator leaves.

A ledger is built as ``.NAME.PID.SPACE.RAND.creating`` beside ``NAME``, hard-linked into
place, then unlinked (:func:`temp_for`). A creator killed (``kill -9``) before the link
leaves that file; one killed between link and unlink leaves it as a second name of the
ledger, which every open refuses (two names would keep two write-ahead logs).

Such a file is dpledger's own, and may be removed by it, only when its name has this
form, it is a regular file of this user, its ``SPACE`` is this host's process space (boot
id and pid namespace: a pid means the same process here) and no process runs under its
``PID`` (:func:`dead_temps`; ``/proc`` must be this namespace's). A pid reused since
makes a dead creator look alive, so reuse only ever leaves a file; it never removes a live
creator's. A file of another form (an
older dpledger's, another host's) is left and named (:func:`hint`).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path

from dpledger.errors import InvalidInput

__all__ = [
    "Temp", "check_room", "dead_temps", "hint", "read_only_fs", "remove_dead", "temp_for",
    "unwritable",
]  # fmt: skip

_UNKNOWN = "0" * 12  # the process space of a host where it cannot be read: never removed
_FORM = re.compile(r"\.(?P<pid>[1-9][0-9]{0,9})\.(?P<space>[0-9a-f]{12})\.[0-9a-f]{8}\.creating")


@functools.cache
def _space() -> str:
    """This host's process space: a digest of its boot id and this pid namespace.

    Unknown when ``/proc`` is not this pid namespace's (``/proc/self`` names another pid:
    a namespace sharing its parent's procfs), where ``/proc/PID`` is another process."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        ns = os.readlink("/proc/self/ns/pid")
        if os.readlink("/proc/self") != str(os.getpid()):
            return _UNKNOWN
    except (OSError, UnicodeDecodeError):
        return _UNKNOWN
    return hashlib.sha256(f"{boot} {ns}".encode()).hexdigest()[:12]


def temp_for(target: Path) -> Path:
    """A new temporary name beside ``target`` to build it in (it records pid and space)."""
    return target.with_name(
        f".{target.name}.{os.getpid()}.{_space()}.{uuid.uuid4().hex[:8]}.creating"
    )


_ROOM = len(".") + len(".4294967295.") + 12 + len(".") + 8 + len(".creating-journal")
"""How much longer than a new file's name the longest name beside it may be: its
``.creating`` temporary's, with SQLite's ``-journal`` (or ``-wal``) after it."""


def check_room(target: Path, what: str) -> None:
    """:class:`InvalidInput` unless the names of the files kept beside a new ``target``
    (its temporary and SQLite's files beside that: up to :data:`_ROOM` bytes longer) fit
    its directory's file-name limit: else creating it fails half way, "name too long"."""
    try:
        limit = os.pathconf(target.parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        return  # no such directory: creating the file fails with its own error
    if len(os.fsencode(target.name)) + _ROOM > limit:
        raise InvalidInput(
            f"{what} {target}: the name is too long: the file is built under temporary "
            f"names up to {_ROOM} bytes longer, and this file system allows {limit} bytes "
            f"a name; choose a name of at most {limit - _ROOM} bytes"
        )


def read_only_fs(directory: str | os.PathLike[str]) -> bool:
    """Whether ``directory`` is on a file system mounted read-only (False if unknown)."""
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def unwritable(target: Path) -> str:
    """Why no new file can be made beside ``target`` (a missing directory, a read-only
    file system, no permission), as a clause to append to an error; "" if none is seen."""
    parent = target.parent
    try:
        if not parent.is_dir():
            return f": the directory {parent} does not exist"
    except OSError:
        return ""
    if read_only_fs(parent):
        return f": {parent} is on a read-only file system; use a writable directory"
    if not os.access(parent, os.W_OK):
        return f": this user may not create files in {parent}; use a writable directory"
    return ""


@dataclass(frozen=True, slots=True)
class Temp:
    """A ``.creating`` file beside a ledger; ``dead``: dpledger's, its creator gone."""

    path: Path
    dead: bool


def _running(pid: int) -> bool:
    """Whether a process runs under ``pid`` here (a zombie has finished: it does not)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):  # EPERM: another user's process
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def _temps(target: Path) -> list[Temp]:
    """Every ``.creating`` file named after ``target`` beside it, sorted by name."""
    prefix = f".{target.name}."
    try:
        names = sorted(n for n in os.listdir(target.parent) if n.startswith(prefix))
    except OSError:
        return []
    found = []
    for name in names:
        if not name.endswith(".creating"):
            continue
        m = _FORM.fullmatch(name[len(prefix) - 1 :])
        path = target.with_name(name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        ours = (
            m is not None
            and m["space"] == _space() != _UNKNOWN
            and stat.S_ISREG(st.st_mode)
            and st.st_uid == os.geteuid()
        )
        found.append(Temp(path, ours and m is not None and not _running(int(m["pid"]))))
    return found


def dead_temps(target: Path) -> list[Temp]:
    """The ``.creating`` files beside ``target`` that dpledger made and whose creator died."""
    return [t for t in _temps(target) if t.dead]


def remove_dead(target: Path, *, only_if_linked: bool = False) -> None:
    """Remove what killed creators of ``target`` left: their temporary file, and its
    ``-wal``/``-shm``/``-journal`` unless it is ``target``'s second name (SQLite never used
    those: the creator closed the file before linking it). ``only_if_linked``: only when
    ``target`` has a second name (an open for writing: no directory scan otherwise)."""
    try:
        st = os.stat(target)
        own: tuple[int, int] | None = (st.st_dev, st.st_ino)
    except OSError:
        own = None
    if only_if_linked and (own is None or st.st_nlink < 2):
        return
    for t in dead_temps(target):
        try:
            st = os.lstat(t.path)
            t.path.unlink()
        except OSError:  # removed by another opener first, or left: a refusal names it
            continue
        if own != (st.st_dev, st.st_ino):
            for suffix in ("-wal", "-shm", "-journal"):
                Path(f"{t.path}{suffix}").unlink(missing_ok=True)


def hint(target: Path, kind: str = "ledger") -> str:
    """What the ``.creating`` files beside ``target`` (a ``kind``) are, for a refusal."""
    temps = _temps(target)
    if not temps:
        return ""
    dead = [t.path.name for t in temps if t.dead]
    other = [t.path.name for t in temps if not t.dead]
    said = []
    if dead:
        said.append(
            f"{', '.join(dead)} beside it: left by a dpledger creation that was killed (its "
            f"process no longer runs); opening the {kind} for writing removes it, or delete it"
        )
    if other:
        said.append(
            f"{', '.join(other)} beside it: left by an interrupted creation (or one still "
            "running, or on another host); delete it once nothing is creating this file"
        )
    return f" ({'; '.join(said)})"

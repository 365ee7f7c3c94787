"""Reading user-named files safely, and refusing paths no store should take.

Every file a user names (policy, aggregate, request, held-out values, TLS material) is
read through :func:`read_bounded`: it must be a regular file (after symlinks), and at
most ``limit`` bytes are ever read, so ``/dev/zero`` cannot exhaust memory and a FIFO
with no writer cannot hang the process (it is refused by ``stat`` before any open, and
the open itself never blocks). Nor is an SQLite file this process holds open ever read:
closing a descriptor would drop its connection's locks (:mod:`dpledger._sqlite_files`).

An SQLite database path is also checked against SQLite's own files beside it
(:func:`check_sqlite_name`, :func:`check_sidecars`): a database is never named like
another's ``-wal``, ``-shm`` or ``-journal``, nor opened while such a file beside it is
not SQLite's own, since SQLite would delete or overwrite it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from dpledger._path_text import check_path_text, check_unpadded, look_alike, skeleton
from dpledger._sqlite_files import unheld
from dpledger.errors import DpLedgerError, InvalidInput

__all__ = [
    "SQLITE_SIDECARS",
    "check_new",
    "check_path_text",
    "check_regular_file",
    "check_sidecars",
    "check_sqlite_name",
    "check_unpadded",
    "names_directory",
    "postgres_url",
    "read_bounded",
    "redact_url",
    "shown_location",
    "strict_json",
    "write_new",
    "write_replacing",
]

Fail = Callable[[str], DpLedgerError]
"""Builds the caller's typed error from a problem ("is a directory", "larger than …")."""

_CHUNK = 1 << 16


def check_regular_file(path: str | os.PathLike[str], limit: int, fail: Fail) -> int:
    """The size of the regular file at ``path``; raise ``fail(problem)`` for anything else.

    Symlinks are followed; a directory, FIFO, device or socket is refused without being
    opened, as is a file larger than ``limit`` bytes.
    """
    try:
        st = os.stat(path)
    except OSError as e:
        raise fail(e.strerror or str(e)) from None
    except ValueError:  # a NUL byte in the path
        raise fail("the path contains a NUL byte") from None
    if stat.S_ISDIR(st.st_mode):
        raise fail("is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise fail("is not a regular file (a FIFO, device or socket): name a file")
    if st.st_size > limit:
        raise fail(f"larger than {limit} bytes")
    return st.st_size


def read_bounded(path: str | os.PathLike[str], limit: int, fail: Fail) -> bytes:
    """At most ``limit`` bytes of the regular file at ``path``; ``fail(problem)`` otherwise.

    The file is checked with ``stat`` before it is opened, opened without blocking, checked
    again on its descriptor (it may have been swapped), and read to ``limit + 1`` bytes at
    most: a file that grew past the limit is refused, never read whole.
    """
    check_regular_file(path, limit, fail)
    held = "is an SQLite database this process has open (a ledger or key store), not this file"
    with unheld(Path(path), lambda: fail(held)):  # closing it would drop that one's locks
        return _read_to(path, limit, fail)


def _read_to(path: str | os.PathLike[str], limit: int, fail: Fail) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise fail(e.strerror or str(e)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise fail("is not a regular file (a FIFO, device or socket): name a file")
        chunks: list[bytes] = []
        got = 0
        while got <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as e:
        raise fail(e.strerror or str(e)) from None
    finally:
        os.close(fd)
    if got > limit:
        raise fail(f"larger than {limit} bytes")
    return b"".join(chunks)


_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+)://")  # 2+ letters: C://x is a drive
_PG_SCHEMES = ("postgresql", "postgres")


def postgres_url(text: str, what: str = "ledger") -> str | None:
    """``text`` as libpq takes it if it is a ``postgresql://`` (or ``postgres://``) URL,
    None if it is a file path; another ``scheme://`` is :class:`InvalidInput`.

    A URL's scheme is case-insensitive (RFC 3986) but libpq reads only the lower-case
    one: ``PostgreSQL://…`` is lowered here, never taken for a relative SQLite path (which
    would create a file named ``PostgreSQL:``). Nor is ``mysql://…`` or ``sqlite:///…``;
    a path that really begins so is written ``./…``. The refusal names the scheme only:
    the rest of a URL may hold a password.
    """
    match = _SCHEME.match(text)
    if match is None:
        return None
    scheme = match.group(1)
    if scheme.lower() in _PG_SCHEMES:
        return scheme.lower() + text[len(scheme) :]
    raise InvalidInput(
        f"the {what} is a {scheme}:// URL: a ledger is an SQLite file path or a "
        "postgresql:// URL (for a file whose path begins so, write it as ./PATH)"
    )


def redact_url(url: str) -> str:
    """``url`` without its password (in the user info or a ``password=`` parameter)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://(an unreadable URL)"
    netloc = parts.netloc
    user, at, hosts = netloc.rpartition("@")
    if at:
        netloc = f"{user.partition(':')[0]}@{hosts}"
    kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
            if k.lower() != "password"]  # fmt: skip
    query = urlencode(kept, quote_via=quote)  # libpq reads '+' literally, not as a space
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def shown_location(location: str) -> str:
    """A ledger or key-store location as messages may show it: a PostgreSQL URL without
    its password, a path as it is."""
    return redact_url(location) if _SCHEME.match(location) else location


SQLITE_SIDECARS = ("-wal", "-shm", "-journal")
"""The suffixes SQLite appends to a database's name for its own files beside it."""
_KIND = {"-wal": "write-ahead log", "-shm": "shared-memory index", "-journal": "rollback journal"}
_SQLITE_HEADER = b"SQLite format 3\x00"
_WAL_MAGIC = (b"\x37\x7f\x06\x82", b"\x37\x7f\x06\x83")
_SHM_VERSION = (b"\x00\x00\x00\x00", (3007000).to_bytes(4, "little"), (3007000).to_bytes(4, "big"))
_JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")


def _real_path(path: str) -> str:
    """``path`` with symlinks resolved, as SQLite resolves it to name its own files."""
    try:
        return str(Path(path).resolve())
    except (OSError, RuntimeError):  # a loop or a name too long: SQLite fails on it too
        return path


def _sidecar_split(name: str) -> tuple[str, str] | None:
    """``(X, suffix)`` for a file name ``X-wal``/``X-shm``/``X-journal`` (any case), else
    None (also for a name that is only the suffix)."""
    suffix = next((s for s in SQLITE_SIDECARS if name.lower().endswith(s)), None)
    if suffix is None or len(name) == len(suffix):
        return None
    return name[: -len(suffix)], suffix


def check_sqlite_name(path: str, what: str = "ledger path") -> str:
    """``path`` unless its name (or its symlink's target's) ends in an SQLite sidecar suffix.

    SQLite keeps a database ``X``'s write-ahead log in ``X-wal``, its shared-memory index
    in ``X-shm`` and its rollback journal in ``X-journal``: a database named so would be
    taken for ``X``'s, and deleted or overwritten whenever ``X`` is used. Refused with
    :class:`InvalidInput` before anything is opened or created. So is a path ending in a
    separator (``dir/``): it names a directory, yet ``Path`` would drop the slash and make
    a file ``dir``.
    """
    if os.path.basename(path) in ("", ".", ".."):  # "dir/", ".", "a/..": a directory
        raise InvalidInput(
            f"the {what} {path} names a directory, not a file: give a file name "
            "(e.g. DIR/ledger.db)"
        )
    _check_unicode_twin(path, what)
    for name in dict.fromkeys((Path(path).name, Path(_real_path(path)).name)):
        split = _sidecar_split(name)
        if split is None:
            continue
        base, suffix = split
        raise InvalidInput(
            f"the {what} {path} is named like SQLite's {_KIND[suffix]} of {base!r} (its name "
            f"ends in {suffix!r}): SQLite would delete or overwrite it whenever {base!r} is "
            f"used, so dpledger never keeps a database under such a name; name it without the "
            f"{suffix!r} ending "
            "(a database an earlier dpledger made there: rename it, with its own -wal and "
            "-shm files, while nothing uses it)"
        )
    return path


def _check_unicode_twin(path: str, what: str) -> None:
    """Refuse a ``path`` that does not exist while a file beside it has the same name in
    another Unicode form (``Lé.db`` composed, NFC, or decomposed, NFD, as macOS writes
    it), or but for characters nobody sees that the path check lets through (a variation
    selector, a combining grapheme joiner, a Hangul filler: ``L.db\ufe0f``): the two look
    alike, yet are two files on Linux, and a release through the other would start a new,
    empty budget beside the ledger meant (review 40)."""
    p = Path(path)
    want = skeleton(p.name)
    try:  # an ASCII name is a twin too (L.db beside L.db\ufe0f; K.db beside \u212a.db)
        if os.path.lexists(p):
            return
        names = os.listdir(p.parent)  # an ASCII name's skeleton is itself: no normalising
        twin = next((n for n in names if (n if n.isascii() else skeleton(n)) == want
                     and look_alike(p.name, n)), None)  # fmt: skip
    except (OSError, ValueError):
        return  # no directory to look in: whoever opens the path says why
    if twin is not None:
        raise InvalidInput(
            f"the {what} {path} does not exist, but {p.parent / twin} does: the same name "
            f"written with other Unicode characters ({twin!a}, not {p.name!a}); "
            "use that file's name exactly, or rename it"
        )


def _peek(path: str) -> tuple[int, bytes] | str | None:
    """``(size, first 32 bytes)`` of the file at ``path``, None if there is none, or why
    it cannot be SQLite's file (a directory, a FIFO) — read without blocking or writing."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None if not os.path.islink(path) else "is a dangling symbolic link"
    except OSError as e:
        return f"cannot be checked ({e.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return "is a directory, not a file" if stat.S_ISDIR(st.st_mode) else "is no regular file"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:  # removed since the stat (another connection's close)
        return None
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    try:
        return st.st_size, os.read(fd, 32)
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    finally:
        os.close(fd)


_OWN: dict[str, tuple[bytes, ...]] = {
    "-wal": _WAL_MAGIC,
    # an index SQLite wrote, or one it zeroed before writing it
    "-shm": _SHM_VERSION,
    # a hot journal, or one SQLite retired by zeroing its header
    "-journal": (_JOURNAL_MAGIC, bytes(8)),
}


def _foreign(suffix: str, head: bytes) -> str | None:
    """Why a non-empty file starting with ``head`` is not SQLite's ``suffix`` file, or None.

    A file shorter than its header passes if it is a prefix of one: SQLite truncates an
    index it takes over to 3 bytes before it rebuilds it.
    """
    if head.startswith(_SQLITE_HEADER):
        return "is itself an SQLite database (perhaps another ledger or key store)"
    for own in _OWN[suffix]:
        if head[: len(own)] == own or (len(head) < len(own) and own.startswith(head)):
            return None
    return f"does not start with SQLite's {_KIND[suffix]} header"


def check_sidecars(path: str, what: str = "ledger") -> None:
    """Refuse to open the SQLite database ``path`` while a file SQLite would take for its
    ``-wal``, ``-shm`` or ``-journal`` is not SQLite's own file of that kind.

    SQLite's files are recognised by their headers (a write-ahead log by its magic number,
    a shared-memory index by its version, a journal by its magic or its zeroed header); an
    empty one is SQLite's between writes. Anything else, such as another database named
    ``X-wal``, would be overwritten or deleted by SQLite as soon as ``path`` is opened: it
    is refused with :class:`InvalidInput`, before SQLite touches any file. A write-ahead log
    a crashed writer left is SQLite's own and passes: opening ``path`` recovers it.
    """
    real = _real_path(path)
    for suffix in SQLITE_SIDECARS:
        side = real + suffix
        found = _peek(side)
        if found is None:
            continue
        problem = found if isinstance(found, str) else (
            _foreign(suffix, found[1]) if found[0] else None
        )  # fmt: skip
        if problem is not None:
            raise InvalidInput(
                f"the {what} {path} was not opened: {side} {problem}, so it is not {path}'s "
                f"{_KIND[suffix]}, and SQLite would overwrite or delete it as if it were; "
                f"move {side} away (or rename it: a database is never named with a "
                f"{suffix!r} ending), then retry; nothing was opened or changed"
            )


def strict_json(text: str | bytes, *, numbers: bool = False) -> Any:
    """``json.loads``, except that an object naming a key twice is a ``ValueError``.

    Python's parser keeps the last of two equal keys silently, so a request file or body
    stating ``"cohort"`` twice would be read as whichever came last. ``numbers``: the
    text holds numbers to be read as doubles (an aggregate), so an integer past Python's
    digit limit is read as the double it denotes (±inf), as a float of that size is,
    rather than failing the parse with Python's advice to raise the limit (audit 6, G6).
    """
    if numbers:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_int=_json_int)
    return json.loads(text, object_pairs_hook=_unique_keys)


def json_numbers(text: str | bytes) -> Any:
    """``json.loads`` reading an integer past Python's digit limit as the double it denotes
    (±inf), as :func:`strict_json` with ``numbers`` does, but without its duplicate-key
    check: what a service reads a body with before its own checks run (review s28, R4)."""
    return json.loads(text, parse_int=_json_int)


def _json_int(digits: str) -> int | float:
    """A JSON integer: a Python int within the digit limit, else the double it denotes."""
    if len(digits.lstrip("-")) <= sys.get_int_max_str_digits():
        return int(digits)
    return float(digits)  # ±inf: beyond any double, refused by the finiteness check


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key!r} appears twice in one object")
        out[key] = value
    return out


def names_directory(text: str) -> bool:
    """Whether a path's text ends in a slash, ``.`` or ``..``: :class:`Path` drops the
    first two (``out/`` and ``out/.`` are ``out``), so a file would be written where the
    text named a directory (review 41)."""
    return text.endswith(("/", os.sep)) or os.path.basename(text) in (".", "..")


def check_new(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` as a :class:`Path` if a new file may be created there: nothing by that name
    (no file, directory or symlink, even a dangling one) and its directory exists. Run it
    before any work whose output goes there; :func:`write_new` checks again as it creates."""
    if not os.fspath(path):
        raise InvalidInput(f"{what} needs a file name, got an empty one")
    if names_directory(str(os.fspath(path))):  # Path() drops it: "out/" wrote "out"
        raise InvalidInput(f"{what} {os.fspath(path)!s} names a directory: name a new file")
    p = Path(path)
    if os.path.lexists(p):
        raise InvalidInput(
            f"{what} {p} exists: dpledger writes new files only and never replaces one "
            "(it may be a ledger); remove it or choose another name"
        )
    if not p.parent.is_dir():
        raise InvalidInput(f"{what} {p}: the directory {p.parent} does not exist")
    split = _sidecar_split(p.name)  # X-wal beside a database file X: SQLite would take it
    if split is not None and os.path.isfile(p.with_name(split[0])):  # as its own
        base, suffix = split
        raise InvalidInput(
            f"{what} {p}: a file named like the {suffix!r} file SQLite keeps beside "
            f"{p.with_name(base)} (perhaps a ledger) would be taken for its own; choose "
            "another name"
        )
    return p


def write_new(path: str | os.PathLike[str], write: Callable[[BinaryIO], object], what: str) -> Path:
    """Create ``path`` and fill it with ``write(file)``: a NEW file only.

    Opened with O_EXCL, so an existing name — a file (a ledger, say), a directory or a
    symlink, even a dangling one — is refused, never replaced or followed; a write that
    fails removes only the file this call created. Errors are :class:`InvalidInput`
    naming ``what`` (e.g. "--plot") and the path.
    """
    p = check_new(path, what)
    try:
        f = open(p, "xb")  # noqa: SIM115 - closed below; removed if the write fails
    except FileExistsError:
        raise InvalidInput(f"{what} {p} exists: remove it or choose another name") from None
    except OSError as e:
        raise InvalidInput(f"cannot write {what} {p}: {e.strerror or e}") from None
    with _removed_on_failure(p, os.fstat(f.fileno()), f"{what} {p}"), f:
        write(f)
    return p


def write_replacing(
    path: str | os.PathLike[str], write: Callable[[BinaryIO], object], what: str
) -> Path:
    """Fill a new temporary beside ``path`` with ``write(file)``, then rename it over
    ``path``: complete or absent, never half a file. The caller has decided that ``path``
    may be replaced. The temporary has a random name created with O_EXCL (a predictable
    one, or a symlink planted there, is never followed or truncated), and a failure removes
    only that temporary, if it is still the file this call made."""
    p = Path(path)
    try:
        fd, name = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".partial")
    except OSError as e:
        raise InvalidInput(f"cannot write {what} {p}: {e.strerror or e}") from None
    tmp = Path(name)
    umask = os.umask(0o022)  # mkstemp makes 0600: the file gets what open() would give it
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)
    with _removed_on_failure(tmp, os.fstat(fd), f"{what} {p}"):
        with open(fd, "wb") as f:
            write(f)
        os.replace(tmp, p)
    return p


@contextlib.contextmanager
def _removed_on_failure(made_path: Path, made: os.stat_result, shown: str) -> Iterator[None]:
    """On any failure, remove ``made_path`` if it is still the file this call created; an
    OSError (a full disk, a file-size limit: the caller's to fix) is InvalidInput naming
    ``shown``."""
    try:
        yield
    except OSError as e:
        _remove_if_same(made_path, made)
        raise InvalidInput(f"cannot write {shown}: {e.strerror or e}") from None
    except BaseException:
        _remove_if_same(made_path, made)
        raise


def _remove_if_same(p: Path, made: os.stat_result) -> None:
    """Remove ``p`` only if it is still the file this process created (not one another
    process put under that name meanwhile)."""
    try:
        now = os.lstat(p)
    except OSError:
        return
    if (now.st_dev, now.st_ino) == (made.st_dev, made.st_ino):
        p.unlink(missing_ok=True)

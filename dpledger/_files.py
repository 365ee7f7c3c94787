"""Reading user-named files safely, and refusing path texts no store can take.

Every file a user names (policy, aggregate, request, held-out values, TLS material) is
read through :func:`read_bounded`: it must be a regular file (after symlinks), and at
most ``limit`` bytes are ever read, so ``/dev/zero`` cannot exhaust memory and a FIFO
with no writer cannot hang the process (it is refused by ``stat`` before any open, and
the open itself never blocks).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dpledger.errors import DpLedgerError, InvalidInput

__all__ = ["check_path_text", "check_regular_file", "read_bounded", "strict_json"]

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


def check_path_text(path: str | Path, what: str = "ledger path") -> str:
    """``path`` as text a database can take: no NUL byte, valid UTF-8; else InvalidInput.

    A name given as bytes that are not UTF-8 reaches Python as lone surrogates, which
    SQLite cannot encode: refused here, before anything is created.
    """
    text = str(path)
    if "\x00" in text:
        raise InvalidInput(f"the {what} {text!r} contains a NUL byte: name a real file")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(
            f"the {what} {text!r} is not valid UTF-8: rename the file or directory to a "
            "UTF-8 name (a ledger path is stored and opened as UTF-8 text)"
        ) from None
    return text


def strict_json(text: str | bytes) -> Any:
    """``json.loads``, except that an object naming a key twice is a ``ValueError``.

    Python's parser keeps the last of two equal keys silently, so a request file or body
    stating ``"cohort"`` twice would be read as whichever came last.
    """
    return json.loads(text, object_pairs_hook=_unique_keys)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key!r} appears twice in one object")
        out[key] = value
    return out

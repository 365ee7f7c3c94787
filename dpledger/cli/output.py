"""Writing a command's result, and saying so when it cannot be written.

A command that commits (a release spends ε, ``keys create`` stores a key) and then
cannot show its result — standard output closed (``>&-``), full (``> /dev/full``), or
its reader gone — must not look like a bug or a success: :func:`write_out` raises
:class:`Undelivered`, and the command says on standard error what was committed and how
to read it back (:func:`say`), and exits 1 ("the result could not be delivered").

Python gives a command started with standard output closed ``sys.stdout = None``, where
``print`` silently writes nothing; a full or broken one raises on write or flush. Both
are :class:`Undelivered` here.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
from typing import Any

__all__ = ["Undelivered", "json_text", "say", "write_out"]


class Undelivered(Exception):
    """Standard output could not take a command's result; ``why`` says how it failed.

    ``broken_pipe``: its reader went away (``| head``), which a reading command treats
    as the reader's choice (exit 0), a committing one as an undelivered result.
    """

    def __init__(self, why: str, *, broken_pipe: bool = False) -> None:
        super().__init__(why)
        self.why = why
        self.broken_pipe = broken_pipe


def _silence_stdout() -> None:
    """Point descriptor 1 at the null device: what is still buffered for it is dropped at
    exit instead of failing again (Python would print an error and exit 120)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(fd, sys.stdout.fileno())
        finally:
            os.close(fd)


def write_out(text: str | None, *, flush: bool = True) -> None:
    """Write ``text`` and a newline to standard output, flushed unless told not to (a
    stream of lines flushes once, at its end: ``write_out(None)``); else
    :class:`Undelivered`."""
    out = sys.stdout
    if out is None:
        raise Undelivered("standard output is closed")
    try:
        if text is not None:
            out.write(_encodable(text + "\n", out))
        if flush:
            out.flush()
    except BrokenPipeError:
        _silence_stdout()
        raise Undelivered("the reader of standard output went away", broken_pipe=True) from None
    except (OSError, ValueError) as e:
        _silence_stdout()
        problem = (e.strerror if isinstance(e, OSError) else None) or str(e)
        raise Undelivered(f"writing to standard output failed: {problem}") from None


def _encodable(text: str, out: Any) -> str:
    """``text`` as ``out`` can encode it: under a locale that is not UTF-8 (Latin-1, or
    cp1252 when Windows output is redirected), a character it lacks (ε, ρ, …) is written
    as its ``\\u`` escape instead of failing the whole result (review 40: ``ledger show``
    and ``lifetime`` printed nothing and exited 1; a release's value was not delivered)."""
    encoding = getattr(out, "encoding", None)
    if not isinstance(encoding, str):
        return text
    try:
        text.encode(encoding, getattr(out, "errors", None) or "strict")
    except (UnicodeEncodeError, LookupError):
        with contextlib.suppress(LookupError):
            return text.encode(encoding, "backslashreplace").decode(encoding)
    return text


def say(text: str) -> bool:
    """Write ``text`` and a newline to standard error; whether it could be written."""
    err = sys.stderr
    if err is None:
        return False
    try:
        err.write(text + "\n")
        err.flush()
    except (OSError, ValueError):
        return False
    return True


def json_text(data: Any, *, indent: int | None = 2, sort_keys: bool = True) -> str:
    """``data`` as strict JSON, the one way every command prints JSON: a non-finite float
    (an error bar that overflowed a double) is ``null``, as the service answers, never
    the non-JSON tokens ``Infinity``/``NaN`` that ``json.dumps`` writes by default."""
    return json.dumps(_finite(data), indent=indent, sort_keys=sort_keys, allow_nan=False)


def _finite(x: Any) -> Any:
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x

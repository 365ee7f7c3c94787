"""The ``dpledger`` command: ``main`` (in :mod:`dpledger.cli.main`) returns the exit code.

``plan`` holds ``dpledger plan`` and ``dpledger calibrate``; ``demo`` holds
``dpledger demo``; ``argtypes`` the ASCII number types of every option. Nothing else in
dpledger imports this package.

:func:`run` is the console script: it imports the command inside its guard, since
loading numpy, OpenDP and the ledger is most of a short command's run, and a Ctrl-C
then printed Python's traceback (review 41). It also takes SIGTERM (``timeout``, a CI
cancel, ``kill``) as a Ctrl-C (:class:`Terminated`): a release committed before it is
said on standard error, not lost silently as the default handler lost it. A SIGTERM the
parent set to be ignored stays ignored. The handler runs only between bytecodes: a command
waiting in C (SQLite's lock wait: up to a minute) that has not taken a SIGTERM after
:data:`GRACE_S`, or has taken it but not ended :data:`GRACE_S` later (its unwinding waits in C:
``demo``'s thread pool joins workers in NumPy), is ended by a watching thread, exit 143,
as the default handler ended it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

__all__ = ["GRACE_S", "Terminated", "interruption", "run"]

GRACE_S = 2.0
"""How long a SIGTERM may wait for the command to take it before it ends the process."""
_TAKEN = threading.Event()  # the handler ran: the command unwinds by itself
_DONE = threading.Event()  # run is returning: the watcher lets the process end
_BLOCKED = (
    b"dpledger: terminated while waiting in C (a lock another writer holds, the file "
    b"system, a long computation): what it was writing may have been committed: check "
    b"`dpledger ledger show` (a release) or `dpledger keys list` (a key) before a rerun\n"
)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, so that it unwinds as after a Ctrl-C."""


def interruption(e: BaseException) -> tuple[str, int]:
    """How a stop by signal is named, and its exit code (the shell's: 128 + the signal)."""
    return ("terminated", 143) if isinstance(e, Terminated) else ("interrupted", 130)


def _terminate(signum: int, frame: FrameType | None) -> None:
    _TAKEN.set()
    raise Terminated


def _watch(fd: int) -> None:
    """Read the signals written to the wakeup ``fd``; end the process when a SIGTERM for
    :func:`_terminate` is not taken within :data:`GRACE_S` (the main thread is in C), or
    is taken but :func:`run` has not returned :data:`GRACE_S` later (it unwinds in C)."""
    while data := os.read(fd, 64):
        ours = signal.getsignal(signal.SIGTERM) is _terminate  # not uvicorn's (serve)
        if signal.SIGTERM in data and ours and not (_TAKEN.wait(GRACE_S) and _DONE.wait(GRACE_S)):
            with contextlib.suppress(OSError):
                os.write(2, _BLOCKED)
            os._exit(143)
    os.close(fd)  # the write end was closed: run is done


def _watching() -> tuple[int, int, int] | None:
    """Start :func:`_watch` on a new wakeup fd: (read end, write end, the fd it replaced)."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except (ValueError, OSError):
        os.close(r)
        os.close(w)
        return None
    threading.Thread(target=_watch, args=(r,), name="dpledger-sigterm", daemon=True).start()
    return r, w, old


def _unwatch(watch: tuple[int, int, int] | None) -> None:
    if watch is not None:
        _, w, old = watch
        _DONE.set()
        signal.set_wakeup_fd(old)
        os.close(w)  # the thread reads end of file, closes r and returns


def run(argv: Sequence[str] | None = None) -> int:
    """Load and run the command; a Ctrl-C (or SIGTERM) while it loads is exit 130 (143),
    no traceback."""
    before = watch = None
    words = list(sys.argv[1:] if argv is None else argv)
    serving = next((w for w in words if not w.startswith("-")), None) == "serve"
    with contextlib.suppress(ValueError, OSError):  # the main thread only (a console script)
        # `trap '' TERM` holds; `serve` is stopped by SIGTERM and ends by it, as a service
        # does (exit 143 is a failed unit to systemd): uvicorn's, from its start on
        if not serving and signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
            before = signal.signal(signal.SIGTERM, _terminate)
            _TAKEN.clear()
            _DONE.clear()
            watch = _watching()
    try:
        from dpledger.cli.main import main

        return main(argv)
    except KeyboardInterrupt as e:  # main handles one once it runs; this, one before
        word, code = interruption(e)
        try:
            if sys.stderr is not None:
                sys.stderr.write(f"dpledger: {word}\n")
                sys.stderr.flush()
        except (OSError, ValueError, KeyboardInterrupt):
            pass
        return code
    finally:  # a caller in-process (a test) keeps its own handler
        if before is not None:
            _unwatch(watch)
            signal.signal(signal.SIGTERM, before)

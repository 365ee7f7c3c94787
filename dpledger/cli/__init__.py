"""The ``dpledger`` command: ``main`` (in :mod:`dpledger.cli.main`) returns the exit code.

``plan`` holds ``dpledger plan`` and ``dpledger calibrate``; ``demo`` holds
``dpledger demo``; ``argtypes`` the ASCII number types of every option. Nothing else in
dpledger imports this package.

:func:`run` is the console script: it imports the command inside its guard, since
loading numpy, OpenDP and the ledger is most of a short command's run, and a Ctrl-C
then printed Python's traceback (review 41). It also takes SIGTERM (``timeout``, a CI
cancel, ``kill``) as a Ctrl-C (:class:`Terminated`): a release committed before it is
said on standard error, not lost silently as the default handler lost it. A SIGTERM the
parent set to be ignored stays ignored.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Sequence
from types import FrameType

__all__ = ["Terminated", "interruption", "run"]


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, so that it unwinds as after a Ctrl-C."""


def interruption(e: BaseException) -> tuple[str, int]:
    """How a stop by signal is named, and its exit code (the shell's: 128 + the signal)."""
    return ("terminated", 143) if isinstance(e, Terminated) else ("interrupted", 130)


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def run(argv: Sequence[str] | None = None) -> int:
    """Load and run the command; a Ctrl-C (or SIGTERM) while it loads is exit 130 (143),
    no traceback."""
    before = None
    with contextlib.suppress(ValueError, OSError):  # the main thread only (a console script)
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:  # `trap '' TERM` holds
            before = signal.signal(signal.SIGTERM, _terminate)
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
            signal.signal(signal.SIGTERM, before)

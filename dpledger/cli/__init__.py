"""The ``dpledger`` command: ``main`` (in :mod:`dpledger.cli.main`) returns the exit code.

``plan`` holds ``dpledger plan`` and ``dpledger calibrate``; ``demo`` holds
``dpledger demo``; ``argtypes`` the ASCII number types of every option. Nothing else in
dpledger imports this package.

:func:`run` is the console script: it imports the command inside its guard, since
loading numpy, OpenDP and the ledger is most of a short command's run, and a Ctrl-C
then printed Python's traceback (review 41).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["run"]


def run(argv: Sequence[str] | None = None) -> int:
    """Load and run the command; a Ctrl-C while it loads is exit 130, no traceback."""
    try:
        from dpledger.cli.main import main

        return main(argv)
    except KeyboardInterrupt:  # main handles one once it runs; this, one before
        try:
            if sys.stderr is not None:
                sys.stderr.write("dpledger: interrupted\n")
                sys.stderr.flush()
        except (OSError, ValueError, KeyboardInterrupt):
            pass
        return 130

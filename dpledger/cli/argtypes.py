"""Argument types shared by every ``dpledger`` subcommand: numbers in ASCII only.

argparse's ``type=int`` (Python's ``int``) reads any Unicode decimal digit and
underscores: ``--epoch ٣`` was epoch 3 and ``--cohort ２４００`` a cohort of 2400, while
``plan --cohort`` and policy files take ASCII digits only. :func:`ascii_int` and
:func:`ascii_float` hold every option to the same rule; a bad value is argparse's usage
error (exit 2) naming the option and what it takes.
"""

from __future__ import annotations

import argparse
import re

__all__ = ["ascii_float", "ascii_int"]

_INT = re.compile(r"-?[0-9]{1,30}", re.ASCII)
_FLOAT = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,4})?", re.ASCII)
_SHOWN = 40  # characters of a bad value quoted back


def _shown(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "…")


def ascii_int(text: str) -> int:
    """An integer option's value: ASCII digits ``0-9`` (at most 30), an optional leading
    minus; no other digits, spaces, underscores or signs. Range checks stay with the
    command (a negative value reaches it and is refused there, by name)."""
    if _INT.fullmatch(text) is None:
        raise argparse.ArgumentTypeError(
            f"expected an integer written in ASCII digits 0-9 (e.g. 2400), got {_shown(text)}"
        )
    return int(text)


def ascii_float(text: str) -> float:
    """A number option's value: a plain ASCII decimal, optionally with an exponent
    (``1``, ``0.5``, ``-2``, ``1e-6``); no other digits, spaces, underscores, ``inf`` or
    ``nan``."""
    if _FLOAT.fullmatch(text) is None:
        raise argparse.ArgumentTypeError(
            "expected a number written as a plain ASCII decimal (e.g. 0.5 or 1e-6), got "
            + _shown(text)
        )
    return float(text)

"""Argument types shared by every ``dpledger`` subcommand: numbers in ASCII only.

argparse's ``type=int`` (Python's ``int``) reads any Unicode decimal digit and
underscores: ``--epoch ٣`` was epoch 3 and ``--cohort ２４００`` a cohort of 2400, while
``plan --cohort`` and policy files take ASCII digits only. :func:`ascii_int` and
:func:`ascii_float` hold every option to the same rule; a bad value is argparse's usage
error (exit 2) naming the option and what it takes.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from decimal import Decimal
from typing import NoReturn

__all__ = [
    "NUMBER_OPTIONS",
    "Parser",
    "UsageError",
    "ascii_float",
    "ascii_fraction",
    "ascii_int",
    "join_negative_numbers",
]

_INT = re.compile(r"-?[0-9]{1,30}", re.ASCII)
_FLOAT = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,4})?", re.ASCII)
_SHOWN = 40  # characters of a bad value quoted back


class UsageError(Exception):
    """A command line argparse refused (exit 2): its message, after the usage line."""


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage error the CLI reports like its other input errors
    (with ``--json``, as a JSON object on standard output too) instead of exiting."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise UsageError(f"{self.prog}: error: {message}")


NUMBER_OPTIONS = frozenset({"--low", "--epsilon", "--aggregate-error", "--delta"})
"""The options whose value is an :func:`ascii_float` (or :func:`ascii_fraction`)."""


def join_negative_numbers(argv: list[str]) -> list[str]:
    """``argv`` with each negative number that follows one of :data:`NUMBER_OPTIONS` joined
    to it (``--low -1e308`` → ``--low=-1e308``): argparse reads ``-1e308`` (a negative number
    with an exponent) as an option, and refused ``--low -1e308`` as "expected one argument"."""
    out: list[str] = []
    for arg in argv:
        if out and out[-1] in NUMBER_OPTIONS and arg.startswith("-") and _FLOAT.fullmatch(arg):
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out


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
    ``nan``, and none a double cannot hold: ``1e-400`` (it would read as 0) or ``1e400``
    (infinity) is refused naming the text typed, not the 0.0 it would have become."""
    if _FLOAT.fullmatch(text) is None:
        raise argparse.ArgumentTypeError(
            "expected a number written as a plain ASCII decimal (e.g. 0.5 or 1e-6), got "
            + _shown(text)
        )
    value = float(text)
    if math.isinf(value):
        raise argparse.ArgumentTypeError(
            f"{_shown(text)} is too large for a double (it reads as infinity): give a finite number"
        )
    if value == 0 and Decimal(text) != 0:
        raise argparse.ArgumentTypeError(
            f"{_shown(text)} is too small for a double (it reads as 0; the smallest non-zero "
            "magnitude is about 5e-324)"
        )
    return value


def ascii_fraction(text: str) -> float:
    """A probability option's value (e.g. ``--delta``): an :func:`ascii_float` strictly
    between 0 and 1 as a double. ``0.99999999999999999`` reads as 1.0 and is refused
    naming the text typed."""
    value = ascii_float(text)
    if not 0 < value < 1:
        rounded = " (it rounds to 1 in double precision)" if Decimal(text) < value else ""
        raise argparse.ArgumentTypeError(
            f"expected a number strictly between 0 and 1, got {_shown(text)}{rounded}"
        )
    return value

"""A bad value as error messages show it: bounded in depth and length, never failing.

``repr()`` of a caller's value can itself raise — RecursionError on a list nested 100,000
deep, ValueError on an integer past Python's 4,300-digit limit — and then a validator
meant to raise :class:`~dpledger.errors.InvalidInput` raised that instead (audit s29, F4).
"""

from __future__ import annotations

import builtins
import reprlib

__all__ = ["shown"]


class _Repr(reprlib.Repr):
    """reprlib's bounds; a number past Python's 4,300-digit printing limit by its type
    (reprlib would show an int's ValueError, or a Fraction as ``<Fraction instance …>``)."""

    def repr_int(self, x: int, level: int) -> str:
        try:
            return super().repr_int(x, level)
        except ValueError:
            return f"an {type(x).__name__} too large to print"

    def repr_instance(self, x: object, level: int) -> str:
        try:
            text = builtins.repr(x)
        except ValueError:
            return f"a {type(x).__name__} too large to print"
        except Exception:  # a caller's __repr__ may raise anything
            return f"a {type(x).__name__} whose repr fails"
        return text if len(text) <= self.maxother else text[: self.maxother - 3] + "..."


_REPR = _Repr()
_REPR.maxlevel = 3
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxdict = 8
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 80


def shown(value: object, width: int = 60) -> str:
    """``value``'s repr, nested at most 3 deep and cut to ``width`` characters (ending in
    "…" where it was cut); a value whose repr fails, by its type."""
    try:
        text = _REPR.repr(value)
    except (RecursionError, ValueError, TypeError, MemoryError):
        return f"a {type(value).__name__} that cannot be printed"
    except Exception:
        return f"a {type(value).__name__} whose repr fails"
    return text if len(text) <= width else text[: max(width - 1, 1)] + "…"  # cut, and says so

"""A policy's text in: a bounded UTF-8 file, parsed as TOML, every failure a PolicyError.

Only the reading and parsing; validation is :meth:`dpledger.policy.Policy.from_mapping`'s.
Each error names the file (``source``) and says what a policy file must be.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from dpledger._files import read_bounded
from dpledger.errors import PolicyError

__all__ = ["MAX_POLICY_BYTES", "parse_toml", "read_policy_text"]

MAX_POLICY_BYTES = 1 << 20
"""A policy file larger than this (1 MiB) is refused before it is parsed."""


_BOM = "\ufeff"
"""A UTF-8 byte order mark, which Windows editors write at a file's start. TOML does not
allow it, but it carries no content: it is dropped (the content hash is of the parsed
policy, so a policy's hash is the same with or without it)."""


class _Underflowed(float):
    """A TOML float literal with a nonzero digit that reads as 0.0 (``1e-400``), keeping
    the text written: refused by :func:`parse_toml` wherever it stands (a clip bound or
    an edge of 0 is valid, so the value alone could not tell it from a written 0)."""

    literal: str


def _parse_float(literal: str) -> float:
    value = float(literal)
    mantissa = literal.lower().partition("e")[0]
    if value == 0.0 and any(c in "123456789" for c in mantissa):
        marked = _Underflowed(value)
        marked.literal = literal
        return marked
    return value


def _underflowed(data: object, path: str = "") -> tuple[str, str] | None:
    """The dotted path and text of the first underflowed float in ``data``, if any."""
    if isinstance(data, _Underflowed):
        return path, data.literal
    items: Any = (
        data.items()
        if isinstance(data, dict)
        else (enumerate(data) if isinstance(data, list) else ())
    )
    for key, value in items:
        found = _underflowed(value, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


def parse_toml(text: str, *, source: str) -> dict[str, Any]:
    """The table a policy's TOML text holds; raise :class:`PolicyError` naming ``source``.

    A leading byte order mark (:data:`_BOM`) is dropped before parsing (audit s29, F10).
    A float literal below the doubles' range (``1e-400``) reads as 0.0: it is refused,
    naming its field, in every field (a clip bound or an edge took it as 0 silently).
    """
    try:
        data = tomllib.loads(text.removeprefix(_BOM), parse_float=_parse_float)
    except tomllib.TOMLDecodeError as e:
        raise PolicyError(f"not valid TOML: {e}", source=source) from e
    except RecursionError:
        raise PolicyError("TOML nested too deeply to be a policy", source=source) from None
    found = _underflowed(data)
    if found is not None:
        field, literal = found
        raise PolicyError(
            f"{literal} underflowed to 0.0 when read (a float below the smallest normal "
            "double 2.2e-308); a nonzero policy number must be at least 2.2e-308 in "
            "magnitude (and a budget must be > 0): use a larger value, or write 0 if zero is "
            "meant",
            source=source,
            field=field,
        )
    return data


def read_policy_text(path: Path) -> str:
    """A policy file's text (at most :data:`MAX_POLICY_BYTES` of UTF-8); raise
    :class:`PolicyError` naming the file.

    Only a regular file is read (a FIFO or device is refused unopened), and never more
    than the limit plus one byte, whatever its size claims.
    """

    def fail(problem: str) -> PolicyError:
        if problem.startswith("larger than"):
            return PolicyError(f"the file is {problem}: not a policy", source=str(path))
        return PolicyError(f"cannot read the policy file: {problem}", source=str(path))

    data = read_bounded(path, MAX_POLICY_BYTES, fail)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PolicyError(
            f"not UTF-8 text (byte {e.start}): a policy is a UTF-8 TOML file", source=str(path)
        ) from None

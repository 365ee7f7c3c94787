"""Reading an untrusted ``.npy`` file's bytes: the header checked before anything is allocated.

``np.load`` trusts the header: one claiming 2**40 values allocates 8 TiB (MemoryError),
and a malformed one raises whatever Python's tokenizer and ``literal_eval`` raise
(SyntaxError, TokenError, TypeError, OverflowError). :func:`load_npy` checks the version,
the number of values (at most ``limit``), that it holds no Python objects and that the
bytes are as long as the header says, and turns every failure into ``ValueError`` with
the reason (the caller wraps it in its own :class:`~dpledger.errors.InvalidInput`).
"""

from __future__ import annotations

import io
from tokenize import TokenError
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["TooManyValues", "load_npy"]


class TooManyValues(ValueError):
    """The header claims more values than the caller's ``limit`` (refused before reading)."""


def load_npy(data: bytes, limit: int | None = None) -> npt.NDArray[Any]:
    """The array an ``.npy`` file's ``data`` holds; ``ValueError`` naming what is wrong.

    ``limit``: the most values it may hold (None: as many as its bytes carry).
    """
    try:
        f = io.BytesIO(data)
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(f)
        elif version in ((2, 0), (3, 0)):
            shape, _, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError(f"is an unsupported .npy version {version}")
        size = int(np.prod(shape, dtype=object)) if shape else 1
        if limit is not None and size > limit:
            raise TooManyValues(f"claims {size:,} values, more than the {limit:,} it may hold")
        if dtype.hasobject:
            raise ValueError("holds Python objects; save a numeric array")
        if len(data) < f.tell() + size * dtype.itemsize:  # never allocate past the bytes
            raise ValueError("is shorter than its header says (truncated)")
        f.seek(0)
        arr: npt.NDArray[Any] = np.load(f, allow_pickle=False)
    except EOFError as e:
        raise ValueError(f"is truncated ({e})") from None
    except (TypeError, OverflowError, SyntaxError, TokenError) as e:
        raise ValueError(f"has a malformed .npy header ({e}); save it with numpy.save") from None
    return arr

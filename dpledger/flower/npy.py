"""A Flower ``Array``'s ``.npy`` bytes checked against its declared dtype and shape.

Flower's ``Array`` keeps ``dtype``/``shape`` beside ``.npy`` bytes and checks neither
against the other; the wrapper reads the data by the declared fields without parsing each
header, so a reply whose bytes say otherwise must be rejected (what the ledger sums must
be what ``Array.numpy()`` would decode). :func:`npy_header` is the header ``np.save``
writes (compared byte for byte: the cheap, usual case); :func:`npy_disagrees` says why
bytes disagree, parsing other writers' headers with numpy's own reader.
"""

from __future__ import annotations

import functools
import io
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["npy_column", "npy_disagrees", "npy_header", "npy_rows"]


@functools.lru_cache(maxsize=256)
def npy_header(dtype: np.dtype[Any], size: int) -> bytes:
    """The ``.npy`` header ``np.save`` (what Flower's ``Array(ndarray)`` calls) writes for
    a 1-D array of ``size`` elements of ``dtype``."""
    out = io.BytesIO()
    np.save(out, np.zeros(size, dtype=dtype), allow_pickle=False)
    raw = out.getvalue()
    return raw[: len(raw) - size * dtype.itemsize]


def npy_disagrees(data: bytes, dtype: np.dtype[Any], size: int) -> str | None:
    """Why an Array's ``.npy`` bytes disagree with its declared dtype and shape (None if
    they agree), so that what the ledger sums is what ``Array.numpy()`` would decode.

    Flower's ``Array`` keeps ``dtype``/``shape`` beside the bytes and checks neither
    against them; only ``numpy()`` parses the header (~50 µs per array here). The header
    ``np.save`` writes is compared byte for byte first (< 1 µs); a header written
    otherwise (another numpy) is parsed with numpy's own reader (~35 µs, no pickle).
    """
    head = npy_header(dtype, size)
    if len(data) == len(head) + size * dtype.itemsize and data.startswith(head):
        return None
    f = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, _, got = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, _, got = np.lib.format.read_array_header_2_0(f)
        else:
            return f"the .npy header's version {version} is not supported"
    except (ValueError, TypeError, SyntaxError, OverflowError) as e:
        return f"the data is not a readable .npy array ({type(e).__name__})"
    if got != dtype or tuple(shape) != (size,):
        return (
            f"the .npy header says dtype {got.str} shape {tuple(shape)}, the Array declares "
            f"{dtype.str} ({size},)"
        )
    if len(data) - f.tell() != size * dtype.itemsize:
        return f"{len(data) - f.tell()} data bytes, the header's array has {size * dtype.itemsize}"
    return None


def npy_column(
    datas: list[Any], dtype: np.dtype[Any], size: int
) -> tuple[npt.NDArray[Any], npt.NDArray[np.bool_]]:
    """Many Arrays' ``data`` decoded as one ``(len(datas), size)`` array in one numpy call,
    and which of them are exactly :func:`npy_header` ``(dtype, size)`` then ``size``
    elements (``bytes``, compared byte for byte). The other rows hold whatever their
    bytes (or zeros) gave: the caller reads those replies one by one instead.
    """
    head = npy_header(dtype, size)
    width = len(head) + size * dtype.itemsize
    n = len(datas)
    fit: list[bool] | None = None
    if list(map(type, datas)).count(bytes) != n or list(map(len, datas)).count(width) != n:
        fit = [type(d) is bytes and len(d) == width for d in datas]
        datas = [d if f else bytes(width) for d, f in zip(datas, fit, strict=True)]
    word = np.dtype("<u8") if len(head) % 8 == 0 == width % 8 else np.dtype(np.uint8)
    raw = np.frombuffer(b"".join(datas), dtype=word).reshape(n, width // word.itemsize)
    h = len(head) // word.itemsize  # the header compared as words (np.save pads it to 64)
    ok = np.asarray((raw[:, :h] == np.frombuffer(head, dtype=word)).all(axis=1))
    if fit is not None:
        ok &= np.asarray(fit, dtype=bool)
    return np.ascontiguousarray(raw[:, h:]).view(dtype), ok


def npy_rows(datas: list[bytes], dtype: np.dtype[Any], size: int) -> npt.NDArray[Any]:
    """Many ``.npy`` byte strings, each exactly :func:`npy_header` ``(dtype, size)`` then
    ``size`` elements, decoded as one ``(len(datas), size)`` array in one numpy call.

    For a round's worth of replies this replaces one decode (and one Python object) per
    reply. The caller picks strings whose header it compared byte for byte (the others
    need :func:`npy_disagrees`); a string of another length or header here is a bug, and
    raises ``ValueError`` rather than being decoded at a wrong offset.
    """
    head = npy_header(dtype, size)
    width = len(head) + size * dtype.itemsize
    if not datas:
        return np.zeros((0, size), dtype=dtype)
    if set(map(len, datas)) != {width}:
        raise ValueError(f"npy_rows: every string must be {width} bytes")
    raw = np.frombuffer(b"".join(datas), dtype=np.uint8).reshape(len(datas), width)
    if not (raw[:, : len(head)] == np.frombuffer(head, dtype=np.uint8)).all():
        raise ValueError("npy_rows: a string's header is not the expected .npy header")
    return np.ascontiguousarray(raw[:, len(head) :]).view(dtype)

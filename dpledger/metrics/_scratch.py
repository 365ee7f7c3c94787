"""Reusable temporaries for block-by-block evaluation: first-touched memory once per call.

A fleet evaluated in blocks (:mod:`dpledger.metrics.blocks`) allocates the same few
block-sized temporaries (a square, a product, a cast) for every block and every metric.
glibc serves a temporary of about a megabyte from fresh pages (``mmap``, or heap grown
again after a trim), and the kernel zeroes each page on first touch. That depends on
malloc's history: in a process that has not yet freed large arrays (its thresholds still
low) a cold per-region sums call took ~80 k page faults per 10 M samples, 15% of its CPU,
and ~4 k with these buffers; in the benchmark's process, after generating its fleet, the
call took no page faults either way and the same CPU time. Inside :func:`reusing` (which
:func:`~dpledger.metrics.blocks.sums_in_blocks` and
:func:`~dpledger.metrics.blocks.rows_in_blocks` enter), :func:`empty` hands out the same
buffer for the same ``key`` block after block, so its pages are touched once per call.

Only for a temporary that dies inside the function that takes it: the buffer is handed
out again by the next :func:`empty` of the same key. Outside :func:`reusing`,
:func:`empty` is ``np.empty``. The workspace is a context variable: threads and tasks do
not share it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["empty", "reusing"]

_GROWTH = 1.25  # a later block a little larger than the first reuses the buffer as is


class _Workspace:
    """Buffers by (key, dtype), each grown to the largest length asked for."""

    def __init__(self) -> None:
        self._buffers: dict[tuple[str, np.dtype[Any]], npt.NDArray[Any]] = {}

    def take(self, key: str, n: int, dtype: np.dtype[Any]) -> npt.NDArray[Any]:
        buffer = self._buffers.get((key, dtype))
        if buffer is None or buffer.shape[0] < n:
            buffer = np.empty(int(n * _GROWTH) + 64, dtype=dtype)
            self._buffers[(key, dtype)] = buffer
        return buffer[:n]


_ACTIVE: ContextVar[_Workspace | None] = ContextVar("dpledger_metrics_scratch", default=None)


@contextmanager
def reusing(*, fresh: bool = False) -> Iterator[None]:
    """Reuse :func:`empty`'s buffers until the block leaves (nested: the outer workspace,
    unless ``fresh``: a new one, e.g. in a pool thread that may have inherited a context)."""
    if not fresh and _ACTIVE.get() is not None:
        yield
        return
    token = _ACTIVE.set(_Workspace())
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def empty(key: str, n: int, dtype: npt.DTypeLike) -> npt.NDArray[Any]:
    """An uninitialised 1-D array of ``n`` items: inside :func:`reusing`, the buffer of
    ``key`` (the same memory as the last call with that key); else a new array."""
    kind = np.dtype(dtype)
    workspace = _ACTIVE.get()
    if workspace is None:
        return np.empty(n, dtype=kind)
    return workspace.take(key, n, kind)

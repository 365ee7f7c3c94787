"""The :func:`blockwise` decorator: a batch function of :mod:`dpledger.metrics` run over a
large fleet in client-aligned blocks (:func:`~dpledger.metrics.blocks.rows_in_blocks`), so
its temporaries stay the size of one block while its rows are the whole-fleet call's, bit
for bit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

import numpy as np
import numpy.typing as npt

from dpledger.errors import InvalidInput
from dpledger.metrics._segments import Segments, segments_for
from dpledger.metrics.blocks import Arrays, rows_in_blocks, worth_blocking

__all__ = ["blockwise"]

P = ParamSpec("P")
R = TypeVar("R")


def _is_blockable(arrays: Sequence[object]) -> int | None:
    """The common sample count if every array is 1-D, equally long and worth blocking."""
    lengths = {a.shape[0] if isinstance(a, np.ndarray) and a.ndim == 1 else -1 for a in arrays}
    if len(lengths) != 1:
        return None
    n = int(lengths.pop())
    return n if worth_blocking(n) else None


def blockwise(fn: Callable[P, R]) -> Callable[P, R]:
    """Run a batch function (per-sample arrays positional, ``offsets=`` keyword) in blocks.

    Inputs that are not plain equal-length 1-D arrays larger than one block, or whose
    ``offsets`` do not validate, go to ``fn`` unchanged, so every error is the one ``fn``
    raises; so do single-client calls (``offsets=None``). The blocks run in the calling
    thread (the batch functions take no ``workers=``; the threaded entry point is
    :meth:`~dpledger.metrics.declarations.MetricDeclaration.contribute`).
    """

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        offsets = kwargs.get("offsets")
        n = None if offsets is None else _is_blockable(args)
        if n is None:
            return fn(*args, **kwargs)
        try:
            seg = segments_for(offsets, n)  # type: ignore[arg-type]
        except InvalidInput:
            return fn(*args, **kwargs)
        settings = {k: v for k, v in kwargs.items() if k != "offsets"}
        call: Callable[..., R] = fn

        def compute(views: Arrays, part: Segments) -> npt.NDArray[Any]:
            return np.asarray(call(*views, offsets=part, **settings))

        def whole() -> R:
            return call(*args, offsets=seg, **settings)

        return rows_in_blocks(compute, args, seg, whole, workers=1)  # type: ignore[arg-type,return-value]

    return run

"""Distinct cells per client: one sort of client-tagged keys for a whole block of clients.

Cell ids are integers (a grid cell a sample was taken in; flatten (ix, iy) to one id). A
client's coverage is the number of distinct ids among its samples
(:func:`dpledger.metrics.spatial.coverage` buckets it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from dpledger.errors import InvalidInput
from dpledger.metrics._blockwise import blockwise
from dpledger.metrics._reading import read_plain
from dpledger.metrics._segments import (
    ClientOffsets,
    FloatArray,
    IntArray,
    Segments,
    segments_for,
)

__all__ = ["distinct_cells"]


@blockwise
def distinct_cells(cells: npt.ArrayLike, *, offsets: ClientOffsets | None = None) -> FloatArray:
    """Number of distinct integer cell ids per client (shape (clients,), or (1,) for one).

    One sort for all clients: each cell id becomes a key ``client · span + (id − the
    client's smallest id)`` (``span`` the widest client's id range), so sorting the keys
    sorts every client's ids in place, client after client; the distinct ids of a client
    are the positions where the sorted key changes. Keys are int32 when they fit (the
    fastest sort), else int64; ids too far apart for either are sorted by (client, id).
    """
    arr = read_plain(cells, "cells must be one flat array of integer cell ids")
    if arr.ndim != 1:
        raise InvalidInput(f"cells must be 1-dimensional integer ids, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":  # not bool, nor timedelta64
        raise InvalidInput(
            f"cells must hold integer cell ids (flatten (ix, iy) to one id), got {arr.dtype}"
        )
    seg = segments_for(offsets, arr.shape[0])
    out = np.zeros(seg.n_clients)
    nonempty = seg.lengths > 0
    if not arr.size:
        return out
    starts = seg.starts[nonempty]
    keys = _client_keys(arr, seg, starts)
    if keys is None:  # ids beyond ±2⁶⁰: sort (client, id) pairs instead
        keys = arr[np.lexsort((arr, seg.ids))]
        changed = np.empty(arr.shape[0], dtype=bool)
        np.not_equal(keys[1:], keys[:-1], out=changed[1:])
        changed[starts] = True  # a client's first id is always new to it
    else:
        keys.sort()  # keys of different clients differ, so each client's first id is new
        changed = np.empty(arr.shape[0], dtype=bool)
        np.not_equal(keys[1:], keys[:-1], out=changed[1:])
        changed[0] = True
    out[nonempty] = np.add.reduceat(changed, starts, dtype=np.int64)
    return out


_KEY_RANGE = 2**60  # |id| below this: client · span − min + id stays inside int64


def _client_keys(
    arr: npt.NDArray[np.integer[Any]], seg: Segments, starts: IntArray
) -> npt.NDArray[np.integer[Any]] | None:
    """Per-sample sort keys ``client · span + (id − client's min id)``, or None if too wide."""
    if arr.dtype.kind == "u" and arr.dtype.itemsize == 8 and int(arr.max()) >= _KEY_RANGE:
        return None
    ids = arr.astype(np.int64, copy=False)
    low = np.minimum.reduceat(ids, starts)
    high = np.maximum.reduceat(ids, starts)
    if int(low.min()) <= -_KEY_RANGE or int(high.max()) >= _KEY_RANGE:
        return None
    span = int((high - low).max()) + 1
    if seg.n_clients * span >= _KEY_RANGE:
        return None
    base = np.zeros(seg.n_clients, dtype=np.int64)
    base[seg.lengths > 0] = low
    base = np.arange(0, seg.n_clients * span, span, dtype=np.int64) - base
    if seg.n_clients * span >= 2**31:
        wide: IntArray = np.repeat(base, seg.lengths)
        wide += ids
        return wide
    # 0 ≤ key < clients · span < 2³¹: summed in int32 from both terms cast to int32, i.e.
    # modulo 2³², which is the key itself: exact, and one int64 pass fewer.
    keys = np.repeat(base.astype(np.int32), seg.lengths)
    keys += ids.astype(np.int32)
    return keys

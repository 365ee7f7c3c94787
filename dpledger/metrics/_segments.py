"""Input checks and vectorised per-client reductions shared by the metric modules.

Clients are contiguous segments of flat per-sample arrays, described by ``offsets``
(the start index of each client; client i owns ``[offsets[i], offsets[i+1])``, the
last owns to the end). Every helper here is a numpy reduction over those segments;
none loops over clients or samples. Every check raises :class:`InvalidInput` naming
the argument and the problem, before anything is computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.metrics._reading import FloatArray as FloatArray  # the metrics' array type
from dpledger.metrics._reading import as_real, read_plain

__all__ = [
    "CellCounts",
    "ClientOffsets",
    "Segments",
    "as_finite",
    "as_float",
    "as_labels",
    "bucket_of",
    "cap_factor",
    "check_same_length",
    "check_unit_interval",
    "checked_segments",
    "edges_array",
    "l1_cap_rows",
    "segments_for",
]

_SMALLEST_NORMAL = float(np.finfo(np.float64).tiny)  # 2.2250738585072014e-308

IntArray = npt.NDArray[np.int64]


def _first_bad(mask: npt.NDArray[np.bool_]) -> int:
    return int(np.flatnonzero(mask)[0])


def as_float(values: npt.ArrayLike, name: str, *, ndim: int = 1) -> FloatArray:
    """``values`` as a float64 array of ``ndim`` dimensions, refusing non-numbers only.

    For kernels that find NaN and inf in their own results (a non-finite sum or extreme)
    and only then call :func:`as_finite` to name the first bad entry: it saves a pass.
    """
    if type(values) is np.ndarray and values.dtype == np.float64 and values.ndim == ndim:
        return values
    arr = as_real(values, name)
    if arr.ndim != ndim:
        raise InvalidInput(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    return arr


def as_finite(values: npt.ArrayLike, name: str, *, ndim: int = 1) -> FloatArray:
    """``values`` as a float64 array of ``ndim`` dimensions, refusing NaN, ±inf and non-numbers."""
    out = as_float(values, name, ndim=ndim)
    # A finite sum proves every entry finite (NaN and inf propagate); it allocates nothing.
    with np.errstate(over="ignore", invalid="ignore"):
        total_is_finite = bool(np.isfinite(out.sum()))
    if not total_is_finite and not np.isfinite(out).all():
        flat = _first_bad(~np.isfinite(out).reshape(-1))
        where = np.unravel_index(flat, out.shape) if out.ndim > 1 else (flat,)
        shown = ", ".join(str(int(i)) for i in where)
        raise InvalidInput(
            f"{name} holds NaN or inf (first at index {shown}); "
            "drop or repair those samples before computing a contribution"
        )
    return out


def as_labels(values: npt.ArrayLike, name: str, n_classes: int) -> IntArray:
    """Integer class labels in ``[0, n_classes)`` as an int64 array."""
    arr = read_plain(values, f"{name} must be one flat array of integer class labels")
    if arr.size == 0 and arr.ndim == 1:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind not in "iu":  # not bool, nor timedelta64 (an np.integer to numpy)
        raise InvalidInput(f"{name} must hold integer class labels, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise InvalidInput(f"{name} must be 1-dimensional, got shape {arr.shape}")
    # One reduction: read as unsigned, a negative label is larger than any class index
    # (in the array's own byte order: a big-endian -256 read as native was 255; review 42).
    unsigned = arr.view(arr.dtype.str.replace("i", "u")) if arr.dtype.kind == "i" else arr
    if int(unsigned.max()) < n_classes:
        return arr.astype(np.int64, copy=False)
    bad = (arr < 0) | (arr >= n_classes)
    if bad.any():
        i = _first_bad(bad)
        raise InvalidInput(
            f"{name} holds label {int(arr[i])} at index {i}, outside [0, n_classes={n_classes})"
        )
    return arr.astype(np.int64, copy=False)


def check_same_length(**arrays: npt.NDArray[np.generic]) -> int:
    """The common length of the named arrays; refuses a mismatch, naming every length."""
    lengths = {name: int(a.shape[0]) for name, a in arrays.items()}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{k}={v}" for k, v in lengths.items())
        raise InvalidInput(f"per-sample arrays must have equal lengths, got {shown}")
    return next(iter(lengths.values()))


def check_unit_interval(values: FloatArray, name: str) -> None:
    """Refuse values outside [0, 1] (probabilities, outcomes)."""
    if values.size == 0 or (values.min() >= 0.0 and values.max() <= 1.0):
        return
    bad = (values < 0.0) | (values > 1.0)
    if bad.any():
        i = _first_bad(bad)
        raise InvalidInput(f"{name} must lie in [0, 1], got {shown(values[i])} at index {i}")


def edges_array(edges: npt.ArrayLike, name: str = "edges") -> FloatArray:
    """Fixed bucket edges: non-empty, finite, strictly increasing (they come from the policy)."""
    arr = as_finite(edges, name)
    if arr.size == 0:
        raise InvalidInput(f"{name} must hold at least one edge")
    if arr.size > 1 and not bool(np.all(np.diff(arr) > 0)):
        raise InvalidInput(f"{name} must be strictly increasing, got {arr.tolist()}")
    return arr


@dataclass(frozen=True)
class Segments:
    """Client segments over ``n_samples`` flat samples: starts, lengths and per-sample ids."""

    starts: IntArray
    lengths: IntArray
    n_samples: int

    @property
    def n_clients(self) -> int:
        """Number of clients (rows of a batch result)."""
        return int(self.starts.shape[0])

    @cached_property
    def ids(self) -> IntArray:
        """Client index of every sample (length ``n_samples``), computed once."""
        return self.tags(1)

    def tags(self, width: int) -> IntArray:
        """``ids * width`` for every sample (int64): the first flat index of each client's row.

        Repeating the multiplied client indices costs one pass instead of two.
        """
        return np.repeat(np.arange(0, self.n_clients * width, width, dtype=np.int64), self.lengths)

    def part(self, c0: int, c1: int) -> Segments:
        """Clients ``[c0, c1)`` as segments of their own samples (starts rebased to 0).

        Trusted: the parent was validated, so no check runs again.
        """
        s0 = int(self.starts[c0]) if c0 < self.n_clients else self.n_samples
        s1 = int(self.starts[c1]) if c1 < self.n_clients else self.n_samples
        return Segments(self.starts[c0:c1] - s0, self.lengths[c0:c1], s1 - s0)

    @cached_property
    def none_empty(self) -> bool:
        """True when every client holds at least one sample (reductions need no mask)."""
        return self.n_samples > 0 and bool(self.lengths.min() > 0)

    @cached_property
    def uniform_length(self) -> int | None:
        """The common sample count when every client holds the same number, else None."""
        first = int(self.lengths[0]) if self.n_clients else 0
        return first if bool(np.all(self.lengths == first)) else None

    def sum(self, values: FloatArray) -> FloatArray:
        """Per-client sums along axis 0 (pairwise-summed); an empty client sums to 0.

        ``np.add.reduceat`` returns the element at the start index for an empty
        segment (and fails on a start equal to the length), so it runs over the
        non-empty segments only: their starts partition the samples exactly.
        """
        if self.none_empty:
            out: FloatArray = np.add.reduceat(values, self.starts, axis=0)
            return out
        out = np.zeros((self.n_clients, *values.shape[1:]), dtype=np.float64)
        nonempty = self.lengths > 0
        if nonempty.any():
            out[nonempty] = np.add.reduceat(values, self.starts[nonempty], axis=0)
        return out

    def max(self, values: FloatArray, empty: float = 0.0) -> FloatArray:
        """Per-client maxima of a 1-D array; ``empty`` for a client with no samples."""
        out = np.full(self.n_clients, empty, dtype=np.float64)
        nonempty = self.lengths > 0
        if nonempty.any():
            out[nonempty] = np.maximum.reduceat(values, self.starts[nonempty])
        return out

    def per_sample(self, per_client: FloatArray) -> FloatArray:
        """Broadcast one value per client to each of its samples."""
        return np.repeat(per_client, self.lengths)

    def counts(
        self,
        buckets: npt.NDArray[np.integer[Any]],
        n_buckets: int,
        factor: FloatArray | None = None,
    ) -> FloatArray:
        """Per-client counts of integer buckets in ``[0, n_buckets)``: shape (clients, buckets).

        Counts are tallied in integers (exact), then scaled once by ``factor`` (one per
        client) if given: each entry is fl(k·f), so a row scaled to an L1 cap exceeds it
        by at most 2·2⁻⁵³ relative whatever its sample count (a subnormal f, which
        :func:`cap_factor` keeps below ``cap / n``, by at most 2⁻⁵³). (Per-sample float weights
        summed by ``bincount`` would drift with the count instead.)
        """
        flat = self.tags(n_buckets)
        flat += buckets
        return self.tally(flat, n_buckets, factor)

    def tally(self, flat: IntArray, n_buckets: int, factor: FloatArray | None = None) -> FloatArray:
        """:meth:`counts` from the flat index ``client · n_buckets + bucket`` of every sample."""
        tally = np.bincount(flat, minlength=self.n_clients * n_buckets).astype(np.float64)
        rows = tally.reshape(self.n_clients, n_buckets)
        if factor is not None:
            rows *= factor[:, None]
        return rows


@dataclass(frozen=True)
class CellCounts:
    """A count contribution before its per-client rows exist: every sample's cell.

    Client i's row is the count of its samples in each of ``n_cells`` cells, as float64,
    times ``factor[i]`` (``min(1, cap / n_i)``; None: 1 for every client) —
    ``seg.tally(seg.tags(n_cells) + cells, n_cells, factor)``. An aggregator that needs
    only per-group sums can add uncapped clients' counts per group directly, without
    their rows (:func:`dpledger.metrics.blocks.sums_in_blocks`).
    """

    seg: Segments
    cells: npt.NDArray[np.integer[Any]]  # each sample's cell in [0, n_cells)
    n_cells: int
    factor: FloatArray | None = None

    def counts(self, clients: npt.NDArray[np.bool_] | None = None) -> IntArray:
        """Integer counts per client (clients, n_cells); only the chosen ``clients`` (a
        per-client mask) when given."""
        seg, cells = self.seg, self.cells
        if clients is not None:
            lengths = seg.lengths[clients]
            cells = cells[np.repeat(clients, seg.lengths)]
            seg = Segments(np.cumsum(lengths) - lengths, lengths, int(cells.shape[0]))
        flat = seg.tags(self.n_cells)
        flat += cells
        return np.bincount(flat, minlength=seg.n_clients * self.n_cells).reshape(-1, self.n_cells)

    def rows(self, counts: IntArray, clients: npt.NDArray[np.bool_] | None = None) -> FloatArray:
        """The per-client rows of ``counts`` (from :meth:`counts` with the same ``clients``),
        bit for bit those of :meth:`Segments.tally`: float64 counts times the factor."""
        rows = counts.astype(np.float64)
        if self.factor is not None:
            rows *= (self.factor if clients is None else self.factor[clients])[:, None]
        return rows


ClientOffsets: TypeAlias = "npt.ArrayLike | Segments"
"""``offsets=``: each client's first sample index, or a validated :class:`Segments`."""


def segments_for(offsets: ClientOffsets | None, n_samples: int) -> Segments:
    """Validate ``offsets`` (None means one client owning everything) into :class:`Segments`.

    A :class:`Segments` (validated once, e.g. by :func:`dpledger.metrics.client_segments`
    for every metric of one fleet) is taken as it is, after checking that it describes
    ``n_samples`` samples.
    """
    if isinstance(offsets, Segments):
        seg = checked_segments(offsets)
        if seg.n_samples != n_samples:
            raise InvalidInput(
                f"the client segments describe {seg.n_samples} samples, "
                f"but the arrays hold {n_samples}"
            )
        return seg
    if offsets is None:
        starts = np.zeros(1, dtype=np.int64)
    else:
        arr = read_plain(offsets, "offsets must be one flat array of start indices")
        if arr.ndim != 1 or arr.size == 0:
            raise InvalidInput(
                f"offsets must be a non-empty 1-D array of start indices, got shape {arr.shape}"
            )
        if arr.dtype.kind not in "iu":  # not bool, nor timedelta64 (an np.integer to numpy)
            raise InvalidInput(f"offsets must hold integers, got dtype {arr.dtype}")
        if arr.dtype.kind == "u" and int(arr.max()) > n_samples:  # 2⁶³+ would wrap negative
            raise InvalidInput(f"offsets point past the samples: {int(arr.max())} > {n_samples}")
        starts = arr.astype(np.int64)
        if starts[0] != 0:
            raise InvalidInput(f"offsets must start at 0, got {int(starts[0])}")
        if starts.size > 1 and bool(np.any(np.diff(starts) < 0)):
            i = _first_bad(np.diff(starts) < 0)
            raise InvalidInput(
                f"offsets must be sorted ascending, got {int(starts[i])} then "
                f"{int(starts[i + 1])} at position {i}"
            )
        if int(starts[-1]) > n_samples:
            raise InvalidInput(
                f"offsets point past the samples: last start {int(starts[-1])} > {n_samples}"
            )
    ends = np.append(starts[1:], n_samples)
    return _sealed(starts, ends - starts, n_samples)


def _sealed(starts: IntArray, lengths: IntArray, n_samples: int) -> Segments:
    """Segments over read-only arrays: a validated index cannot be changed in place under
    the per-sample ``ids`` it caches."""
    starts.setflags(write=False)
    lengths.setflags(write=False)
    return Segments(starts=starts, lengths=lengths, n_samples=n_samples)


def checked_segments(seg: Segments) -> Segments:
    """A :class:`Segments` given by the caller, checked to be a partition of its samples.

    Its fields are public, so one can be built by hand (or changed in place): the starts
    must be where the lengths put them, from 0, and the lengths must cover ``n_samples``
    exactly. The sums read the starts and the person bound and counts the per-sample ids
    (from the lengths), so inconsistent ones let a person's records escape
    ``max_records`` in one silo (review 40). One pass over the clients, not the samples.
    A consistent one built here (read-only arrays) is returned as it is; any other (a
    subclass too, whose methods would compute the rows) as a fresh copy, no cache kept.
    """
    if not isinstance(seg, Segments):
        raise InvalidInput(f"expected client Segments, got {type(seg).__name__}")
    starts, lengths, n = seg.starts, seg.lengths, seg.n_samples
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise InvalidInput(f"Segments.n_samples must be an integer ≥ 0, got {shown(n)}")
    ok = (
        type(starts) is np.ndarray
        and type(lengths) is np.ndarray
        and starts.dtype == np.int64
        and lengths.dtype == np.int64
        and starts.ndim == 1
        and starts.shape == lengths.shape
    )
    if ok and starts.size == 0:  # no clients (a part of none): no samples either
        ok = n == 0
    elif ok:
        ends = np.cumsum(lengths)
        ok = bool(
            (lengths >= 0).all()
            and starts[0] == 0
            and (starts[1:] == ends[:-1]).all()
            and ends[-1] == n
        )
    if not ok:
        raise InvalidInput(
            "these client Segments are not a partition of their samples (starts from 0, "
            "each start the previous start plus its length, the lengths adding up to "
            "n_samples, as int64 arrays): build them with dpledger.metrics.blocks."
            "client_segments(offsets, n_samples), never by hand"
        )
    if type(seg) is Segments and not (starts.flags.writeable or lengths.flags.writeable):
        return seg
    return _sealed(starts.copy(), lengths.copy(), int(n))


def bucket_of(values: FloatArray, edges: FloatArray) -> npt.NDArray[np.integer[Any]]:
    """Bucket = number of edges strictly below the value (len(edges) + 1 buckets).

    For a handful of edges, summing comparisons is several times faster than
    ``searchsorted`` (same result: ``searchsorted(edges, v, side="left")``). The
    result is int8 for ≤ 16 edges, int64 otherwise.
    """
    if edges.shape[0] > 16:
        return np.searchsorted(edges, values, side="left").astype(np.int64)
    out = np.zeros(values.shape[0], dtype=np.int8)
    above = np.empty(values.shape[0], dtype=bool)
    flags = above.view(np.int8)  # a bool is stored as 0 or 1: added as int8, no cast
    for e in edges:  # loop over the fixed edges, not over samples
        np.greater(values, e, out=above)
        out += flags
    return out


def cap_factor(norms: FloatArray, cap: float) -> FloatArray:
    """Per-row factor ``min(1, cap / norm)`` that brings an L1 norm down to ``cap``.

    A factor below the smallest normal double (a cap near 1e-307 over 10⁶ samples) is a
    subnormal, off by up to half of 2⁻¹⁰⁷⁴ from ``cap / norm``: times the norm, past the
    cap by far more than ``CLIENT_ROUNDING_SLACK`` (1.3e-11 of it; review 43). It is taken
    one step down instead, below ``cap / norm`` whatever the rounding.
    """
    with np.errstate(divide="ignore", invalid="ignore"):  # a 0 or NaN norm keeps 1.0
        factor: FloatArray = np.where(norms > cap, cap / norms, 1.0)
    tiny = factor < _SMALLEST_NORMAL
    if tiny.any():
        factor = np.where(tiny, np.nextafter(factor, 0.0), factor)
    return factor


def l1_cap_rows(rows: FloatArray, cap: float) -> FloatArray:
    """Scale each row (over all but axis 0) down so its L1 norm is ≤ ``cap``; smaller rows stay.

    Proportional scaling keeps the shape of the contribution (bucket shares, mean
    gaps) and is what bounds one client's influence whatever its sample count.
    """
    flat = rows.reshape(rows.shape[0], -1)
    factor = cap_factor(np.abs(flat).sum(axis=1), cap)
    scaled: FloatArray = (flat * factor[:, None]).reshape(rows.shape)
    return scaled

"""A round's three-record replies read as columns: one numpy decode per metric, not per reply.

The default reply (:func:`~dpledger.flower.wire.pack`) holds a MetricRecord of scalars, an
ArrayRecord of float64 vectors and a ConfigRecord of versions. :func:`~dpledger.flower.wire.
read_reply` reads one such reply (~15 µs here); for a round of thousands that per-reply work is
the cost. :class:`RecordColumns` instead keeps, during the intake's one pass, only what a
reply in the expected form carries — its scalar values and its ``Array`` objects — and
after the pass checks and decodes each metric's column for all of them at once.

**The expected form** is what :func:`read_reply` accepts, narrowed so that each check is
a comparison of values the pass reads anyway:

- the three records are exactly flwr's ``ConfigRecord``, ``MetricRecord`` and
  ``ArrayRecord`` (records and keys the wrapper does not read are ignored, as
  :func:`read_reply` ignores them);
- none of the schema, round, policy version and edges versions is ``!=`` the plan's (the
  very comparison :func:`read_reply` makes);
- each scalar is a finite ``float`` (its exact type);
- each vector is an ``Array`` (its exact type) with stype ``numpy.ndarray`` and dtype
  ``"float64"`` (exact ``str``s), shape ``(size,)`` (an exact ``tuple``) and ``bytes`` data
  that are exactly what ``np.save`` writes for such an array (header compared as words:
  :func:`~dpledger.flower.npy.npy_column`), so its row is the bytes :func:`read_reply`
  would decode.

The records' entries are read where flwr 1.42 keeps them (a ``_data`` dict; see
:mod:`~dpledger.flower.layout`, which allows it for a final flwr 1.42 release only),
else through their public ``items()`` (:func:`entries`: the dict view's read-only
``mapping``, no copy); the ``Array``'s fields are its public attributes.

A reply in that form is one :func:`read_reply` accepts with these very payloads. Any other
reply — a missing record or key, another type, dtype string or shape, a header that lies
or other bytes, a NaN or infinite scalar, an exception while reading it — is a *misfit*:
the intake reads it with :func:`read_reply`, so its verdict and reason are that reader's.
Bounds and a vector's finiteness stay the aggregator's check, for every row at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import attrgetter, itemgetter, ne
from typing import Any

import numpy as np
import numpy.typing as npt
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict
from flwr.common.constant import SType

from dpledger.flower.npy import npy_column
from dpledger.flower.wire import META_RECORD, SCALARS_RECORD, SCHEMA, VECTORS_RECORD, RoundPlan

__all__ = ["Columns", "RecordColumns", "entries"]

Columns = tuple[list[int], list[int], dict[str, npt.NDArray[np.float64]]]
"""What :meth:`RecordColumns.decode` gives: the accepted replies' node positions and
arrival numbers, and each metric's ``(n, size)`` rows in that order."""
_FLOAT64 = np.dtype("float64")  # what np.dtype(array.dtype) gives read_reply for "float64"
_FIELDS = attrgetter("stype", "dtype", "shape")
_DATA = attrgetter("data")
_MAPPING = attrgetter("mapping")  # a dict view's read-only mapping (no copy)
_DICT_ITEMS: type[Any] = type({}.items())


def entries(record: Any) -> Mapping[str, Any]:
    """A Flower record's entries, read through its public ``items()``: the read-only
    ``mapping`` of the dict view flwr returns (no copy), or a copy if it returns another
    view. A record's ``[]`` is a Python-level call; a look-up here costs a dict's."""
    items = record.items()
    if type(items) is _DICT_ITEMS:
        view: Mapping[str, Any] = items.mapping
        return view
    return dict(items)


def _getter(keys: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """``keys``' values in a dict as a tuple (``KeyError`` if one is missing), in C."""
    if len(keys) >= 2:
        return itemgetter(*keys)
    if keys:
        only = keys[0]
        return lambda d: (d[only],)
    return lambda d: ()


class RecordColumns:
    """The round's three-record replies in the expected form (module docstring), kept
    during the intake's pass by :meth:`take` and checked and decoded by :meth:`decode`."""

    def __init__(self, plan: RoundPlan) -> None:
        metrics = plan.metrics
        self.scalar_names = tuple(n for n, m in metrics.items() if m.scalar)
        self.vector_names = tuple(n for n, m in metrics.items() if not m.scalar)
        self.sizes = {n: metrics[n].size for n in self.vector_names}
        versions = {f"edges-version.{n}": m.edges_version for n, m in metrics.items()
                    if m.edges_version is not None}  # fmt: skip
        meta_keys = ("schema", "round", "policy-version", *versions)
        self.meta_want = (SCHEMA, plan.server_round, plan.policy_version, *versions.values())
        self._records = itemgetter(META_RECORD, SCALARS_RECORD, VECTORS_RECORD)
        self._meta = itemgetter(*meta_keys)
        self._scalars = _getter(self.scalar_names)
        self._vectors = _getter(self.vector_names)
        self.kept: list[tuple[int, int, RecordDict, tuple[Any, ...], tuple[Any, ...]]] = []
        """Per kept reply: node position, arrival number, content, scalars, Arrays."""

    def take(
        self,
        seq: int,
        at: int,
        content: RecordDict,
        records: Mapping[str, Any],
        direct: bool = False,
    ) -> bool:
        """Keep reply number ``seq`` (node position ``at``; ``records`` is its content's
        records, :func:`entries`) if its records have the expected form as far as one
        reply's look-ups show; False: read it with :func:`read_reply`. Never raises.
        ``direct``: read the records' entries where flwr 1.42 keeps them (the intake's
        :data:`~dpledger.flower.layout.KNOWN` for the round)."""
        try:
            meta, scalars, vectors = self._records(records)
            if not (
                type(meta) is ConfigRecord
                and type(scalars) is MetricRecord
                and type(vectors) is ArrayRecord
            ):
                return False
            if direct:  # flwr 1.42 keeps a record's entries in its _data dict
                meta, scalars, vectors = (
                    meta.__dict__["_data"],
                    scalars.__dict__["_data"],
                    vectors.__dict__["_data"],
                )
            else:  # entries(), inlined: another view than a dict's is a misfit
                meta, scalars, vectors = map(_MAPPING, (meta.items(), scalars.items(),
                                                        vectors.items()))  # fmt: skip
            if any(map(ne, self._meta(meta), self.meta_want)):
                return False
            numbers = self._scalars(scalars)
            arrays = self._vectors(vectors)
        except Exception:  # a missing record or key, or anything stranger: read_reply says
            return False
        self.kept.append((at, seq, content, numbers, arrays))
        return True

    def decode(self) -> tuple[Columns, list[tuple[int, int, RecordDict]]]:
        """The kept replies whose every column checks out, as rows, and the misfits
        ``(arrival number, node position, content)`` for :func:`read_reply`."""
        if not self.kept:
            rows = {name: np.zeros((0, 1)) for name in self.scalar_names}
            rows |= {name: np.zeros((0, size)) for name, size in self.sizes.items()}
            return ([], [], rows), []
        at, seq, contents, scalars, vectors = map(list, zip(*self.kept, strict=True))
        ok = np.ones(len(at), dtype=bool)
        rows = {}
        for name, column in zip(self.scalar_names, zip(*scalars, strict=True), strict=False):
            rows[name], fits = _scalar_column(column)
            ok &= fits
        for name, column in zip(self.vector_names, zip(*vectors, strict=True), strict=False):
            rows[name], fits = _vector_column(column, self.sizes[name])
            ok &= fits
        if ok.all():
            return (at, seq, rows), []
        keep = np.flatnonzero(ok).tolist()
        misfits = [(seq[i], at[i], contents[i]) for i in np.flatnonzero(~ok).tolist()]
        kept = {name: x[ok] for name, x in rows.items()}
        return ([at[i] for i in keep], [seq[i] for i in keep], kept), misfits


def _scalar_column(
    values: tuple[Any, ...],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """One scalar metric's values as ``(n, 1)`` rows, and which are finite floats."""
    n = len(values)
    if list(map(type, values)).count(float) == n:
        x = np.array(values, dtype=np.float64)
        fits = np.isfinite(x)
    else:
        typed = [type(v) is float for v in values]
        x = np.array([v if t else 0.0 for v, t in zip(values, typed, strict=True)],
                     dtype=np.float64)  # fmt: skip
        fits = np.isfinite(x) & np.asarray(typed, dtype=bool)
    return x.reshape(n, 1), fits


def _vector_column(
    arrays: tuple[Any, ...], size: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """One vector metric's Arrays as ``(n, size)`` rows, and which have the expected form.

    The fields are compared with ``==`` and their types checked exactly (a ``str``
    subclass could answer ``==`` and ``!=`` alike; :func:`read_reply` asks ``!=``). A
    shape's element needs no type check: ``read_reply`` compares ``tuple(shape)`` with
    ``!=``, which for tuples is decided by the elements' ``==``.
    """
    n = len(arrays)
    try:
        if list(map(type, arrays)).count(Array) == n:
            stypes, dtypes, shapes = zip(*map(_FIELDS, arrays), strict=True)
            if (
                stypes.count(SType.NUMPY) == n
                and dtypes.count("float64") == n
                and shapes.count((size,)) == n
                and list(map(type, stypes)).count(str) == n
                and list(map(type, dtypes)).count(str) == n
                and list(map(type, shapes)).count(tuple) == n
            ):
                return npy_column(list(map(_DATA, arrays)), _FLOAT64, size)
    except Exception:  # e.g. a shape that does not compare: row by row below
        pass
    typed = [_fits(a, size) for a in arrays]
    x, fits = npy_column([a.data if t else None for a, t in zip(arrays, typed, strict=True)],
                         _FLOAT64, size)  # fmt: skip
    return x, fits & np.asarray(typed, dtype=bool)


def _fits(array: Any, size: int) -> bool:
    """Whether one ``array`` is an ``Array`` with the expected fields (never raises)."""
    try:
        if type(array) is not Array:
            return False
        stype, dtype, shape = _FIELDS(array)
        return (
            type(stype) is str
            and type(dtype) is str
            and type(shape) is tuple
            and stype == SType.NUMPY
            and dtype == "float64"
            and shape == (size,)
            and type(array.data) is bytes
        )
    except Exception:
        return False

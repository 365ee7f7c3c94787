"""What travels between the wrapper and its clients: the round's plan, and a contribution reply.

**The plan** (server → client) rides in every evaluate instruction as a ConfigRecord named
:data:`PLAN_RECORD` holding one JSON string: the schema, the round and epoch, the policy
version, and per policy metric the declared contribution that computes it
(:data:`dpledger.metrics.DECLARATIONS`), its policy bounds (clip, L1 cap, edges,
dimension), its edges version and the declaration's own settings (e.g. ``n_classes``).
The policy on the server stays the one source of truth for bounds; a client reads them
from the plan unless its metric module pins its own (then it says which edges version).

**The reply** (client → server) holds three records, all namespaced so that they sit
beside a user's own records: scalar contributions in a MetricRecord
(:data:`SCALARS_RECORD`, one float per ``scalar_mean`` metric), vectors in an ArrayRecord
(:data:`VECTORS_RECORD`, one float64 array per vector metric) and a ConfigRecord
(:data:`META_RECORD`) with the schema, round, policy version and the edges version each
vector was bucketed with. :func:`read_reply` turns one reply into validated contributions
or a reason to reject it; it never raises on what a client sent.

**The packed reply** (opt-in, :func:`pack_packed`) carries the same contributions in one
float64 Array (:data:`PACKED_RECORD` / :data:`PACKED_KEY`): a public header of
:data:`HEADER_SIZE` numbers — the layout version (:data:`PACKED_LAYOUT`), the round and a
52-bit digest of the layout (schema, policy version, and per metric its name, kind,
length and the edges version the client bucketed with) — then every metric's
contribution in the order of the metric names. The server reads a round's packed replies as one
matrix: the header, finiteness and bounds are checked for all of them at once
(:func:`read_packed`), which is what makes a 1,000-client round cheap. A wrong digest
means the client's policy version, metric layout or edges versions differ from the plan.
Both formats are accepted in the same round.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt
from flwr.app import Array, ArrayRecord, ConfigRecord, MetricRecord, RecordDict
from flwr.app.typing import ConfigRecordValues, MetricRecordValues
from flwr.common.constant import SType

from dpledger._shown import shown
from dpledger.errors import DpLedgerError, InvalidInput
from dpledger.flower.npy import npy_disagrees
from dpledger.metrics.declarations import DECLARATIONS, Bounds

__all__ = [
    "HEADER_SIZE",
    "META_RECORD",
    "PACKED_KEY",
    "PACKED_LAYOUT",
    "PACKED_RECORD",
    "PLAN_RECORD",
    "SCALARS_RECORD",
    "SCHEMA",
    "VECTORS_RECORD",
    "MetricPlan",
    "PackedLayout",
    "RoundPlan",
    "empty_contribution",
    "pack",
    "pack_packed",
    "packed_blob",
    "packed_heads",
    "read_packed",
    "read_reply",
]

SCHEMA = "dpledger-flower/1"
"""Version of the plan and reply layout; a reply in another schema is rejected."""
PLAN_RECORD = "dpledger.plan"
SCALARS_RECORD = "dpledger.scalars"
VECTORS_RECORD = "dpledger.vectors"
META_RECORD = "dpledger.meta"
PACKED_RECORD = "dpledger.packed"
PACKED_KEY = "contributions"
PACKED_LAYOUT = 1
"""Version of the packed reply's layout (its header's first number)."""
HEADER_SIZE = 3
"""Numbers before the contributions in a packed reply: layout version, round, digest."""
_FLOAT64 = np.dtype("<f8")


@dataclass(frozen=True)
class MetricPlan:
    """One policy metric as a client computes it: declaration, bounds, edges version, settings."""

    metric: str
    declaration: str
    kind: str
    bounds: Bounds
    edges_version: str | None
    params: Mapping[str, Any]
    nonnegative: bool

    @property
    def scalar(self) -> bool:
        """Whether the contribution is one number (a ``scalar_mean``)."""
        return self.kind == "scalar_mean"

    @functools.cached_property
    def size(self) -> int:
        """Length of a client's contribution (1 for a scalar)."""
        if self.scalar:
            return 1
        if self.bounds.edges is not None and self.kind == "histogram":
            return len(self.bounds.edges) + 1
        return int(self.bounds.dimension or 0)

    def as_json(self) -> dict[str, Any]:
        """JSON-ready form (the plan's wire format)."""
        b = self.bounds
        return {
            "declaration": self.declaration,
            "kind": self.kind,
            "bounds": {
                "low": b.low, "high": b.high, "cap": b.cap,
                "edges": None if b.edges is None else list(b.edges), "dimension": b.dimension,
            },
            "edges_version": self.edges_version,
            "params": dict(self.params),
            "nonnegative": self.nonnegative,
        }  # fmt: skip

    @staticmethod
    def from_json(metric: str, d: Mapping[str, Any]) -> MetricPlan:
        """Read one metric's plan (raises :class:`InvalidInput` on a malformed one)."""
        try:
            b = d["bounds"]
            edges = b["edges"]
            bounds = Bounds(
                low=b["low"], high=b["high"], cap=b["cap"],
                edges=None if edges is None else tuple(float(e) for e in edges),
                dimension=b["dimension"],
            )  # fmt: skip
            plan = MetricPlan(
                metric, str(d["declaration"]), str(d["kind"]), bounds, d["edges_version"],
                MappingProxyType(dict(d["params"])), bool(d["nonnegative"]),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidInput(f"malformed dpledger plan for metric {metric!r}: {e}") from None
        if plan.declaration not in DECLARATIONS:
            raise InvalidInput(
                f"the plan asks for {plan.declaration!r}, which this dpledger does not declare; "
                "upgrade dpledger on the client"
            )
        return plan


def empty_contribution(plan: MetricPlan, bounds: Bounds | None = None) -> npt.NDArray[np.float64]:
    """What a client with no samples contributes to ``plan``'s metric: its declared function
    on empty arrays, under ``bounds`` (default: the plan's). Public and within the bounds
    (zeros for every count); an error here is the configuration's, never a client's data."""
    declared = DECLARATIONS[plan.declaration]
    empty = {name: np.zeros(0, dtype=np.float64) for name in declared.inputs}
    try:
        rows = declared.contribute(
            empty, plan.bounds if bounds is None else bounds, offsets=[0], **dict(plan.params)
        )
    except DpLedgerError as e:
        raise InvalidInput(f"{plan.metric}: {plan.declaration} cannot be computed: {e}") from e
    return np.asarray(rows[0], dtype=np.float64).reshape(-1)


@dataclass(frozen=True)
class PackedLayout:
    """A round's packed reply: each metric's ``[start, stop)`` columns, the row width
    (header included) and the layout digest the plan expects."""

    spans: Mapping[str, tuple[int, int]]
    width: int
    digest: int


@dataclass(frozen=True)
class RoundPlan:
    """What the wrapper asks of every client in one evaluate round."""

    server_round: int
    epoch: int
    policy_version: str
    metrics: Mapping[str, MetricPlan]

    def record(self) -> ConfigRecord:
        """The ConfigRecord put into every evaluate instruction."""
        body = {
            "schema": SCHEMA,
            "round": self.server_round,
            "epoch": self.epoch,
            "policy_version": self.policy_version,
            "metrics": {k: m.as_json() for k, m in self.metrics.items()},
        }
        return ConfigRecord({"plan": json.dumps(body, sort_keys=True)})

    @functools.cached_property
    def packed(self) -> PackedLayout:
        """Where each metric sits in a packed reply, and the digest the plan expects."""
        spans: dict[str, tuple[int, int]] = {}
        at = HEADER_SIZE
        for name in sorted(self.metrics):  # the plan's JSON sorts its keys: so does the layout
            spans[name] = (at, at + self.metrics[name].size)
            at += self.metrics[name].size
        versions = {name: m.edges_version for name, m in self.metrics.items()}
        return PackedLayout(MappingProxyType(spans), at, self.digest(versions))

    def digest(self, edges_versions: Mapping[str, str | None]) -> int:
        """The 52-bit layout digest (exact in a float64) for these edges versions."""
        body = json.dumps(
            [SCHEMA, PACKED_LAYOUT, self.policy_version,
             [[n, self.metrics[n].kind, self.metrics[n].size, edges_versions.get(n)]
              for n in sorted(self.metrics)]],
        )  # fmt: skip
        return int.from_bytes(hashlib.sha256(body.encode()).digest()[:7], "big") >> 4

    @staticmethod
    def from_content(content: RecordDict) -> RoundPlan:
        """The plan inside an evaluate instruction's content."""
        rec = content.config_records.get(PLAN_RECORD)
        if rec is None or not isinstance(rec.get("plan"), str):
            raise InvalidInput(
                f"the evaluate instruction carries no {PLAN_RECORD!r} ConfigRecord: the server "
                "must wrap its strategy in dpledger.flower.LedgerEvaluation"
            )
        try:
            body = json.loads(str(rec["plan"]))
            if body["schema"] != SCHEMA:
                raise InvalidInput(
                    f"the server speaks {body['schema']!r}, this client {SCHEMA!r}: upgrade the "
                    "older side"
                )
            metrics = {k: MetricPlan.from_json(k, v) for k, v in body["metrics"].items()}
            return RoundPlan(
                int(body["round"]), int(body["epoch"]), str(body["policy_version"]),
                MappingProxyType(metrics),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            if isinstance(e, InvalidInput):
                raise
            raise InvalidInput(f"malformed dpledger plan: {e}") from None


def pack(
    plan: RoundPlan,
    rows: Mapping[str, npt.NDArray[np.float64]],
    edges_versions: Mapping[str, str | None],
) -> RecordDict:
    """One client's contributions as the reply's records (see the module docstring)."""
    scalars: dict[str, MetricRecordValues] = {}
    vectors: dict[str, Array] = {}
    meta: dict[str, ConfigRecordValues] = {
        "schema": SCHEMA,
        "round": plan.server_round,
        "policy-version": plan.policy_version,
    }
    for name, m in plan.metrics.items():
        row = np.asarray(rows[name], dtype=np.float64).reshape(-1)
        if m.scalar:
            scalars[name] = float(row[0])
        else:
            vectors[name] = Array(np.ascontiguousarray(row))
        version = edges_versions.get(name)
        if version is not None:
            meta[f"edges-version.{name}"] = version
    return RecordDict(
        {
            SCALARS_RECORD: MetricRecord(scalars),
            VECTORS_RECORD: ArrayRecord(vectors),
            META_RECORD: ConfigRecord(meta),
        }
    )


def pack_packed(
    plan: RoundPlan,
    rows: Mapping[str, npt.NDArray[np.float64]],
    edges_versions: Mapping[str, str | None],
) -> RecordDict:
    """One client's contributions as a packed reply (see the module docstring)."""
    layout = plan.packed
    out = np.empty(layout.width, dtype=_FLOAT64)
    out[:HEADER_SIZE] = (PACKED_LAYOUT, plan.server_round, plan.digest(edges_versions))
    for name, m in plan.metrics.items():
        row = np.asarray(rows[name], dtype=np.float64).reshape(-1)
        if row.size != m.size:
            raise InvalidInput(f"{name}: {row.size} numbers, the plan's layout has {m.size}")
        start, stop = layout.spans[name]
        out[start:stop] = row
    return RecordDict({PACKED_RECORD: ArrayRecord({PACKED_KEY: Array(out)})})


def packed_blob(record: object, width: int) -> bytes | memoryview | str:
    """A packed reply's ``width`` float64 numbers as raw bytes, or why not (never raises).

    Only the structure is checked here (one reply at a time), with the ``.npy`` header of
    the bytes against the declared dtype and shape; the packed header, finiteness and
    bounds are checked for every reply of the round at once (:func:`read_packed`).
    """
    if not isinstance(record, ArrayRecord):
        return f"wrong schema: {PACKED_RECORD!r} is not an ArrayRecord"
    entries = _entries(record)
    array = entries.get(PACKED_KEY)
    if len(entries) != 1 or not isinstance(array, Array):
        return f"wrong schema: {PACKED_RECORD!r} must hold one Array named {PACKED_KEY!r}"
    if array.stype != SType.NUMPY:
        return "packed: not a numpy Array"
    if array.dtype != "float64":
        return f"packed: dtype {array.dtype!r}, expected 'float64'"
    shape = tuple(array.shape)
    if shape != (width,):
        return f"packed: shape {shape}, the plan's layout has ({width},)"
    data = array.data
    nbytes = width * 8
    if not isinstance(data, bytes) or len(data) < nbytes:
        return "packed: truncated data"
    problem = npy_disagrees(data, _FLOAT64, width)
    if problem is not None:
        return f"packed: {problem}"
    return memoryview(data)[len(data) - nbytes :]


def read_packed(
    plan: RoundPlan, blobs: list[bytes | memoryview]
) -> tuple[npt.NDArray[np.float64], list[str | None]]:
    """The round's packed replies as one ``(n, width)`` matrix, and per row why its header
    is wrong (:func:`packed_heads`) or None. Finiteness and bounds of the contributions
    are the aggregator's check."""
    layout = plan.packed
    if not blobs:
        return np.zeros((0, layout.width), dtype=np.float64), []
    x = np.frombuffer(b"".join(blobs), dtype=_FLOAT64).reshape(len(blobs), layout.width)
    return x, packed_heads(plan, x)


def packed_heads(plan: RoundPlan, x: npt.NDArray[np.float64]) -> list[str | None]:
    """Per row of a matrix of packed replies, why its header (layout version, round,
    digest) is not the plan's, or None: one vectorised comparison for the round."""
    head = x[:, :HEADER_SIZE]
    ok = (
        (head[:, 0] == PACKED_LAYOUT)
        & (head[:, 1] == plan.server_round)
        & (head[:, 2] == float(plan.packed.digest))
    )
    if ok.all():
        return [None] * len(x)
    reasons: list[str | None] = []
    for good, (version, r, _) in zip(ok.tolist(), head.tolist(), strict=True):
        if good:
            reasons.append(None)
        elif version != PACKED_LAYOUT:
            reasons.append(f"packed: layout version {version!r}, expected {PACKED_LAYOUT}")
        elif r != plan.server_round:
            reasons.append(f"packed: answers round {r!r}, not {plan.server_round}")
        else:
            reasons.append(
                "packed: layout digest differs from the plan's (policy version, metric "
                "layout or edges versions differ)"
            )
    return reasons


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _entries(record: Any) -> dict[str, Any]:
    """A Flower record's entries as a plain dict: one copy through its public ``items()``,
    after which each look-up costs a dict's (a record's ``[]`` is a Python-level call)."""
    return dict(record.items())


def _vector(array: object, size: int) -> npt.NDArray[Any] | str:
    """A reply's 1-D numeric array of length ``size``, or why not.

    Decoded from the ``.npy`` bytes Flower carries (a 1-D array's data is the last
    ``size × itemsize`` bytes, whatever its memory order), after checking the declared
    dtype and shape, and that the bytes' own header agrees with them
    (:func:`~dpledger.flower.npy.npy_disagrees`: a reply whose bytes say otherwise is
    rejected).
    """
    if not isinstance(array, Array) or array.stype != SType.NUMPY:
        return "not a numpy Array"
    shape = tuple(array.shape)
    if shape != (size,):
        return f"shape {shape}, expected ({size},)"
    try:
        dtype = np.dtype(array.dtype)
    except (TypeError, ValueError):
        return f"unknown dtype {array.dtype!r}"
    if dtype.kind not in "fiu":
        return f"dtype {dtype} is not a real number type"
    data = array.data
    nbytes = size * dtype.itemsize
    if not isinstance(data, bytes) or len(data) < nbytes:
        return "truncated data"
    problem = npy_disagrees(data, dtype, size)
    if problem is not None:
        return problem
    return np.frombuffer(data, dtype=dtype, count=size, offset=len(data) - nbytes)


def read_reply(plan: RoundPlan, content: RecordDict) -> tuple[dict[str, Any], str | None]:
    """A reply's payload per metric (a float, or a 1-D array), or ``({}, reason)``.

    Checks the schema, the round, the policy version, and each metric's presence, edges
    version, dtype and shape (and a scalar's finiteness); a payload's bounds and a vector's
    finiteness are the aggregator's check
    (:meth:`dpledger.flower.Aggregator.check`). Anything else a client sent (its own
    records, extra keys) is ignored. Never raises on the reply's content.
    """
    records = _entries(content)
    meta, scalars, vectors = (records.get(k) for k in (META_RECORD, SCALARS_RECORD,
                                                        VECTORS_RECORD))  # fmt: skip
    if not (
        isinstance(meta, ConfigRecord)
        and isinstance(scalars, MetricRecord)
        and isinstance(vectors, ArrayRecord)
    ):
        return {}, (
            f"wrong schema: needs the records {SCALARS_RECORD!r}, {VECTORS_RECORD!r} and "
            f"{META_RECORD!r}"
        )
    info, numbers, arrays = _entries(meta), _entries(scalars), _entries(vectors)
    if info.get("schema") != SCHEMA:
        return {}, f"wrong schema: {info.get('schema')!r}, expected {SCHEMA!r}"
    if info.get("round") != plan.server_round:
        return {}, f"answers round {info.get('round')!r}, not {plan.server_round}"
    if info.get("policy-version") != plan.policy_version:
        got = info.get("policy-version")
        return {}, f"policy version {shown(got)}, not {shown(plan.policy_version)}"
    out: dict[str, Any] = {}
    for name, m in plan.metrics.items():
        if m.edges_version is not None:
            got = info.get(f"edges-version.{name}")
            if got != m.edges_version:
                return (
                    {},
                    f"{name}: edges version {shown(got)}, the policy has {shown(m.edges_version)}",
                )
        if m.scalar:
            x = _number(numbers.get(name))
            if x is None:
                return {}, f"wrong schema: no number for scalar metric {name!r}"
            if x != x or x in (math.inf, -math.inf):
                return {}, f"{name}: NaN or inf"
            out[name] = x
            continue
        row = _vector(arrays.get(name), m.size)
        if isinstance(row, str):
            return {}, f"{name}: {row}"
        out[name] = row  # finiteness and bounds: the aggregator's check, one array per metric
    return out, None

"""One evaluate round's replies sorted: each selected node's status, each region's rows.

:func:`sort_replies` is what ``LedgerEvaluation.aggregate_evaluate`` does before summing.
Every reply is classified reported, failed (an error reply), dropped (selected, no reply)
or rejected (wrong schema, out of bounds, wrong edges version, a packed header or
``.npy`` header that disagrees), with the reason; a reply the wrapper did not ask for
(not selected, or a node's second reply) is only counted. A bad reply never ends the run.

It is built for rounds of thousands of replies, where per-reply Python work is the cost
(the same sums released directly take a few milliseconds):

- each Flower ``Message`` is touched once: its node id, error, content and the records'
  entries read where flwr 1.42 stores them (:mod:`~dpledger.flower.layout`: only for a
  final flwr 1.42 release and the exact flwr types; otherwise, and on any other flwr,
  through the public accessors ``metadata.src_node_id``, ``has_error()``, ``content``,
  ``items()``), and the ``Array``'s fields;
- a three-record reply in the expected form keeps only its scalars and ``Array`` objects;
  each metric's column is checked and decoded for all of them at once
  (:class:`~dpledger.flower.columns.RecordColumns`). Any other three-record reply is read
  by :func:`~dpledger.flower.wire.read_reply`, which gives its verdict and reason;
- a packed reply whose ``.npy`` bytes are exactly what ``np.save`` writes for the plan's
  row (compared byte for byte) keeps only its bytes; all of them are decoded in one numpy
  call (:func:`~dpledger.flower.npy.npy_rows`). Any other reply takes the general path
  (:func:`~dpledger.flower.wire.packed_blob` or
  :func:`~dpledger.flower.wire.read_reply`), which says why it is rejected — or accepts
  it (another numpy's header that agrees);
- the packed headers, finiteness and bounds are checked for all rows at once (the
  aggregator's check, one array per metric): a node rejected for any metric contributes
  to none;
- statuses are one byte per node (:class:`~dpledger.flower.report.NodeStatuses`), with
  reasons only for the nodes that did not report; health is one ``bincount``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from flwr.app import Array, ArrayRecord, Message, RecordDict
from flwr.common.constant import SType

from dpledger.errors import InternalError
from dpledger.flower import layout
from dpledger.flower.aggregation import Aggregator
from dpledger.flower.columns import RecordColumns, entries
from dpledger.flower.npy import npy_header, npy_rows
from dpledger.flower.report import STATUSES, Health, NodeStatuses, short_reason
from dpledger.flower.wire import (
    PACKED_KEY,
    PACKED_RECORD,
    MetricPlan,
    RoundPlan,
    packed_blob,
    packed_heads,
    read_packed,
    read_reply,
)

__all__ = ["Intake", "sort_replies"]

REPORTED, FAILED, DROPPED, REJECTED = (
    STATUSES.index(s) for s in ("reported", "failed", "dropped", "rejected")
)
_SOUND = len(STATUSES)  # answered, structurally sound: the round-wide checks decide
_FLOAT64 = np.dtype("<f8")
_NONE = object()
_UNREAD: Any = object()  # a reply's error, not yet read through its accessors


@dataclass(frozen=True)
class Intake:
    """A sorted round: every selected node's status, each region's health, each region's
    accepted rows per metric (every region with a selected node, possibly no rows), and
    how many replies were not asked for."""

    nodes: NodeStatuses
    health: dict[str, Health]
    accepted: dict[str, dict[str, npt.NDArray[Any]]]
    unexpected: int


class _Replies:
    """What one pass over the replies keeps, by node position (selection order)."""

    def __init__(self, plan: RoundPlan, n: int) -> None:
        self.status = bytearray([DROPPED]) * n
        self.reasons: dict[int, str] = {}
        self.columns = RecordColumns(plan)  # three-record, the expected form: decoded together
        self.record_at: list[int] = []  # three-record, read one by one (read_reply)
        self.record_seq: list[int] = []  # their arrival numbers
        self.records: list[dict[str, Any]] = []
        self.npy_at: list[int] = []  # packed, the np.save header: decoded together
        self.npy: list[bytes] = []
        self.blob_at: list[int] = []  # packed, another writer's agreeing header
        self.blobs: list[bytes | memoryview] = []
        self.unexpected = 0

    def reject(self, at: int, reason: str) -> None:
        self.status[at] = REJECTED
        self.reasons[at] = short_reason(reason)

    def read_records(self, plan: RoundPlan, seq: int, at: int, content: RecordDict) -> None:
        """Reply number ``seq`` (node position ``at``) read alone: ``read_reply``'s verdict."""
        try:
            payloads, problem = read_reply(plan, content)
        except Exception as e:  # read_reply never raises on content: this is a strange one
            self.reject(at, f"unreadable reply ({type(e).__name__})")
            return
        if problem is not None:
            self.reject(at, problem)
        else:
            self.record_at.append(at)
            self.record_seq.append(seq)
            self.records.append(payloads)


def sort_replies(
    plan: RoundPlan,
    selected: Mapping[int, str],
    replies: Iterable[Message],
    aggregator: Aggregator,
) -> Intake:
    """Sort ``replies`` to the nodes ``selected`` (node id → region, in selection order)
    against ``plan`` (module docstring); the first reply of each selected node counts."""
    ids = list(selected)
    regions = tuple(dict.fromkeys(selected.values()))  # in order of first appearance
    code = {r: k for k, r in enumerate(regions)}
    where = np.fromiter(map(code.__getitem__, selected.values()), dtype=np.intp, count=len(ids))
    got = _read_all(plan, dict(zip(ids, range(len(ids)), strict=True)), replies)
    (fast_at, fast_seq, fast), misfits = got.columns.decode()
    for seq, at, content in misfits:  # read alone: read_reply's verdict and reason
        got.read_records(plan, seq, at, content)
    record_at = fast_at + got.record_at
    order = None  # the three-record rows in arrival order, as one reader gives them
    if got.record_at:
        order = np.argsort(np.asarray(fast_seq + got.record_seq, dtype=np.intp), kind="stable")
        record_at = [record_at[i] for i in order.tolist()]
    matrix = _packed_matrix(plan, got)
    packed_at = got.npy_at + got.blob_at
    heads = packed_heads(plan, matrix)
    if heads.count(None) != len(heads):  # the usual round has no wrong header
        for at, why in zip(packed_at, heads, strict=True):
            if why is not None:
                got.reject(at, why)
    sound = record_at + packed_at
    rows = {
        name: _rows(_record_rows(m, fast[name], [r[name] for r in got.records], order),
                    matrix[:, a:b])
        for name, m in plan.metrics.items()
        for a, b in [plan.packed.spans[name]]
    }  # fmt: skip
    for name, m in plan.metrics.items():
        checked = _checked(aggregator, m, rows[name])
        if len(checked) != len(sound):
            raise InternalError(f"the intake checked {len(checked)} of {len(sound)} rows")
        if checked.count(None) == len(checked):
            continue  # the usual case: every row within its bounds
        for at, reason in zip(sound, checked, strict=True):
            if reason is not None and got.status[at] != REJECTED:
                got.reject(at, reason)
    status = np.frombuffer(got.status, dtype=np.uint8)  # shares the bytearray's memory
    answered = np.asarray(sound, dtype=np.intp)
    keep = status[answered] != REJECTED
    status[answered[keep]] = REPORTED
    kept = answered[keep]  # the accepted rows by region, in reading order within each
    order = np.flatnonzero(keep)[np.argsort(where[kept], kind="stable")]
    cut = np.searchsorted(where[answered[order]], np.arange(len(regions) + 1)).tolist()
    grouped = {name: r[order] for name, r in rows.items()}
    accepted = {
        region: {name: x[cut[k] : cut[k + 1]] for name, x in grouped.items()}
        for k, region in enumerate(regions)
    }
    nodes = NodeStatuses(ids, regions, where, bytes(got.status), got.reasons)
    return Intake(nodes, nodes.health(), accepted, got.unexpected)


def _checked(aggregator: Aggregator, m: MetricPlan, rows: npt.NDArray[Any]) -> list[str | None]:
    """The aggregator's verdict on each row: all rows at once, or — when a third-party
    ``check`` raises or gives no verdict per row — row by row, a row whose own check fails
    rejected for it (its message left out: it may quote the payload). Never raises."""
    try:
        found: object = aggregator.check(m, rows)
        if isinstance(found, list | tuple) and _verdicts(found, len(rows)):
            return list(found)
    except Exception:  # row by row below says which row it was
        pass
    out: list[str | None] = []
    for i in range(len(rows)):
        try:
            one: object = aggregator.check(m, rows[i : i + 1])
            verdict = one[0] if isinstance(one, list | tuple) and _verdicts(one, 1) else (
                f"{m.metric}: the aggregator's check gave no verdict"
            )  # fmt: skip
            out.append(verdict)
        except Exception as e:
            out.append(f"{m.metric}: the aggregator's check failed ({type(e).__name__})")
    return out


def _verdicts(found: list[object] | tuple[object, ...], n: int) -> bool:
    """Whether ``found`` (a list or tuple) is ``n`` verdicts: each None or a reason. May
    raise on a strange element (``count`` compares each with None; an array's truth is
    ambiguous): the caller asks inside its ``try``."""
    if len(found) != n:
        return False
    return found.count(None) == n or all(v is None or isinstance(v, str) for v in found)


def _read_all(plan: RoundPlan, index: dict[int, int], replies: Iterable[Message]) -> _Replies:
    """One pass over the replies, touching each Message once (module docstring)."""
    width = plan.packed.width
    shape = (width,)
    head = npy_header(_FLOAT64, width)
    size = len(head) + 8 * width
    got = _Replies(plan, len(index))
    status, numpy, position = got.status, SType.NUMPY, index.get
    npy_at, npy = got.npy_at.append, got.npy.append  # bound once: the loop runs per reply
    take = got.columns.take
    direct, stored = layout.KNOWN, layout.stored  # flwr 1.42's storage (layout.py)
    for seq, reply in enumerate(replies):
        fields = stored(reply) if direct else None
        if fields is None:  # the public accessors, in their old order (layout.py)
            node, error, content = reply.metadata.src_node_id, _UNREAD, None
        else:
            node, error, content = fields
        at = position(node, -1)
        if at < 0 or status[at] != DROPPED:  # not selected, or not its first reply
            got.unexpected += 1
            continue
        if error is _UNREAD:
            error = reply.error if reply.has_error() else None
        if error is not None:
            status[at] = FAILED
            got.reasons[at] = short_reason(f"error {error.code}: {error.reason}")
            continue
        status[at] = _SOUND
        try:
            if content is None:  # read through the accessor (it raises if there is none)
                content = reply.content
            if type(content) is RecordDict:  # flwr's own: items() is its dict's, never raises
                records = content.__dict__["_data"] if direct else entries(content)
                record = records.get(PACKED_RECORD, _NONE)
                if record is _NONE:
                    if not take(seq, at, content, records, direct):
                        got.read_records(plan, seq, at, content)
                    continue
            else:
                try:
                    record = content[PACKED_RECORD]
                except KeyError:
                    got.read_records(plan, seq, at, content)
                    continue
            if isinstance(record, ArrayRecord):  # the fast path: np.save's bytes of one row
                exact = direct and type(record) is ArrayRecord
                items = record.__dict__["_data"].items() if exact else record.items()
                if len(items) == 1:
                    ((key, array),) = items
                    if key == PACKED_KEY and isinstance(array, Array) and array.stype == numpy:
                        data = array.data
                        if (
                            array.dtype == "float64"
                            and type(data) is bytes
                            and len(data) == size
                            and data.startswith(head)
                            and tuple(array.shape) == shape
                        ):
                            npy_at(at)
                            npy(data)
                            continue
            blob = packed_blob(record, width)  # anything else: the general reader's verdict
            if isinstance(blob, str):
                got.reject(at, blob)
            else:
                got.blob_at.append(at)
                got.blobs.append(blob)
        except Exception as e:  # a hostile or broken reply is counted, never ends the run
            got.reject(at, f"unreadable reply ({type(e).__name__})")
    return got


def _packed_matrix(plan: RoundPlan, got: _Replies) -> npt.NDArray[np.float64]:
    """The packed rows, in the order ``got.npy_at + got.blob_at``."""
    fast = npy_rows(got.npy, _FLOAT64, plan.packed.width)
    if not got.blobs:
        return fast
    other, _ = read_packed(plan, got.blobs)  # their headers: packed_heads, with the others
    return np.concatenate([fast, other])


def _record_rows(
    m: MetricPlan, fast: npt.NDArray[Any], values: list[Any], order: npt.NDArray[np.intp] | None
) -> npt.NDArray[Any]:
    """One metric's three-record rows: the column's, then those read alone, put in ``order``."""
    if not values:
        return fast
    alone = np.asarray(values, dtype=np.float64).reshape(-1, 1) if m.scalar else np.stack(values)
    x = np.concatenate([fast, alone]) if len(fast) else alone
    return x if order is None else x[order]


def _rows(records: npt.NDArray[Any], packed: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """One metric's rows: the three-record replies' payloads, then the packed ones."""
    if not len(records):
        return packed
    return np.concatenate([records, packed]) if len(packed) else records

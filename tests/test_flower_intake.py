"""A round's replies are sorted in one pass and the packed ones decoded in one batch.

``dpledger.flower.intake`` keeps only the bytes of a packed reply whose ``.npy`` header
is byte for byte what ``np.save`` writes for the plan's row, decodes all of them with one
numpy call, and sends every other reply through the per-reply readers. Here every kind
of reply shares one round — np.save rows, agreeing headers from other writers (another
length), headers that lie (about the dtype, the shape, their own length, the data's
length), each malformed packed and three-record reply, an error, a duplicate, a reply
nobody asked for, a silent node — and each node's status and reason must be what the
per-reply reference (``packed_blob``, ``read_packed``, ``read_reply``, the aggregator's
check) says, and each accepted row what ``Array.numpy()`` of its own reply decodes, in
its node's region. A row read at a wrong offset, in another region, or a lying header
taken for np.save's would show. The same for three-record replies, read as columns:
``test_flower_intake_records.py``.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")  # read when flwr is imported

import numpy as np
import pytest

pytest.importorskip(
    "flwr", reason="the flower extra is not installed (pip install dpledger[flower])"
)

from flwr.app import Array, ArrayRecord, ConfigRecord, Error, Message, RecordDict
from flwr.common.constant import SType
from flwr.serverapp.strategy import FedAvg
from test_flower import METRICS, PARAMS, exact
from test_flower import _break as break_records
from test_flower_npy import lying
from test_flower_packed import BROKEN
from test_flower_packed import _break as break_packed

from dpledger import Ledger
from dpledger.flower import (
    LedgerEvaluation,
    NodeStatus,
    PlainSum,
    StaticRegistry,
    contributions,
    layout,
)
from dpledger.flower.intake import _read_all, sort_replies
from dpledger.flower.npy import npy_header, npy_rows
from dpledger.flower.report import STATUSES, NodeStatuses, tally_health
from dpledger.flower.testing import LocalGrid
from dpledger.flower.wire import PACKED_KEY, PACKED_RECORD, packed_blob, read_packed, read_reply

F8 = np.dtype("<f8")
RECORD_BREAKS = ["no records", "another round", "a missing scalar", "NaN loss",
                 "a short vector", "a negative count"]  # fmt: skip


def _data(k: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Client k's samples: every client's contribution differs, so a misplaced row shows."""
    data = {"loss": [0.05 * k, 1.0 + 0.01 * k], "along": [0.2, 3.0 + k], "across": [0.1, -1.0],
            "y_true": [k % 3, 2], "y_pred": [0, (k + 1) % 3]}  # fmt: skip
    reg = {"regression": {"y_true": [100.0 - k, 90.0], "y_pred": [95.0, 91.0 + k]}}
    return data, reg


def _npy(row: np.ndarray, header: bytes) -> Array:
    """``row`` declared float64 of its own shape, its bytes behind ``header``."""
    return Array(dtype="float64", shape=tuple(row.shape), stype=SType.NUMPY,
                 data=header + row.astype(F8).tobytes())  # fmt: skip


def _padded_header(n: int, total: int) -> bytes:
    """An agreeing version-1.0 ``.npy`` header of ``total`` bytes (np.save writes 128)."""
    body = f"{{'descr': '<f8', 'fortran_order': False, 'shape': ({n},), }}".encode()
    body = body.ljust(total - 10 - 1) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body


def _plan_spans(width: int) -> Any:
    from test_flower import _plan

    plan = _plan()
    assert plan.packed.width == width
    return plan.packed.spans


def _packed_variant(how: str, row: np.ndarray) -> RecordDict:
    """The new path's own cases: headers that agree in another length, or that lie."""
    width = len(row)
    head = npy_header(F8, width)
    if how == "a version 2.0 header":
        array = lying(row, version=(2, 0))
    elif how == "a 192-byte agreeing header":
        array = _npy(row, _padded_header(width, 192))
    elif how == "np.save's header, 8 bytes more":
        array = Array(dtype="float64", shape=(width,), stype=SType.NUMPY,
                      data=head + row.tobytes() + b"\0" * 8)  # fmt: skip
    elif how == "np.save's header, 8 bytes short":
        array = Array(dtype="float64", shape=(width,), stype=SType.NUMPY,
                      data=head + row.tobytes()[:-8])  # fmt: skip
    elif how == "a header claiming one number more":
        array = Array(dtype="float64", shape=(width,), stype=SType.NUMPY,
                      data=npy_header(F8, width + 1) + row.tobytes() + b"\0" * 8)  # fmt: skip
    elif how == "a header whose length field lies":
        short = bytearray(head)
        short[8:10] = (int.from_bytes(head[8:10], "little") - 16).to_bytes(2, "little")
        array = _npy(row, bytes(short))
    elif how == "an int64 header":
        array = lying(row, "<i8")
    elif how in ("another round and a NaN loss", "a loss above its clip and a negative count"):
        row, spans = row.copy(), _plan_spans(width)
        if how.startswith("another round"):
            row[1], row[spans["loss"][0]] = 2, np.nan
        else:
            row[spans["loss"][0]], row[spans["confusion"][0]] = 99.0, -1.0
        array = Array(row)
    else:
        raise AssertionError(how)
    return RecordDict({PACKED_RECORD: ArrayRecord({PACKED_KEY: array})})


VARIANTS = ["a version 2.0 header", "a 192-byte agreeing header",
            "np.save's header, 8 bytes more", "np.save's header, 8 bytes short",
            "a header claiming one number more", "a header whose length field lies",
            "an int64 header", "another round and a NaN loss",
            "a loss above its clip and a negative count"]  # fmt: skip


def _expected(plan: Any, content: RecordDict) -> tuple[str, str, dict[str, np.ndarray]]:
    """The per-reply reference: (status, reason, accepted rows per metric)."""
    if PACKED_RECORD in content:
        blob = packed_blob(content[PACKED_RECORD], plan.packed.width)
        if isinstance(blob, str):
            return "rejected", blob, {}
        matrix, heads = read_packed(plan, [blob])
        if heads[0] is not None:
            return "rejected", heads[0], {}
        row = content[PACKED_RECORD][PACKED_KEY].numpy().astype(F8)  # Flower's own decoder
        assert np.array_equal(matrix[0], row, equal_nan=True)
        rows = {n: row[a:b].reshape(1, -1) for n, (a, b) in plan.packed.spans.items()}
    else:
        got, why = read_reply(plan, content)
        if why is not None:
            return "rejected", why, {}
        rows = {n: np.asarray(v, dtype=F8).reshape(1, -1) for n, v in got.items()}
    for name, m in plan.metrics.items():
        reason = PlainSum().check(m, rows[name])[0]
        if reason is not None:
            return "rejected", reason, {}
    return "reported", "", rows


@pytest.fixture(autouse=True, params=["direct reads", "public accessors"])
def flwr_reads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here twice: reading flwr 1.42's storage directly, and through its public
    accessors only (what another flwr gets); both must sort every reply alike."""
    assert layout.KNOWN, "the tests pin flwr 1.42.*, whose layout dpledger reads directly"
    if request.param == "public accessors":
        monkeypatch.setattr(layout, "KNOWN", False)
    return str(request.param)


@pytest.fixture
def round1() -> Iterator[tuple[LedgerEvaluation, list[Message], LocalGrid, int]]:
    """A strategy after configure_evaluate(1): its instructions, and one node it skipped."""
    n = 64
    grid = LocalGrid(lambda m, c: m, n)
    grid.activate()
    regions = {node: ("north", "south")[i % 2] for i, node in enumerate(grid.node_ids)}
    outsider = grid.node_ids[-1]
    del regions[outsider]  # no region: not asked to evaluate
    with Ledger.open(":memory:", exact(), mode="create") as ledger:
        s = LedgerEvaluation(
            FedAvg(fraction_train=0.0, min_available_nodes=n, min_evaluate_nodes=n), ledger,
            metrics=METRICS, params=PARAMS, registry=StaticRegistry(regions),
        )  # fmt: skip
        asked = list(s.configure_evaluate(1, ArrayRecord(), ConfigRecord(), grid))
        try:
            yield s, asked, grid, outsider
        finally:
            grid.deactivate()


def test_a_mixed_round_sorts_each_reply_as_the_per_reply_reference_does(
    round1: tuple[LedgerEvaluation, list[Message], LocalGrid, int],
) -> None:
    s, asked, _, outsider = round1
    planned = s._pending[1]
    plan, selected = planned.plan, planned.selected
    kinds = (["packed"] * 12 + ["records"] * 6 + [f"packed:{b}" for b in BROKEN]
             + [f"records:{b}" for b in RECORD_BREAKS] + [f"npy:{v}" for v in VARIANTS]
             + ["error", "silent"])  # fmt: skip
    assert len(kinds) <= len(asked)
    replies: list[Message] = []
    expected: dict[int, tuple[str, str, dict[str, np.ndarray]]] = {}
    for k, (msg, kind) in enumerate(zip(asked, kinds, strict=False)):
        node = msg.metadata.dst_node_id
        data, reg = _data(k)
        packed = contributions(plan, data, data_for=reg, packed=True)
        row = packed[PACKED_RECORD][PACKED_KEY].numpy()
        if kind == "silent":
            expected[node] = ("dropped", "no reply before the timeout", {})
            continue
        if kind == "error":
            replies.append(Message(Error(code=7, reason="out of memory"), reply_to=msg))
            expected[node] = ("failed", "error 7: out of memory", {})
            continue
        if kind == "packed":
            content = packed
        elif kind == "records":
            content = contributions(plan, data, data_for=reg)
        elif kind.startswith("packed:"):
            content = break_packed(kind.split(":", 1)[1], plan)
        elif kind.startswith("records:"):
            content = break_records(kind.split(":", 1)[1], contributions(plan, data, data_for=reg))
        else:
            content = _packed_variant(kind.split(":", 1)[1], row)
        replies.append(Message(content, reply_to=msg))
        expected[node] = _expected(plan, content)
    for msg in asked[len(kinds) :]:  # the remaining nodes: np.save rows
        data, reg = _data(len(expected))
        content = contributions(plan, data, data_for=reg, packed=True)
        replies.append(Message(content, reply_to=msg))
        expected[msg.metadata.dst_node_id] = _expected(plan, content)
    replies.insert(5, Message(_packed_variant("an int64 header", row), reply_to=asked[0]))
    stranger = Message(RecordDict(), dst_node_id=outsider, message_type="evaluate")
    replies.insert(9, Message(packed, reply_to=stranger))
    statuses = {e[0] for e in expected.values()}
    assert statuses == {"reported", "rejected", "failed", "dropped"}
    assert [expected[asked[len(kinds) - 2 - len(VARIANTS) + i].metadata.dst_node_id][0]
            for i in range(2)] == ["reported", "reported"]  # fmt: skip  # other writers

    index = {node: i for i, node in enumerate(selected)}
    paths = _read_all(plan, index, replies)  # the round mixes all three readers
    assert len(paths.npy) > 12
    assert len(paths.blobs) == 2  # the two agreeing other writers
    assert len(paths.columns.kept) == 9  # the 6, "a negative count" (the bounds check's),
    assert len(paths.records) == 0  # and "NaN loss" and "a short vector" (decode's misfits)

    got = sort_replies(plan, selected, replies, PlainSum())

    assert got.unexpected == 2  # asked[0]'s second reply, and the stranger's
    assert [n.node_id for n in got.nodes] == list(selected)
    for n in got.nodes:
        status, reason, _ = expected[n.node_id]
        assert (n.status, n.reason) == (status, reason), n
        assert n.region == selected[n.node_id]
    for region in ("north", "south"):
        mine = [e[2] for node, e in expected.items() if e[0] == "reported"
                and selected[node] == region]  # fmt: skip
        for name in plan.metrics:
            want = np.concatenate([r[name] for r in mine])
            have = got.accepted[region][name]
            assert have.shape == want.shape, (region, name)
            order = lambda x: x[np.lexsort(x.T[::-1])]  # noqa: E731
            assert np.array_equal(order(have), order(want)), (region, name)
    assert got.health == tally_health(selected, list(got.nodes))


def test_the_round_through_the_strategy_reports_the_same_statuses(
    round1: tuple[LedgerEvaluation, list[Message], LocalGrid, int],
) -> None:
    s, asked, _, _ = round1
    plan = s._pending[1].plan
    replies = []
    for k, msg in enumerate(asked):
        data, reg = _data(k)
        row = contributions(plan, data, data_for=reg, packed=True)[PACKED_RECORD][PACKED_KEY]
        how = VARIANTS[k % len(VARIANTS)] if k % 3 == 0 else None
        content = (_packed_variant(how, row.numpy()) if how else
                   RecordDict({PACKED_RECORD: ArrayRecord({PACKED_KEY: row})}))  # fmt: skip
        replies.append(Message(content, reply_to=msg))
    record = s.aggregate_evaluate(1, replies)
    report = s.rounds[1]
    assert record is not None
    rejected = sum(1 for n in report.nodes if n.status == "rejected")
    assert rejected == sum(1 for k in range(len(asked)) if k % 3 == 0
                           and VARIANTS[k % len(VARIANTS)] not in VARIANTS[:2])  # fmt: skip
    assert sum(h.rejected for h in report.health.values()) == rejected
    assert record["released"] == len(report.releases) == 8


def test_npy_rows_decodes_many_rows_and_refuses_a_string_it_cannot_place() -> None:
    rows = np.arange(12.0).reshape(3, 4) + 0.5
    saved = []
    for r in rows:
        out = io.BytesIO()
        np.save(out, r)
        saved.append(out.getvalue())
    assert np.array_equal(npy_rows(saved, F8, 4), rows)
    assert npy_rows([], F8, 4).shape == (0, 4)
    with pytest.raises(ValueError, match="bytes"):
        npy_rows([*saved[:2], saved[2] + b"\0" * 8], F8, 4)
    lies = saved[2].replace(b"(4,)", b"(5,)")  # the same length, another header
    assert len(lies) == len(saved[2])
    assert lies != saved[2]
    with pytest.raises(ValueError, match="header"):
        npy_rows([*saved[:2], lies], F8, 4)


def test_node_statuses_read_like_a_tuple_of_node_status() -> None:
    ids = [11, 12, 13, 14, 15]
    codes = bytes([STATUSES.index(s) for s in ("reported", "failed", "dropped", "rejected",
                                                 "reported")])  # fmt: skip
    where = np.array([0, 1, 0, 1, 1])
    nodes = NodeStatuses(ids, ("south", "north"), where, codes, {1: "error 2: x", 3: "NaN"})
    want = (
        NodeStatus(11, "south", "reported"),
        NodeStatus(12, "north", "failed", "error 2: x"),
        NodeStatus(13, "south", "dropped", "no reply before the timeout"),
        NodeStatus(14, "north", "rejected", "NaN"),
        NodeStatus(15, "north", "reported"),
    )
    assert tuple(nodes) == want
    assert nodes == want
    assert len(nodes) == 5
    assert nodes[-1] == want[-1]
    assert nodes[1:3] == want[1:3]
    with pytest.raises(IndexError):
        nodes[5]
    selected = {n.node_id: n.region for n in want}
    assert nodes.health() == tally_health(selected, list(want))
    assert list(nodes.health()) == ["south", "north"]
    with pytest.raises(ValueError, match="status code"):
        NodeStatuses(ids, ("south",), where * 0, bytes([4] * 5), {})
    assert nodes + want[:1] == (*want, want[0])  # concatenation gives a tuple, as before
    assert want[:1] + nodes == (want[0], *want)
    assert isinstance(nodes + (), tuple)  # noqa: RUF005 (the operator is what is tested)
    for bad in (where * 0 - 1, where + 1):  # a region index outside regions
        with pytest.raises(ValueError, match="region index"):
            NodeStatuses(ids, ("south", "north"), bad, codes, {})


FAULTS = [None, np.nan, np.inf, -np.inf, "over", "under", "negative"]


@pytest.mark.parametrize("fault", FAULTS)
def test_the_one_pass_bounds_check_agrees_with_the_full_check(
    fault: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``PlainSum.check`` answers "all within" in one pass; it must never say so when the
    row-by-row check would give a reason (a NaN or inf, a bound, a sign)."""
    from test_flower import _plan

    from dpledger.flower import aggregation

    plan = _plan()
    rng = np.random.default_rng(7)
    for name, m in plan.metrics.items():
        b = m.bounds
        if m.scalar:
            x = rng.uniform(float(b.low), float(b.high), (50, 1))
        else:
            x = rng.uniform(0.0 if m.nonnegative else -1.0, 1.0, (50, m.size))
            x *= float(b.cap) / np.abs(x).sum(axis=1, keepdims=True)  # on the cap itself
        if fault == "over":
            x[17, 0] = float(b.high) * 1.01 if m.scalar else x[17, 0] + np.sign(x[17, 0]) * 0.1
        elif fault == "under":
            x[17, 0] = float(b.low) - 0.1 if m.scalar else x[17, 0]  # no lower bound
        elif fault == "negative":
            x[17, 0] = -1e-9
        elif fault is not None:
            x[17, -1] = fault
        fast = PlainSum().check(m, x)
        monkeypatch.setattr(aggregation, "_all_within", lambda *a: False)
        full = PlainSum().check(m, x)
        monkeypatch.undo()
        assert fast == full, (name, fault)
        harmless = (
            fault is None
            or (fault == "under" and not m.scalar)  # a vector has no lower bound to break
            or (fault == "negative" and not m.scalar and not m.nonnegative)
        )
        assert (full[17] is None) == harmless, (name, fault, full[17])  # a real fault

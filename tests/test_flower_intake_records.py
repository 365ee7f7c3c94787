"""Three-record replies read as columns sort exactly as the per-reply reader sorts them.

``dpledger.flower.columns`` keeps a three-record reply in the expected form (exact record
types, the plan's versions, finite float scalars, float64 ``Array``s with np.save's
bytes) and decodes each metric for the round at once; every other reply goes through
``read_reply``. Here one round mixes good three-record replies with every hostile kind —
wrong dtype, shape and stype strings, headers that lie, byte lengths off, NaN, inf, a
bound broken, negative zero, missing and extra keys, wrong versions, types that only
look right — and with packed replies, errors, a duplicate, a stranger and silent nodes.
Each node's status and reason must be what the per-reply reference says, and the whole
sort (statuses, reasons, health, each region's rows byte for byte and in order, the
exact sums) what the same code gives with the column path switched off (every reply
read alone, as before the column path existed).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from typing import Any, NamedTuple

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")  # read when flwr is imported

import numpy as np
import pytest

pytest.importorskip(
    "flwr", reason="the flower extra is not installed (pip install dpledger[flower])"
)

from flwr.app import (
    Array,
    ArrayRecord,
    ConfigRecord,
    Error,
    Message,
    MetricRecord,
    RecordDict,
)
from flwr.common.constant import SType
from flwr.serverapp.strategy import FedAvg
from test_flower import METRICS, PARAMS, POLICY
from test_flower_intake import _data, _expected
from test_flower_intake import flwr_reads as flwr_reads  # autouse: every test both ways
from test_flower_npy import lying

from dpledger import Ledger, Policy, Release
from dpledger.flower import (
    LedgerEvaluation,
    NotReleased,
    PlainSum,
    StaticRegistry,
    contributions,
)
from dpledger.flower.columns import RecordColumns
from dpledger.flower.intake import Intake, _read_all, sort_replies
from dpledger.flower.npy import npy_header
from dpledger.flower.report import short_reason, tally_health
from dpledger.flower.testing import LocalGrid
from dpledger.flower.wire import read_reply

F8 = np.dtype("<f8")
RATIO = """
[metrics.ratio]
kind = "scalar_mean"
epsilon = "{eps}"
clip = {{ low = "0", high = "10", source = "test" }}
"""
S, V, M = "dpledger.scalars", "dpledger.vectors", "dpledger.meta"


class Chameleon(str):
    """A string equal to everything and different from nothing."""

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False


class SubArray(Array):
    """An Array subclass: ``read_reply`` reads it (isinstance), the columns do not."""


def _saved(row: np.ndarray, dtype: Any = "float64", shape: Any = None, stype: str = SType.NUMPY,
           data: Any = None) -> Array:  # fmt: skip
    """An Array of ``row``'s np.save bytes, whose declared fields (or data) can lie."""
    good = Array(np.ascontiguousarray(row))
    return Array(dtype=dtype, shape=tuple(row.shape) if shape is None else shape, stype=stype,
                 data=good.data if data is None else data)  # fmt: skip


def _hostile(how: str, c: RecordDict) -> RecordDict:
    """A three-record reply ``c`` broken (or only made unusual) in one way."""
    vec = {k: c[V][k].numpy() for k in c[V]}
    conf, reg, errs = vec["confusion"], vec["regression"], vec["errors"]
    if how == "float32 vector":
        c[V]["regression"] = Array(reg.astype(np.float32))
    elif how == "dtype string '<f8'":
        c[V]["regression"] = _saved(reg, dtype="<f8")
    elif how == "int64 counts":
        c[V]["confusion"] = Array(conf.astype(np.int64))
    elif how == "float64 declared, int64 header":
        c[V]["regression"] = lying(reg, "<i8")
    elif how == "a 2-D vector":
        c[V]["confusion"] = Array(conf.reshape(3, 3))
    elif how == "one number more":
        c[V]["errors"] = Array(np.append(errs, 0.0))
    elif how == "shape declared one more":
        c[V]["errors"] = _saved(errs, shape=(len(errs) + 1,))
    elif how == "shape as a list":
        c[V]["errors"].shape = [len(errs)]  # type: ignore[assignment]
    elif how == "another stype":
        c[V]["errors"] = _saved(errs, stype="torch.Tensor")
    elif how in ("8 bytes more", "8 bytes short"):
        data = c[V]["errors"].data
        c[V]["errors"] = _saved(errs, data=data + bytes(8) if "more" in how else data[:-8])
    elif how == "a header claiming one number more":
        c[V]["errors"] = _saved(errs, data=npy_header(F8, len(errs) + 1) + errs.tobytes()
                                + bytes(8))  # fmt: skip
    elif how == "a version 2.0 header":
        c[V]["regression"] = lying(reg, version=(2, 0))
    elif how == "data as a bytearray":
        c[V]["regression"].data = bytearray(c[V]["regression"].data)  # type: ignore[assignment]
    elif how == "a dtype equal to everything":
        c[V]["regression"] = _saved(reg, dtype=Chameleon("int64"))
    elif how == "an Array subclass":
        c[V]["regression"] = SubArray(dtype="float64", shape=reg.shape, stype=SType.NUMPY,
                                      data=c[V]["regression"].data)  # fmt: skip
    elif how == "an Array without data":
        del c[V]["regression"].__dict__["data"]
    elif how == "NaN loss":
        c[S]["loss"] = float("nan")
    elif how == "inf ratio":
        c[S]["ratio"] = float("inf")
    elif how == "-inf loss":
        c[S]["loss"] = -float("inf")
    elif how == "a loss above its clip":
        c[S]["loss"] = 3.5
    elif how == "negative zeros":
        c[S]["loss"] = -0.0
        c[V]["regression"] = Array(np.where(reg == 0, -0.0, reg) * np.r_[0.0, 1, 1, 1, 1])
    elif how == "NaN in a vector":
        c[V]["errors"] = Array(np.r_[np.nan, errs[1:]])
    elif how == "an L1 norm above the cap":
        c[V]["confusion"] = Array(np.full(9, 20.0))
    elif how == "a negative count":
        c[V]["confusion"] = Array(np.r_[-1.0, conf[1:]])
    elif how == "NaN ratio and an L1 norm above the cap":
        c[S]["ratio"] = float("nan")
        c[V]["confusion"] = Array(np.full(9, 20.0))
    elif how == "an int loss":
        c[S]["loss"] = 1
    elif how == "a list loss":
        c[S]["loss"] = [0.5]
    elif how == "a missing scalar":
        del c[S]["ratio"]
    elif how == "a missing vector":
        del c[V]["regression"]
    elif how == "a missing edges version":
        del c[M]["edges-version.errors"]
    elif how == "no meta record":
        del c[M]
    elif how == "extra keys and records":
        c[S]["mine"], c[V]["mine"], c[M]["mine"] = 1.0, Array(np.zeros(2)), "x"
        c["app.own"] = MetricRecord({"num-examples": 12})
    elif how == "another edges version":
        c[M]["edges-version.errors"] = "abs-error-m/v0"
    elif how == "another policy version":
        c[M]["policy-version"] = "0"
    elif how == "round 1.0":
        c[M]["round"] = 1.0
    elif how == "another round":
        c[M]["round"] = 2
    elif how == "another schema":
        c[M]["schema"] = "dpledger-flower/0"
    elif how == "scalars in a ConfigRecord":
        c[S] = ConfigRecord(dict(c[S]))  # type: ignore[arg-type]
    elif how == "a packed record too":
        return c  # replaced by the caller
    else:
        raise AssertionError(how)
    return c


HOSTILE = ["float32 vector", "dtype string '<f8'", "int64 counts",
           "float64 declared, int64 header", "a 2-D vector", "one number more",
           "shape declared one more", "shape as a list", "another stype", "8 bytes more",
           "8 bytes short", "a header claiming one number more", "a version 2.0 header",
           "data as a bytearray", "a dtype equal to everything", "an Array subclass",
           "an Array without data", "NaN loss", "inf ratio", "-inf loss",
           "a loss above its clip", "negative zeros", "NaN in a vector",
           "an L1 norm above the cap", "a negative count",
           "NaN ratio and an L1 norm above the cap", "an int loss", "a list loss",
           "a missing scalar", "a missing vector", "a missing edges version",
           "no meta record", "extra keys and records", "another edges version",
           "another policy version", "round 1.0", "another round", "another schema",
           "scalars in a ConfigRecord"]  # fmt: skip


def _reference(plan: Any, content: RecordDict) -> tuple[str, str, dict[str, np.ndarray]]:
    """The per-reply reference for a three-record reply: ``read_reply`` (an exception is
    an unreadable reply), then the aggregator's check, metric by metric."""
    try:
        got, why = read_reply(plan, content)
    except Exception as e:
        return "rejected", f"unreadable reply ({type(e).__name__})", {}
    if why is not None:
        return "rejected", short_reason(why), {}
    rows = {n: np.asarray(v, dtype=F8).reshape(1, -1) for n, v in got.items()}
    for name, m in plan.metrics.items():
        reason = PlainSum().check(m, rows[name])[0]
        if reason is not None:
            return "rejected", short_reason(reason), {}
    return "reported", "", rows


class Round(NamedTuple):
    """A round of replies of every kind, and what the per-reply reference says of each."""

    plan: Any
    selected: dict[int, str]
    replies: list[Message]
    expected: dict[int, tuple[str, str, dict[str, np.ndarray]]]  # node: status, reason, rows
    kinds: dict[int, str]  # node: the kind of its (first) reply
    waiting: Any  # aggregator -> a strategy on a fresh ledger, waiting for these replies


@pytest.fixture
def hostile_round() -> Iterator[Round]:
    """A plan with two scalar metrics and a round of replies of every kind: the plan, the
    selection, the replies, per node the reference (status, reason, rows), and a maker of
    strategies (on fresh ledgers) waiting for this round's replies."""
    n = 120
    text = POLICY.format(neighbouring="replace", eps="1000000", epoch="100000000",
                         extra=RATIO.format(eps="1000000"))  # fmt: skip
    grid = LocalGrid(lambda m, c: m, n)
    grid.activate()
    regions = {node: ("north", "south")[i % 2] for i, node in enumerate(grid.node_ids)}
    outsider = grid.node_ids[-1]
    del regions[outsider]

    def make(aggregator: PlainSum) -> LedgerEvaluation:
        ledger = Ledger.open(":memory:", Policy.from_toml(text, source="t"), mode="create")
        return LedgerEvaluation(
            FedAvg(fraction_train=0.0, min_available_nodes=n, min_evaluate_nodes=n), ledger,
            metrics={**METRICS, "ratio": "along_across_ratio"}, params=PARAMS,
            registry=StaticRegistry(regions), aggregator=aggregator,
        )  # fmt: skip

    s = make(PlainSum())
    asked = list(s.configure_evaluate(1, ArrayRecord(), ConfigRecord(), grid))

    def waiting(aggregator: PlainSum) -> LedgerEvaluation:
        other = make(aggregator)
        other._pending[1] = s._pending[1]
        return other

    try:
        plan, selected = s._pending[1].plan, s._pending[1].selected
        assert [m.scalar for m in plan.metrics.values()].count(True) == 2
        replies, expected, kinds = _replies(plan, asked)
        data, reg = _data(999)  # a node's second reply, and a stranger's
        replies.insert(30, Message(contributions(plan, data, data_for=reg), reply_to=asked[3]))
        stranger = Message(RecordDict(), dst_node_id=outsider, message_type="evaluate")
        replies.insert(7, Message(contributions(plan, data, data_for=reg), reply_to=stranger))
        yield Round(plan, selected, replies, expected, kinds, waiting)
    finally:
        grid.deactivate()


def _replies(
    plan: Any, asked: list[Message]
) -> tuple[list[Message], dict[int, Any], dict[int, str]]:
    """Good three-record replies, every hostile kind, packed ones, an error, silent nodes;
    and per node the per-reply reference's (status, reason, rows)."""
    kinds = (["records"] * 20 + HOSTILE + ["packed"] * 10
             + ["a packed record too", "error", "silent", "silent"])  # fmt: skip
    replies, expected, kind_of = [], {}, {}
    for k, msg in enumerate(asked):
        node, kind = msg.metadata.dst_node_id, kinds[k] if k < len(kinds) else "records"
        kind_of[node] = kind
        data, reg = _data(k)
        content = contributions(plan, data, data_for=reg, packed=kind == "packed")
        if kind == "silent":
            expected[node] = ("dropped", "no reply before the timeout", {})
            continue
        if kind == "error":
            replies.append(Message(Error(code=3, reason="disk full"), reply_to=msg))
            expected[node] = ("failed", "error 3: disk full", {})
            continue
        if kind == "a packed record too":  # the packed record is read, not the three
            content["dpledger.packed"] = contributions(plan, data, data_for=reg,
                                                       packed=True)["dpledger.packed"]  # fmt: skip
            content[S]["loss"] = float("nan")
            expected[node] = _expected(plan, content)
        elif kind == "packed":
            expected[node] = _expected(plan, content)
        else:
            content = _hostile(kind, content) if kind != "records" else content
            expected[node] = _reference(plan, content)
        replies.append(Message(content, reply_to=msg))
    return replies, expected, kind_of


def _sorted_alone(
    plan: Any, selected: dict[int, str], replies: list[Message], monkeypatch: pytest.MonkeyPatch
) -> Intake:
    """The same sort with the column path off: every three-record reply read alone."""
    with monkeypatch.context() as m:
        m.setattr(RecordColumns, "take", lambda *a: False)
        return sort_replies(plan, selected, replies, PlainSum())


def test_every_hostile_three_record_reply_sorts_as_the_per_reply_reference(
    hostile_round: Round,
) -> None:
    plan, selected, replies, expected = hostile_round[:4]
    got = sort_replies(plan, selected, replies, PlainSum())
    assert got.unexpected == 2
    statuses = {(n.status, n.reason) for n in got.nodes}
    assert {s for s, _ in statuses} == {"reported", "rejected", "failed", "dropped"}
    for n in got.nodes:
        status, reason, _ = expected[n.node_id]
        assert (n.status, n.reason) == (status, reason), n
    assert got.health == tally_health(selected, list(got.nodes))
    assert sum(e[0] == "reported" for e in expected.values()) > 70
    for region in ("north", "south"):  # each region's exact sums: the reference's
        mine = [e[2] for node, e in expected.items() if e[0] == "reported"
                and selected[node] == region]  # fmt: skip
        for name, m in plan.metrics.items():
            want = np.concatenate([r[name] for r in mine])
            have = got.accepted[region][name]
            assert have.shape == want.shape, (region, name)
            total = PlainSum().total(m, have)
            assert total.tobytes() == PlainSum().total(m, want).tobytes(), (region, name)


def test_the_column_path_changes_nothing_the_per_reply_path_gives(
    hostile_round: Round,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan, selected, replies = hostile_round[:3]
    fast = sort_replies(plan, selected, replies, PlainSum())
    alone = _sorted_alone(plan, selected, replies, monkeypatch)
    assert tuple(fast.nodes) == tuple(alone.nodes)
    assert fast.health == alone.health
    assert fast.unexpected == alone.unexpected
    assert list(fast.accepted) == list(alone.accepted)
    for region, metrics in alone.accepted.items():
        for name, want in metrics.items():
            have = fast.accepted[region][name]  # byte for byte (-0.0), in the same order
            assert have.shape == want.shape, (region, name)
            assert have.astype(F8).tobytes() == want.astype(F8).tobytes(), (region, name)


USUAL = ("records", "negative zeros", "extra keys and records", "round 1.0",
         "a loss above its clip", "NaN in a vector", "an L1 norm above the cap",
         "a negative count")  # fmt: skip
"""Kinds of three-record reply in the expected form: decoded as columns, no misfit."""


def _first_replies(r: Round, kinds: tuple[str, ...]) -> list[Message]:
    """Each node's first reply (not the duplicate, not the stranger's) of these kinds."""
    first: dict[int, Message] = {}
    for m in r.replies:
        first.setdefault(m.metadata.src_node_id, m)
    return [m for node, m in first.items() if r.kinds.get(node) in kinds]


def test_replies_in_the_expected_form_are_read_as_columns_in_arrival_order(
    hostile_round: Round,
) -> None:
    r = hostile_round
    good = _first_replies(r, USUAL)[::-1]  # arrival order is not selection order
    index = {node: i for i, node in enumerate(r.selected)}
    columns = _read_all(r.plan, index, good).columns
    (at, _, _), misfits = columns.decode()
    assert misfits == []
    assert len(at) == len(good) > 25  # every one decoded in the columns
    got = sort_replies(r.plan, r.selected, good, PlainSum())
    for region in ("north", "south"):
        nodes = [m.metadata.src_node_id for m in good if r.selected[m.metadata.src_node_id]
                 == region and r.expected[m.metadata.src_node_id][0] == "reported"]  # fmt: skip
        assert len(nodes) > 10
        for name in r.plan.metrics:
            want = np.concatenate([r.expected[node][2][name] for node in nodes])
            assert got.accepted[region][name].astype(F8).tobytes() == want.tobytes()


def test_each_hostile_reply_among_good_ones_sorts_as_read_alone(
    hostile_round: Round, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One hostile reply in a round of usual ones: its column's bulk checks are the ones
    that must refuse it (in the big round, the per-row checks do)."""
    r = hostile_round
    good = _first_replies(r, ("records",))
    for kind in HOSTILE:
        (bad,) = _first_replies(r, (kind,))
        replies = [*good[:6], bad, *good[6:]]
        fast = sort_replies(r.plan, r.selected, replies, PlainSum())
        alone = _sorted_alone(r.plan, r.selected, replies, monkeypatch)
        assert tuple(fast.nodes) == tuple(alone.nodes), kind
        status, reason, _ = r.expected[bad.metadata.src_node_id]
        assert (status, reason) in {(n.status, n.reason) for n in fast.nodes}, kind
        for region, metrics in alone.accepted.items():
            for name, want in metrics.items():
                have = fast.accepted[region][name].astype(F8)
                assert have.tobytes() == want.astype(F8).tobytes(), (kind, region, name)


def test_a_strategy_round_of_hostile_replies_releases_the_per_reply_sums(
    hostile_round: Round, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through ``aggregate_evaluate``, with the column path and without: the same exact
    sums handed to the ledger (a released value is its sum plus OpenDP's noise), the
    same statuses, health and releases in the round's report."""
    replies, waiting = hostile_round.replies, hostile_round.waiting
    runs = []
    for column_path in (True, False):
        totals: list[tuple[str, bytes]] = []

        class Recording(PlainSum):
            def total(self, metric: Any, rows: Any, into: Any = totals) -> Any:
                out = super().total(metric, rows)
                into.append((metric.metric, out.tobytes()))
                return out

        with monkeypatch.context() as m:
            if not column_path:
                m.setattr(RecordColumns, "take", lambda *a: False)
            s = waiting(Recording())
            record = s.aggregate_evaluate(1, replies)
        report = s.rounds[1]
        assert record is not None
        keys = sorted(k for k in record if not k.endswith("ci95"))
        health = [(k, record[k]) for k in keys if "/health/" in k]
        runs.append((tuple(report.nodes), report.health, totals, len(report.releases), health))
    assert runs[0] == runs[1]
    assert len(runs[0][2]) == 2 * 5


@pytest.mark.parametrize(("dtype", "size"), [("<f8", 7), ("<f4", 3), ("<i2", 5), ("<f8", 0)])
def test_npy_column_decodes_np_saves_bytes_and_flags_every_other_string(
    dtype: str, size: int
) -> None:
    from dpledger.flower.npy import npy_column

    dt = np.dtype(dtype)
    rows = (np.arange(6 * size).reshape(6, size) - 3).astype(dt)
    saved = [_saved(r, dtype=str(dt)).data for r in rows]
    lies = saved[1].replace(f"({size},)".encode(), f"({size + 1},)".encode())
    assert len(lies) == len(saved[1])  # another shape, the same length
    assert lies != saved[1]
    strings: list[Any] = [saved[0], lies, saved[2] + b"\0", bytearray(saved[3]), None, saved[5]]
    x, ok = npy_column(strings, dt, size)
    assert ok.tolist() == [True, False, False, False, False, True]
    assert x.dtype == dt
    assert x.shape == (6, size)
    assert x[ok].tobytes() == rows[ok].tobytes()
    empty, none = npy_column([], dt, size)
    assert empty.shape == (0, size)
    assert none.shape == (0,)


@pytest.mark.parametrize("broken", ["raises", "nan", "negative"])
def test_an_aggregators_broken_sum_error_releases_nothing_of_that_metric_and_charges_nothing(
    hostile_round: Round, broken: str
) -> None:
    """Review s25: a third-party aggregator's sum_error was first asked after the round
    committed: one that raised lost the round's report with its ε spent. It is asked
    before the spend now; a bad one means that metric is not released."""

    class Broken(PlainSum):
        def sum_error(self, metric: Any, cohort: int) -> float:
            if metric.metric != "loss":
                return super().sum_error(metric, cohort)
            if broken == "raises":
                raise RuntimeError("boom")
            return math.nan if broken == "nan" else -1.0

    s = hostile_round.waiting(Broken())
    record = s.aggregate_evaluate(1, hostile_round.replies)
    assert record is not None
    report = s.rounds[1]
    for (region, name), outcome in report.outcomes.items():
        if name == "loss":
            assert isinstance(outcome, NotReleased), (region, outcome)
            assert "sum_error" in outcome.reason
        else:
            assert isinstance(outcome, Release), (region, name, outcome)
    assert not any(e.draft.metric == "loss" for e in s.ledger.entries())

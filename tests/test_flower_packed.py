"""The packed reply format: one float64 Array with a public layout header per client.

It must release exactly the sums the three-record format releases, mix with it in one
round, and reject every malformed packed reply with a reason, never ending the run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")  # read when flwr is imported

import numpy as np
import pytest

pytest.importorskip(
    "flwr", reason="the flower extra is not installed: pip install 'dpledger[flower]'"
)

from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from test_flower import (
    MALFORMED,
    N_NODES,
    RecordingLedger,
    _good,
    _plan,
    answer_region_queries,
    client_data,
    exact,
    regression_inputs,
    run,
)

from dpledger.flower import PlainSum, contribution_reply
from dpledger.flower.wire import (
    HEADER_SIZE,
    PACKED_KEY,
    PACKED_LAYOUT,
    PACKED_RECORD,
    packed_blob,
    read_packed,
    read_reply,
)
from dpledger.sim.fleet import Fleet, make_fleet


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return make_fleet(n_clients=N_NODES, regions=("north", "south"), n_classes=3,
                      scenarios=("label_skew",), seed=1)  # fmt: skip


def client(fleet: Fleet, which: str, *, broken: int | None = None) -> ClientApp:
    """Replies packed ("packed"), in three records ("records"), or by partition parity
    ("mixed"); partition ``broken`` sends a packed reply with a NaN loss."""
    app = ClientApp()
    answer_region_queries(app)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        pid = int(context.node_config["partition-id"])
        data = client_data(fleet, pid)
        packed = which == "packed" or (which == "mixed" and pid % 2 == 0) or pid == broken
        reply = contribution_reply(msg, data, data_for=regression_inputs(data), packed=packed)
        if pid == broken:
            row = reply.content[PACKED_RECORD][PACKED_KEY].numpy().copy()
            row[HEADER_SIZE:][0] = np.nan
            reply.content[PACKED_RECORD][PACKED_KEY] = Array(row)
        return reply

    return app


def sums(fleet: Fleet, tmp_path: Path, which: str, **kw: Any) -> tuple[dict[Any, Any], Any]:
    with RecordingLedger.open(tmp_path / f"{which}.db", exact(), mode="create") as ledger:
        strategy, _, _ = run(fleet, ledger, rounds=1, client=client(fleet, which, **kw),
                             offline=())  # fmt: skip
        items = ledger.items
    return {(q.region, q.metric, q.cohort): np.asarray(a) for q, a in items}, strategy


def test_packed_and_mixed_replies_release_exactly_the_three_record_sums(
    fleet: Fleet, tmp_path: Path
) -> None:
    records, _ = sums(fleet, tmp_path, "records")
    assert len(records) == 8  # 2 regions x 4 metrics
    for which in ("packed", "mixed"):
        got, strategy = sums(fleet, tmp_path, which)
        assert got.keys() == records.keys(), which
        for key, total in records.items():
            assert np.array_equal(got[key], total), (which, key)
        health = strategy.rounds[1].health
        assert sum(h.reported for h in health.values()) == N_NODES


def test_a_malformed_packed_reply_is_counted_as_rejected_and_the_round_goes_on(
    fleet: Fleet, tmp_path: Path
) -> None:
    _, strategy = sums(fleet, tmp_path, "packed", broken=MALFORMED)
    report = strategy.rounds[1]
    (bad,) = [n for n in report.nodes if n.status == "rejected"]
    assert "NaN or inf" in bad.reason
    assert sum(h.reported for h in report.health.values()) == N_NODES - 1
    assert len(report.releases) == 8


def _packed(plan: Any) -> RecordDict:
    from dpledger.flower import contributions

    data = {"loss": [0.5, 1.0], "along": [0.2, 3.0], "across": [0.1, -1.0],
            "y_true": [0, 2], "y_pred": [0, 1]}  # fmt: skip
    reg = {"regression": {"y_true": [100.0, 90.0], "y_pred": [95.0, 91.0]}}
    return contributions(plan, data, data_for=reg, packed=True)


def _row(plan: Any) -> np.ndarray:
    return np.asarray(_packed(plan)[PACKED_RECORD][PACKED_KEY].numpy(), dtype=np.float64)


def _break(how: str, plan: Any) -> RecordDict:
    row = _row(plan)
    spans = plan.packed.spans
    if how == "not an ArrayRecord":
        return RecordDict({PACKED_RECORD: MetricRecord({"x": 1.0})})
    if how == "a second array":
        return RecordDict({PACKED_RECORD: ArrayRecord({PACKED_KEY: Array(row),
                                                       "more": Array(row)})})  # fmt: skip
    if how == "one number short":
        row = row[:-1]
    elif how == "one number more":
        row = np.append(row, 0.0)
    elif how == "float32":
        return RecordDict({PACKED_RECORD: ArrayRecord({PACKED_KEY: Array(row.astype(np.float32))})})
    elif how == "int64":
        return RecordDict({PACKED_RECORD: ArrayRecord({PACKED_KEY: Array(row.astype(np.int64))})})
    elif how == "a 2-D array":
        row = row.reshape(1, -1)
    elif how == "layout version 2":
        row[0] = PACKED_LAYOUT + 1
    elif how == "another round":
        row[1] = 2
    elif how == "another digest":
        row[2] = row[2] - 1
    elif how == "a NaN header":
        row[2] = np.nan
    elif how == "NaN loss":
        row[spans["loss"][0]] = np.nan
    elif how == "inf in a vector":
        row[spans["confusion"][0]] = np.inf
    elif how == "a loss above its clip":
        row[spans["loss"][0]] = 99.0
    elif how == "a negative count":
        row[spans["confusion"][0]] = -1.0
    elif how == "an L1 norm above the cap":
        a, b = spans["confusion"]
        row[a:b] = 20.0
    return RecordDict({PACKED_RECORD: ArrayRecord({PACKED_KEY: Array(row)})})


def _verdict(plan: Any, content: RecordDict) -> str | None:
    """What the server decides for one reply: the structure, then the round-wide header,
    finiteness and bounds checks (as ``LedgerEvaluation`` runs them)."""
    blob = packed_blob(content[PACKED_RECORD], plan.packed.width)
    if isinstance(blob, str):
        return blob
    matrix, heads = read_packed(plan, [blob])
    if heads[0] is not None:
        return heads[0]
    for name, m in plan.metrics.items():
        a, b = plan.packed.spans[name]
        why = PlainSum().check(m, matrix[:, a:b])[0]
        if why is not None:
            return why
    return None


BROKEN = ["not an ArrayRecord", "a second array", "one number short", "one number more",
          "float32", "int64", "a 2-D array", "layout version 2", "another round",
          "another digest", "a NaN header", "NaN loss", "inf in a vector",
          "a loss above its clip", "a negative count", "an L1 norm above the cap"]  # fmt: skip


@pytest.mark.parametrize("how", BROKEN)
def test_each_malformed_packed_reply_is_rejected_with_a_reason(how: str) -> None:
    plan = _plan()
    assert _verdict(plan, _packed(plan)) is None
    why = _verdict(plan, _break(how, plan))
    assert why, how


def test_the_packed_row_holds_the_three_record_payloads_in_name_order() -> None:
    plan = _plan()
    row = _row(plan)
    assert row[:HEADER_SIZE].tolist() == [PACKED_LAYOUT, 1, plan.packed.digest]
    old, why = read_reply(plan, _good(plan))
    assert why is None
    assert list(plan.packed.spans) == sorted(plan.metrics)
    for name, (a, b) in plan.packed.spans.items():
        assert np.array_equal(row[a:b], np.asarray(old[name], dtype=np.float64).reshape(-1))


def test_a_client_with_other_edges_sends_a_digest_the_server_rejects() -> None:
    plan = _plan()
    mine = {n: m.edges_version for n, m in plan.metrics.items()}
    assert plan.digest(mine) == plan.packed.digest
    assert plan.digest(mine | {"errors": "abs-error-m/v0"}) != plan.packed.digest
    assert 0 <= plan.packed.digest < 2**52  # exact in a float64

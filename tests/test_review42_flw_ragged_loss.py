"""Review 42 (flw): a client whose loss cannot be read as one array still reports.

``contributions`` checked a scalar metric for "no samples" with ``np.size`` before the
declaration read the data. A ragged list — per-batch losses whose last batch is shorter,
``[[...32 losses], [...9 losses]]`` — made ``np.size`` raise ``ValueError``, which is not a
``DpLedgerError``, so it escaped the substitute: the node's evaluate raised, Flower sent an
error reply and the wrapper counted it *failed*. Under ``replace`` that count is published
exactly (``REGION/health/failed``), uncharged, and whether a client's batches are ragged
depends on its data (its number of samples modulo the batch size): the same client with
even batches (a 2-D array, which the declaration refuses typed) was substituted and
counted *reported*. docs/flower.md: data a metric cannot be computed from "is no reason
to fail — that metric gets a public substitute". Now the emptiness test never raises,
and the declaration's own typed refusal gives the substitute.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the flower extra is not installed")

from flwr.app import ArrayRecord, ConfigRecord, Context, Message
from flwr.clientapp import ClientApp
from test_flower import N_NODES, client_data, exact, regression_inputs
from test_flower_runs import regions_by_id, wrapper

from dpledger import Ledger
from dpledger.flower import answer_region_queries, contribution_reply, contributions
from dpledger.flower.testing import LocalGrid
from dpledger.flower.wire import RoundPlan, read_reply
from dpledger.sim.fleet import Fleet, make_fleet

ODD = 5  # partition whose per-batch losses are handed over as they come


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return make_fleet(n_clients=N_NODES, regions=("north", "south"), n_classes=3,
                      scenarios=("label_skew",), seed=1)  # fmt: skip


def batches(loss: np.ndarray, ragged: bool) -> Any:
    """Per-batch losses: the last batch shorter (a ragged list) or all equal (2-D)."""
    if ragged:
        return [list(loss[:-1]), [float(loss[-1])]]
    return np.stack([loss, loss])


def client(fleet: Fleet, ragged: bool) -> ClientApp:
    app = ClientApp()
    answer_region_queries(app)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        pid = int(context.node_config["partition-id"])
        data: dict[str, Any] = dict(client_data(fleet, pid))
        if pid == ODD:
            data["loss"] = batches(data["loss"], ragged)
        return contribution_reply(msg, data, data_for=regression_inputs(data))

    return app


def one_round(fleet: Fleet, ragged: bool) -> tuple[dict[str, Any], str]:
    grid = LocalGrid(client(fleet, ragged), N_NODES, offline=())
    grid.activate()
    try:
        with Ledger.open(":memory:", exact(), mode="create") as ledger:
            strategy = wrapper(ledger, regions_by_id(fleet, grid))
            sent = list(strategy.configure_evaluate(1, ArrayRecord(), ConfigRecord(), grid))
            record = strategy.aggregate_evaluate(1, grid.send_and_receive(sent))
            assert record is not None
            status = next(s.status for s in strategy.rounds[1].nodes
                          if s.node_id == grid.node_ids[ODD])  # fmt: skip
            return dict(record), status
    finally:
        grid.deactivate()


@pytest.fixture(scope="module")
def plan(fleet: Fleet) -> Iterator[RoundPlan]:
    with Ledger.open(":memory:", exact(), mode="create") as ledger:
        strategy = wrapper(ledger, {})
        yield RoundPlan(1, 0, strategy.policy.version, strategy.plans)


def test_a_ragged_loss_gets_the_substitute_not_an_error(fleet: Fleet, plan: RoundPlan) -> None:
    data: dict[str, Any] = dict(client_data(fleet, ODD))
    data["loss"] = batches(data["loss"], ragged=True)
    content = contributions(plan, data, data_for=regression_inputs(data))
    payloads, problem = read_reply(plan, content)
    assert problem is None
    assert payloads["loss"] == plan.metrics["loss"].bounds.high  # the worst loss


def test_whether_a_node_reports_does_not_depend_on_its_batches_under_replace(
    fleet: Fleet,
) -> None:
    ragged, ragged_status = one_round(fleet, ragged=True)
    even, even_status = one_round(fleet, ragged=False)
    assert (ragged_status, even_status) == ("reported", "reported")
    health = [k for k in even if "/health/" in k]
    assert {k: ragged[k] for k in health} == {k: even[k] for k in health}

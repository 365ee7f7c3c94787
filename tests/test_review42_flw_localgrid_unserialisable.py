"""Review 42 (flw): a reply Flower's wire format cannot carry ends no LocalGrid run.

``LocalGrid`` copies every reply through Flower's wire format ("unserialisable values
fail as they would in a deployment"). A ClientApp whose reply held a MetricRecord int
beyond 64 bits (``MetricRecord`` accepts any Python int; its protobuf is ``sint64``) made
that copy raise ``ValueError: Value out of range`` out of ``send_and_receive``: the whole
run ended — the run ``make flower-demo``, the tests and the benchmarks drive. In a
deployment that reply cannot leave its node (its ClientApp fails to push it) and the
server simply gets no reply: the node is dropped. The same for a ClientApp that returns
something other than a Message (``AttributeError`` out of the grid). Now both are kept in
``grid.dropped`` and the node has no reply; the wrapper counts it dropped and the run
goes on.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")

import pytest

pytest.importorskip("flwr", reason="the flower extra is not installed")

from flwr.app import ArrayRecord, ConfigRecord, Context, Message
from flwr.clientapp import ClientApp
from test_flower import N_NODES, client_data, exact, regression_inputs
from test_flower_runs import regions_by_id, wrapper

from dpledger import Ledger
from dpledger.flower import answer_region_queries, contribution_reply
from dpledger.flower.testing import LocalGrid
from dpledger.sim.fleet import Fleet, make_fleet

HUGE, NOT_A_MESSAGE = 5, 6  # partitions (north)


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return make_fleet(n_clients=N_NODES, regions=("north", "south"), n_classes=3,
                      scenarios=("label_skew",), seed=1)  # fmt: skip


def client(fleet: Fleet) -> ClientApp:
    app = ClientApp()
    answer_region_queries(app)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Any:
        pid = int(context.node_config["partition-id"])
        data = client_data(fleet, pid)
        reply = contribution_reply(msg, data, data_for=regression_inputs(data))
        if pid == HUGE:
            reply.content["dpledger.scalars"]["loss"] = 2**70
        if pid == NOT_A_MESSAGE:
            return reply.content
        return reply

    return app


def test_an_unserialisable_reply_is_a_dropped_node_not_the_end_of_the_run(fleet: Fleet) -> None:
    grid = LocalGrid(client(fleet), N_NODES, offline=())
    grid.activate()
    try:
        with Ledger.open(":memory:", exact(), mode="create") as ledger:
            strategy = wrapper(ledger, regions_by_id(fleet, grid))
            sent = list(strategy.configure_evaluate(1, ArrayRecord(), ConfigRecord(), grid))
            record = strategy.aggregate_evaluate(1, grid.send_and_receive(sent))
    finally:
        grid.deactivate()
    assert record is not None
    assert len(grid.dropped) == 2
    status = {s.node_id: s.status for s in strategy.rounds[1].nodes}
    assert status[grid.node_ids[HUGE]] == status[grid.node_ids[NOT_A_MESSAGE]] == "dropped"
    assert record["north/health/dropped"] == 2
    assert record["north/health/reported"] == 18
    assert record["released"] == 8

"""Review (hflw): under add_remove a StaticRegistry's map is the run's population, so a
node the operator listed that has not connected (not yet provisioned, or deleted from the
SuperLink) is sampled and sent an instruction. A SuperLink does not store a message to an
unknown node (``store_message_ins`` logs "Invalid destination node ID" and the push
answers an empty message id): the node never replies and is counted as dropped. The
in-process ``LocalGrid`` — which the module says mimics what Flower's runtimes do —
raised ``InvalidInput`` on the push instead, ending the whole run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from flwr.app import Array, ArrayRecord
from flwr.serverapp.strategy import FedAvg
from test_flower import METRICS, N_NODES, PARAMS, Fleet, fleet, make_client, policy, regions_by_id

from dpledger import Ledger
from dpledger.flower import LedgerEvaluation, StaticRegistry
from dpledger.flower.testing import LocalGrid

__all__ = ["fleet"]

NEVER_CONNECTED = 12345


def test_an_instruction_to_a_node_that_never_connected_is_a_dropout(
    fleet: Fleet, tmp_path: Path
) -> None:
    p = policy(neighbouring="add_remove", eps="1", epoch="40")
    grid = LocalGrid(make_client(fleet, bad=False), N_NODES)
    regions = {**regions_by_id(fleet, grid), NEVER_CONNECTED: "north"}
    inner = FedAvg(fraction_train=0.0, fraction_evaluate=1.0, min_evaluate_nodes=1,
                   min_available_nodes=1)  # fmt: skip
    with Ledger.open(tmp_path / "l.db", p, mode="create") as ledger:
        strategy = LedgerEvaluation(inner, ledger, metrics=METRICS, params=PARAMS,
                                    registry=StaticRegistry(regions))  # fmt: skip
        grid.activate()
        try:
            result = strategy.start(grid=grid, initial_arrays=ArrayRecord(
                {"w": Array(np.zeros(2))}), num_rounds=1)  # fmt: skip
        finally:
            grid.deactivate()
    assert result.evaluate_metrics_clientapp[1]["north/health/selected"] == 21
    health = strategy.rounds[1].health["north"]
    assert (health.selected, health.dropped) == (21, 1)

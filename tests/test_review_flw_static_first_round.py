"""Review (hflw): under add_remove with a StaticRegistry the wrapped strategy samples from
the map from the run's first round on. FedAvg's ``sample_nodes`` waits until
``min_available_nodes`` nodes are connected; sampling from the static population it never
waits, so an evaluation-only run (``fraction_train=0``, as in the example app) sends its
first evaluate round before the fleet has connected: every not-yet-connected node is a
(private) dropout, and that round's releases spend their ε on a cohort that could not
answer. Under ``replace`` (and under add_remove with a QueryRegistry, whose first round
samples the connected nodes) the same run waits for the fleet. Fixed: under add_remove a
StaticRegistry is asked through a Roster too, so the first round samples the connected
nodes (FedAvg waits for them) and they are the run's population from then on."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord
from flwr.serverapp.strategy import FedAvg, strategy_utils
from test_flower import METRICS, N_NODES, PARAMS, Fleet, fleet, make_client, policy, regions_by_id

from dpledger import Ledger
from dpledger.flower import LedgerEvaluation, StaticRegistry
from dpledger.flower.testing import LocalGrid

__all__ = ["fleet"]


class ArrivingGrid(LocalGrid):
    """A fleet that has not connected yet: only node 0 is listed (and answers) until the
    first wait for nodes, after which every node is connected."""

    arrived = False

    def get_node_ids(self) -> Iterable[int]:
        return list(self.node_ids) if self.arrived else self.node_ids[:1]


@pytest.mark.parametrize(
    "neighbouring",
    [
        "replace",
        "add_remove",
    ],
)  # fmt: skip
def test_the_first_round_waits_for_the_fleet_as_the_wrapped_strategy_does(
    fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, neighbouring: str
) -> None:
    grid = ArrivingGrid(make_client(fleet, bad=False), N_NODES)
    grid.offline = set(grid.node_ids[1:])

    def arrive(_: float) -> None:  # FedAvg's wait: the fleet connects meanwhile
        grid.arrived = True
        grid.offline = set()

    monkeypatch.setattr(strategy_utils, "sleep", arrive)
    p = policy(neighbouring=neighbouring, eps="1", epoch="40")
    inner = FedAvg(fraction_train=0.0, fraction_evaluate=1.0, min_evaluate_nodes=N_NODES,
                   min_available_nodes=N_NODES)  # fmt: skip
    with Ledger.open(tmp_path / "l.db", p, mode="create") as ledger:
        registry = StaticRegistry(regions_by_id(fleet, grid))
        strategy = LedgerEvaluation(inner, ledger, metrics=METRICS, params=PARAMS,
                                    registry=registry)  # fmt: skip
        grid.activate()
        try:
            strategy.start(grid=grid, initial_arrays=ArrayRecord({"w": Array(np.zeros(2))}),
                           num_rounds=1)  # fmt: skip
        finally:
            grid.deactivate()
    health = strategy.rounds[1].health
    assert sum(h.dropped for h in health.values()) == 0
    assert sum(h.reported for h in health.values()) == N_NODES

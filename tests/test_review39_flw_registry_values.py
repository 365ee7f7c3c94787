"""Review 39 (flw): a registry's non-string region leaves the node unregistered.

``region_map`` says a registry's values are checked where they are used — anything but a
region of the policy leaves the node unregistered. Under a policy with open regions
(``[regions] open = true``) a third-party ``NodeRegistry`` answering an int for a node
made ``Regions.admits`` raise ``TypeError`` in ``configure_evaluate``: the run ended.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the flower extra is not installed")

from flwr.app import Array, ArrayRecord
from flwr.serverapp.strategy import FedAvg
from test_flower import METRICS, N_NODES, PARAMS, POLICY, make_client

from dpledger import Ledger, Policy
from dpledger.flower import LedgerEvaluation
from dpledger.flower.testing import LocalGrid
from dpledger.sim.fleet import make_fleet


class Odd:
    """Every other node's region is a number (a third-party registry's mistake)."""

    def regions(self, node_ids: Any, grid: Any) -> dict[int, object]:
        return {n: (5 if k % 2 else "north") for k, n in enumerate(node_ids)}


def test_a_non_string_region_is_unregistered_under_open_regions() -> None:
    text = POLICY.format(neighbouring="replace", eps="1", epoch="40", extra="")
    policy = Policy.from_toml(text.replace('names = ["north", "south"]', "open = true"))
    fleet = make_fleet(n_clients=N_NODES, regions=("north", "south"), n_classes=3,
                       scenarios=("label_skew",), seed=1)  # fmt: skip
    grid = LocalGrid(make_client(fleet, bad=False), N_NODES, offline=())
    grid.activate()
    try:
        with Ledger.open(":memory:", policy, mode="create") as ledger:
            strategy = LedgerEvaluation(
                FedAvg(fraction_train=0.0, min_available_nodes=N_NODES), ledger,
                metrics=METRICS, params=PARAMS, registry=Odd(),
            )  # fmt: skip
            arrays = ArrayRecord({"w": Array(np.zeros(2))})
            strategy.start(grid=grid, initial_arrays=arrays, num_rounds=1)
    finally:
        grid.deactivate()
    report = strategy.rounds[1]
    assert len(report.unregistered) == N_NODES // 2
    assert report.health["north"].selected == N_NODES // 2

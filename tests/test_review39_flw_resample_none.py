"""Review 39 (flw): a round sampled again, by nobody, releases nothing.

A round configured twice before its replies (an outer strategy sampling again) stays in
its run, and the second plan replaces the first. When the second sampling asked nobody
(``configure_evaluate`` returned no message), the first plan stayed pending:
``aggregate_evaluate`` then released it with every node "dropped" — under ``add_remove``
8 releases charged on a planned cohort of 20 per region that no one was asked to join,
published as ``REGION/health/selected`` 20 with values that are noise around zero.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import pytest

pytest.importorskip("flwr", reason="the flower extra is not installed")

from flwr.app import ArrayRecord, ConfigRecord
from test_flower import make_client, policy
from test_flower_runs import regions_by_id, wrapper

from dpledger import Ledger
from dpledger.flower.testing import LocalGrid
from dpledger.sim.fleet import Fleet, make_fleet


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return make_fleet(n_clients=40, regions=("north", "south"), n_classes=3,
                      scenarios=("label_skew",), seed=1)  # fmt: skip


@pytest.fixture
def grid(fleet: Fleet) -> Iterator[LocalGrid]:
    made = LocalGrid(make_client(fleet, bad=False), 40, offline=())
    made.activate()
    yield made
    made.deactivate()


@pytest.mark.parametrize("neighbouring", ["replace", "add_remove"])
def test_a_round_sampled_again_by_nobody_releases_nothing(
    fleet: Fleet, grid: LocalGrid, neighbouring: str
) -> None:
    p = policy(neighbouring=neighbouring, eps="1", epoch="40")
    with Ledger.open(":memory:", p, mode="create") as ledger:
        strategy = wrapper(ledger, regions_by_id(fleet, grid))
        first = list(strategy.configure_evaluate(1, ArrayRecord(), ConfigRecord(), grid))
        assert len(first) == 40
        strategy.strategy.fraction_evaluate = 0.0  # type: ignore[attr-defined]
        second = list(strategy.configure_evaluate(1, ArrayRecord(), ConfigRecord(), grid))
        assert second == []
        assert strategy.aggregate_evaluate(1, grid.send_and_receive(second)) is None
        assert len(ledger) == 0
        assert 1 not in strategy.rounds

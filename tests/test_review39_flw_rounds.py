"""Review 39 (flw): rounds the wrapper must not evaluate.

A round numbered below 1: rounds count from 1 (``epoch_of``: ``first_epoch + (round − 1)
// rounds_per_epoch``). A loop driven by hand from 0 had its round 0 evaluated in epoch
``first_epoch − 1``: with ``first_epoch=2`` it was charged silently to epoch 1, whose
budget belongs to an earlier run; with ``first_epoch=0`` the release request's epoch −1
raised out of ``aggregate_evaluate``, after every client had computed, and ended the run.
Now such a round is not configured (an error is logged), like a round past the last epoch.

A round sampled again, by nobody: a round configured twice before its replies stays in
its run, and the second plan replaces the first. When the second sampling asked nobody,
the first plan stayed pending and ``aggregate_evaluate`` released it with every node
"dropped" — under ``add_remove`` 8 releases charged on a planned cohort of 20 per region
that no one was asked to join, published as ``REGION/health/selected`` 20.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import pytest

pytest.importorskip("flwr", reason="the flower extra is not installed")

from flwr.app import ArrayRecord, ConfigRecord
from test_flower import make_client, policy
from test_flower_runs import exact, regions_by_id, wrapper

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


@pytest.mark.parametrize("first_epoch", [0, 2])
def test_round_zero_is_neither_charged_to_an_earlier_epoch_nor_ends_the_run(
    fleet: Fleet, grid: LocalGrid, first_epoch: int, caplog: pytest.LogCaptureFixture
) -> None:
    with Ledger.open(":memory:", exact(), mode="create") as ledger:
        strategy = wrapper(ledger, regions_by_id(fleet, grid), first_epoch=first_epoch)
        with caplog.at_level(logging.ERROR, logger="dpledger.flower"):
            messages = list(strategy.configure_evaluate(0, ArrayRecord(), ConfigRecord(), grid))
        assert messages == []
        assert "rounds count from 1" in caplog.text
        assert strategy.aggregate_evaluate(0, grid.send_and_receive(messages)) is None
        assert len(ledger) == 0
        messages = list(strategy.configure_evaluate(1, ArrayRecord(), ConfigRecord(), grid))
        record = strategy.aggregate_evaluate(1, grid.send_and_receive(messages))
        assert record is not None
        assert record["epoch"] == first_epoch
        assert {e.draft.epoch for e in ledger.entries()} == {first_epoch}


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

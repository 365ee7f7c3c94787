"""Review 40 (flw): every release id the wrapper makes fits the ledger's 128 characters.

``_request`` builds ``PREFIX/RUN/rROUND/REGION/METRIC`` and, past 128 characters, falls
back to ``PREFIX/RUN/rROUND/DIGEST`` (32 hex digits of region/metric). With the longest
prefix ``release_prefix`` accepts (64 characters) that fallback is itself 116 characters
plus the round's digits: from round 10**12 on (a loop driven by hand, well inside the
epochs ``configure_evaluate`` accepts) it was 129+ characters, ``ReleaseRequest`` raised
``InvalidInput`` out of ``aggregate_evaluate`` after every client had computed, and the
run ended. The fallback now digests the round too, so the id always fits.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import pytest

pytest.importorskip("flwr", reason="the flower extra is not installed")

from flwr.app import ArrayRecord, ConfigRecord
from test_flower import POLICY, make_client
from test_flower_runs import regions_by_id, wrapper

from dpledger import Ledger
from dpledger.flower.testing import LocalGrid
from dpledger.policy import Policy
from dpledger.sim.fleet import Fleet, make_fleet

NORTH, SOUTH = "north-" + "n" * 58, "south-" + "s" * 58  # 64 characters: the longest names


def long_names() -> Policy:
    text = POLICY.format(neighbouring="replace", eps="1000000", epoch="100000000", extra="")
    text = text.replace('names = ["north", "south"]', f'names = ["{NORTH}", "{SOUTH}"]')
    return Policy.from_toml(text, source="test_review40_flw_long_ids.py")


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return make_fleet(n_clients=40, regions=(NORTH, SOUTH), n_classes=3,
                      scenarios=("label_skew",), seed=1)  # fmt: skip


@pytest.fixture
def grid(fleet: Fleet) -> Iterator[LocalGrid]:
    made = LocalGrid(make_client(fleet, bad=False), 40, offline=())
    made.activate()
    yield made
    made.deactivate()


@pytest.mark.parametrize("server_round", [7, 10**12, 10**15])
def test_a_late_round_with_the_longest_prefix_is_released(
    fleet: Fleet, grid: LocalGrid, server_round: int
) -> None:
    with Ledger.open(":memory:", long_names(), mode="create") as ledger:
        strategy = wrapper(ledger, regions_by_id(fleet, grid), release_prefix="p" * 64)
        messages = list(
            strategy.configure_evaluate(server_round, ArrayRecord(), ConfigRecord(), grid)
        )
        assert len(messages) == 40
        record = strategy.aggregate_evaluate(server_round, grid.send_and_receive(messages))
        assert record is not None
        assert record["refused"] == 0
        ids = [e.draft.release_id for e in ledger.entries()]
        assert len(ids) == len(set(ids)) == 8
        assert all(len(i) <= 128 and i.startswith("p" * 64 + "/") for i in ids)

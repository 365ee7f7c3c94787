"""Review (hflw): under add_remove the wrapped strategy samples, from round 2 on, from the
run's population — which was the roster's *registered* nodes only. A strategy that waits
for every node (FedAvg(min_available_nodes=N, min_evaluate_nodes=N), as the example app
and the tests' ``run`` configure it) then skipped every evaluate round after the first as
soon as one node did not answer the registration query (offline at that moment, slow, or
a hostile node that simply ignores it): one node's silence to a query ended evaluation for
the whole fleet for the rest of the run — under ``replace`` the same run evaluates every
round. Round 1 sampled from every connected node, so the run's population is now every
node the roster asked (the unanswered ones stay unregistered: sampled, not asked to
evaluate, counted — as a StaticRegistry's nodes with no region of the policy are)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_flower import OFFLINE, Fleet, exact, fleet, policy, region_of, run

from dpledger import Ledger
from dpledger.flower import QueryRegistry

__all__ = ["fleet"]


@pytest.mark.parametrize("neighbouring", ["replace", "add_remove"])
def test_a_node_silent_at_registration_does_not_stop_later_rounds(
    fleet: Fleet, tmp_path: Path, neighbouring: str
) -> None:
    p = exact() if neighbouring == "replace" else policy(neighbouring="add_remove", eps="1",
                                                          epoch="40")  # fmt: skip
    registry = QueryRegistry(("partition-id",), region_of(fleet))
    with Ledger.open(tmp_path / "l.db", p, mode="create") as ledger:
        strategy, result, grid = run(fleet, ledger, rounds=3, registry=registry)
    assert sorted(strategy.rounds) == [1, 2, 3]
    assert sorted(result.evaluate_metrics_clientapp) == [1, 2, 3]
    for report in strategy.rounds.values():
        assert report.unregistered == (grid.node_ids[OFFLINE],)
        assert report.health["north"].selected == 19

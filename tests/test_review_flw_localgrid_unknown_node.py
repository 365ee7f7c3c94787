"""Review (hflw F3): a SuperLink does not store a message to an unknown node
(``store_message_ins`` logs "Invalid destination node ID" and the push answers an empty
message id): the node never replies. The in-process ``LocalGrid`` — which the module says
mimics what Flower's runtimes do — raised ``InvalidInput`` on the push instead, ending
the run. And a node the operator's StaticRegistry lists that never connected is not in an
add_remove run's population (the first round's connected nodes: review hflw F5), so it is
neither selected nor counted as dropped in any round."""

from __future__ import annotations

from pathlib import Path

from flwr.app import Message, RecordDict
from flwr.serverapp.strategy import FedAvg
from test_flower import N_NODES, Fleet, fleet, make_client, policy, regions_by_id
from test_flower_runs import two_rounds

from dpledger.flower import StaticRegistry
from dpledger.flower.testing import LocalGrid

__all__ = ["fleet"]

NEVER_CONNECTED = 12345


def test_an_instruction_to_a_node_the_grid_does_not_have_is_not_stored(fleet: Fleet) -> None:
    grid = LocalGrid(make_client(fleet, bad=False), N_NODES)
    grid.activate()
    try:
        msg = Message(RecordDict(), dst_node_id=NEVER_CONNECTED, message_type="evaluate")
        assert list(grid.push_messages([msg])) == [""]
        assert list(grid.send_and_receive([msg])) == []
    finally:
        grid.deactivate()


def test_a_listed_node_that_never_connected_is_not_in_an_add_remove_population(
    fleet: Fleet, tmp_path: Path
) -> None:
    p = policy(neighbouring="add_remove", eps="1", epoch="40")
    grid = LocalGrid(make_client(fleet, bad=False), N_NODES)
    regions = {**regions_by_id(fleet, grid), NEVER_CONNECTED: "north"}
    inner = FedAvg(fraction_train=0.0, fraction_evaluate=1.0, min_evaluate_nodes=1,
                   min_available_nodes=1)  # fmt: skip
    strategy, result = two_rounds(tmp_path / "l.db", p, grid, inner, StaticRegistry(regions), None)
    for r in (1, 2):
        assert result.evaluate_metrics_clientapp[r]["north/health/selected"] == 20
        health = strategy.rounds[r].health["north"]
        assert (health.selected, health.dropped) == (20, 0)

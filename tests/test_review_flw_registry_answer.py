"""Review (hflw): a third-party ``NodeRegistry`` whose ``regions`` answers something other
than a mapping (a list of pairs, None) ended the run at its first evaluate round with an
untyped ``AttributeError`` / ``TypeError`` from inside the wrapper — under ``replace``; under
``add_remove`` the Roster's ``dict(...)`` silently accepted a list of pairs that ``replace``
refused. Bad configuration is a typed ``InvalidInput`` that says what to return, the same
under both relations."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord
from flwr.serverapp.strategy import FedAvg
from test_flower import METRICS, N_NODES, PARAMS, Fleet, fleet, make_client, policy

from dpledger import Ledger
from dpledger.errors import InvalidInput
from dpledger.flower import LedgerEvaluation, StaticRegistry
from dpledger.flower.testing import LocalGrid

__all__ = ["fleet"]


class Odd:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def regions(self, node_ids: Sequence[int], grid: Any) -> Any:
        return self.answer(node_ids)


@pytest.mark.parametrize("neighbouring", ["replace", "add_remove"])
@pytest.mark.parametrize(
    "answer",
    [lambda ids: [(n, "north") for n in ids], lambda ids: None],
    ids=["pairs", "none"],
)
def test_a_registry_answering_no_mapping_is_a_typed_configuration_error(
    fleet: Fleet, tmp_path: Path, neighbouring: str, answer: Any
) -> None:
    p = policy(neighbouring=neighbouring, eps="1", epoch="40")
    grid = LocalGrid(make_client(fleet, bad=False), N_NODES)
    with Ledger.open(tmp_path / "l.db", p, mode="create") as ledger:
        inner = FedAvg(fraction_train=0.0, min_available_nodes=2)
        strategy = LedgerEvaluation(inner, ledger, metrics=METRICS, params=PARAMS,
                                    registry=Odd(answer))  # fmt: skip
        grid.activate()
        try:
            with pytest.raises(InvalidInput, match="mapping"):
                strategy.start(grid=grid, initial_arrays=ArrayRecord({"w": Array(np.zeros(2))}),
                               num_rounds=1)  # fmt: skip
        finally:
            grid.deactivate()


@pytest.mark.parametrize("bad", [{True: "north"}, {1.0: "north"}, {1: 7}, [(1, "north")]])
def test_a_static_registry_takes_int_node_ids_to_region_names_only(bad: object) -> None:
    """A bool is an int to Python, not a node id: ``{True: ...}`` was accepted (review hflw)."""
    with pytest.raises(InvalidInput, match="StaticRegistry needs a mapping of int node ids"):
        StaticRegistry(bad)  # type: ignore[arg-type]

"""Review 42 (flw): a wrapped strategy whose own ``start()`` would not run is warned about.

docs/flower.md: "wrap any Message-API strategy; training passes through untouched".
``LedgerEvaluation.start`` runs Flower's round loop (``Strategy.start``) with the wrapped
strategy's configure and aggregate methods; it cannot call the wrapped ``start()`` (that
loop would evaluate around the ledger). A strategy that customises its loop — here one
that keeps each round's trained arrays, as a checkpointing strategy would — silently lost
it when wrapped: training ran, the override never did, and nothing said so. Now the
wrapper logs a warning naming the strategy when it is built, and the docs say which loop
runs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")

import pytest

pytest.importorskip("flwr", reason="the flower extra is not installed")

from flwr.app import ArrayRecord, ConfigRecord, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg, FedProx, Result
from test_flower import exact

from dpledger import Ledger
from dpledger.flower import LedgerEvaluation, StaticRegistry

DOCS = Path(__file__).resolve().parent.parent / "docs" / "flower.md"


class Checkpointing(FedAvg):
    """A strategy with its own loop: it keeps a copy of the arrays after every run."""

    def start(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord,
        num_rounds: int = 3,
        timeout: float = 3600,
        train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
    ) -> Result:
        self.saved = initial_arrays
        return super().start(grid, initial_arrays, num_rounds, timeout, train_config,
                             evaluate_config, evaluate_fn)  # fmt: skip


def build(strategy: Any) -> None:
    with Ledger.open(":memory:", exact(), mode="create") as ledger:
        LedgerEvaluation(strategy, ledger, metrics={"loss": "clipped_loss"},
                         registry=StaticRegistry({}))  # fmt: skip


def test_a_strategy_with_its_own_start_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="dpledger.flower"):
        build(Checkpointing())
    assert "Checkpointing overrides start()" in caplog.text
    assert "Strategy.start" in " ".join(DOCS.read_text(encoding="utf-8").split())


@pytest.mark.parametrize("strategy", [FedAvg, FedProx])
def test_flowers_own_strategies_are_not(
    caplog: pytest.LogCaptureFixture, strategy: Callable[[], Any]
) -> None:
    with caplog.at_level(logging.WARNING, logger="dpledger.flower"):
        build(strategy())
    assert "overrides start()" not in caplog.text

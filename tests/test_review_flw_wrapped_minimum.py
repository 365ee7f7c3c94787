"""Review (hflw): under add_remove the wrapped strategy samples from the run's population
(``sampling_grid``), and a population smaller than the strategy's ``min_available_nodes``
or ``min_evaluate_nodes`` is meant to skip the round with an error (FedAvg's
``sample_nodes`` otherwise sleeps forever, waiting for nodes the population can never
have). The minimum was read with ``getattr(strategy, ...)`` on the outermost strategy only:
a Flower wrapper (``DifferentialPrivacyServerSideFixedClipping``, the adaptive-clipping
ones) keeps its FedAvg in ``.strategy`` and has no such attribute, so the check saw 0 and
the run hung in ``sample_nodes``. Here ``sleep`` is patched to raise, so a hang fails."""

from __future__ import annotations

import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")

from pathlib import Path

import pytest
from flwr.app import ArrayRecord, ConfigRecord
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideFixedClipping,
    FedAvg,
    strategy_utils,
)
from test_flower import METRICS, N_NODES, PARAMS, Fleet, fleet, make_client, policy, regions_by_id

from dpledger import Ledger
from dpledger.flower import LedgerEvaluation, StaticRegistry
from dpledger.flower.testing import LocalGrid

__all__ = ["fleet"]


class _Hang(Exception):
    pass


def _no_sleep(_: float) -> None:
    raise _Hang("sample_nodes waited for nodes the population cannot have")


@pytest.mark.parametrize(
    "wrap",
    [
        lambda s: DifferentialPrivacyServerSideFixedClipping(s, 1.0, 1.0, N_NODES),
        lambda s: DifferentialPrivacyClientSideFixedClipping(s, 1.0, 1.0, N_NODES),
    ],
    ids=["server-side", "client-side"],
)
def test_a_wrapped_strategys_minimum_is_seen_through_flowers_dp_wrappers(
    fleet: Fleet,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    wrap: object,
) -> None:
    monkeypatch.setattr(strategy_utils, "sleep", _no_sleep)
    p = policy(neighbouring="add_remove", eps="1", epoch="40")
    grid = LocalGrid(make_client(fleet), N_NODES)
    few = dict(list(regions_by_id(fleet, grid).items())[: N_NODES - 1])  # one unmapped node
    inner = FedAvg(fraction_train=0.0, fraction_evaluate=1.0, min_evaluate_nodes=N_NODES,
                   min_available_nodes=N_NODES)  # fmt: skip
    with Ledger.open(tmp_path / "l.db", p, mode="create") as ledger:
        strategy = LedgerEvaluation(wrap(inner), ledger, metrics=METRICS,  # type: ignore[operator]
                                    params=PARAMS, registry=StaticRegistry(few))  # fmt: skip
        grid.activate()
        try:
            messages = strategy.configure_evaluate(1, ArrayRecord(), ConfigRecord(), grid)
        finally:
            grid.deactivate()
        assert list(messages) == []
        assert len(ledger) == 0
    assert f"fewer than the wrapped strategy's minimum of {N_NODES}" in caplog.text

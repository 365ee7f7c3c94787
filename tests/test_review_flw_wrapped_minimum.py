"""Review (hflw): under add_remove the wrapped strategy samples from the run's population
(``sampling_grid``), and a population smaller than the strategy's ``min_available_nodes``
or ``min_evaluate_nodes`` is meant to skip the round with an error (FedAvg's
``sample_nodes`` otherwise sleeps forever, waiting for nodes the population can never
have). The minimum was read with ``getattr(strategy, ...)`` on the outermost strategy only:
a Flower wrapper (``DifferentialPrivacyServerSideFixedClipping``, the adaptive-clipping
ones) keeps its FedAvg in ``.strategy`` and has no such attribute, so the check saw 0 and
the run hung in ``sample_nodes``. Here ``sleep`` is patched to raise, so a hang fails.
Since F5 every add_remove registry is asked through a Roster, whose first round waits for
the strategy's minimum, so the guard is checked on ``sampling_grid`` itself."""

from __future__ import annotations

import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")

from typing import Any

import pytest
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideFixedClipping,
    FedAvg,
    strategy_utils,
)
from test_flower import N_NODES, Fleet, fleet, make_client

from dpledger.flower.registry import sampling_grid
from dpledger.flower.testing import LocalGrid

__all__ = ["fleet"]


class _Hang(Exception):
    pass


def _no_sleep(_: float) -> None:
    raise _Hang("sample_nodes waited for nodes the population cannot have")


class _Few:
    """A run lookup whose population is smaller than the strategy waits for."""

    def members(self, grid: object) -> tuple[int, ...]:
        return (1, 2)


@pytest.mark.parametrize(
    "wrap",
    [
        lambda s: s,
        lambda s: DifferentialPrivacyServerSideFixedClipping(s, 1.0, 1.0, 3),
        lambda s: DifferentialPrivacyClientSideFixedClipping(s, 1.0, 1.0, 3),
    ],
    ids=["plain", "server-side", "client-side"],
)
def test_a_wrapped_strategys_minimum_is_seen_through_flowers_dp_wrappers(
    fleet: Fleet,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    wrap: Any,
) -> None:
    """A population below the minimum (unreachable when the first round waited for the
    strategy's minimum, but a strategy may not wait) skips the round: no sampling."""
    monkeypatch.setattr(strategy_utils, "sleep", _no_sleep)
    grid = LocalGrid(make_client(fleet), N_NODES)
    inner = FedAvg(fraction_train=0.0, fraction_evaluate=1.0, min_evaluate_nodes=3,
                   min_available_nodes=1)  # fmt: skip
    assert sampling_grid(_Few(), grid, wrap(inner)) is None
    assert "fewer than the wrapped strategy's minimum of 3" in caplog.text
    assert sampling_grid(_Few(), grid, FedAvg(min_evaluate_nodes=2, min_available_nodes=2))


@pytest.mark.parametrize("fraction", [1.5, -0.1, float("nan"), float("inf")])
@pytest.mark.parametrize("wrapped", [False, True], ids=["plain", "server-side"])
def test_a_fraction_evaluate_outside_0_1_is_refused_before_any_round(
    fleet: Fleet, tmp_path: Any, fraction: float, wrapped: bool
) -> None:
    """FedAvg samples int(n × fraction_evaluate) of n nodes: above 1 it sleeps forever in
    sample_nodes (under either relation), below 0 random.sample raises mid-run."""
    from test_flower import METRICS, PARAMS, exact

    from dpledger.errors import InvalidInput
    from dpledger.flower import LedgerEvaluation
    from dpledger.ledger import Ledger

    inner = FedAvg(fraction_train=0.0, fraction_evaluate=fraction)
    outer = DifferentialPrivacyServerSideFixedClipping(inner, 1.0, 1.0, 3) if wrapped else inner
    with Ledger.open(tmp_path / "l.db", exact(), mode="create") as ledger:
        with pytest.raises(InvalidInput, match=r"fraction_evaluate is .*must be in \[0, 1\]"):
            LedgerEvaluation(outer, ledger, metrics=METRICS, params=PARAMS)
        for ok in (0.0, 0.5, 1.0, 1):
            LedgerEvaluation(FedAvg(fraction_evaluate=ok), ledger, metrics=METRICS, params=PARAMS)
    assert not (tmp_path / "l.db").exists()

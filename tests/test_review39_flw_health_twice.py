"""Review 39 (flw): the health metric cannot also be evaluated as a client metric.

``LedgerEvaluation(..., metrics={..., "health": "pooled_along_across_ratio"},
health_metric="health")`` was accepted: every client was asked to compute and send a
contribution for the health metric, and each round queued two releases under one
release id (``…/rR/REGION/health``), the noisy counts and the clients' sums. The ledger
decided the second as a repeat of the first (a seeded two-region round: 12 items, 10
ledger entries, ``released`` 10), so the client sums were never released, and the
region's health outcome was whichever of the two came last. A client rejected for the
health metric's bounds counted as rejected for everything. Refused when the wrapper is
built.
"""

from __future__ import annotations

import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import pytest

pytest.importorskip("flwr", reason="the flower extra is not installed")

from flwr.serverapp.strategy import FedAvg
from test_flower_runs import METRICS, PARAMS, named_health

from dpledger import Ledger
from dpledger.errors import InvalidInput
from dpledger.flower import LedgerEvaluation, StaticRegistry

RATIO = {"error_bound": 1.0, "max_samples": 10.0}


def test_the_health_metric_named_in_metrics_too_is_refused() -> None:
    with (
        Ledger.open(":memory:", named_health("add_remove"), mode="create") as ledger,
        pytest.raises(InvalidInput, match="health_metric"),
    ):
        LedgerEvaluation(
            FedAvg(), ledger, metrics={**METRICS, "health": "pooled_along_across_ratio"},
            params={**PARAMS, "health": RATIO}, health_metric="health",
            registry=StaticRegistry({}),
        )  # fmt: skip

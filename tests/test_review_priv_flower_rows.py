"""Review (priv): under add_remove the Flower wrapper's published MetricRecord must not
depend on how many of the planned cohort reported. PlainSum's exact_sum refuses more rows
than its grid's ``max_clients`` (a bound on the number of *reporters*, private under
add_remove), so one reporter more turns ``REGION/METRIC/refused`` from 0 into 1, uncharged.
Deterministic: the decision reads no noise."""

from __future__ import annotations

import os
from pathlib import Path
from types import MappingProxyType

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.serverapp.strategy import FedAvg

from dpledger import Ledger, Policy
from dpledger.flower import LedgerEvaluation, PlainSum, StaticRegistry, published
from dpledger.flower.intake import Intake
from dpledger.flower.report import Health, NodeStatuses
from dpledger.flower.strategy import _Planned
from dpledger.flower.wire import MetricPlan, RoundPlan
from dpledger.metrics.declarations import Bounds

POLICY = """
name = "priv-review"
version = "1"
neighbouring = "add_remove"
epoch_epsilon = "40"
rounds_per_epoch = 3
allocation = "pooled"
[regions]
names = ["north"]
[metrics.loss]
kind = "scalar_mean"
epsilon = "1"
clip = { low = "0", high = "3.4", source = "test" }
"""
SELECTED = 20_000  # the planned cohort: public, fixed before the round


def _published_refusals(path: Path, reported: int, selected_n: int = SELECTED) -> dict[str, object]:
    policy = Policy.from_toml(POLICY, source="test_review_priv_flower_rows.py")
    with Ledger.open(path, policy, mode="create") as ledger:
        strategy = LedgerEvaluation(
            FedAvg(), ledger, metrics={"loss": "clipped_loss"},
            registry=StaticRegistry({}), aggregator=PlainSum(bits=40),
        )  # fmt: skip
        plan = RoundPlan(1, 0, policy.version, strategy.plans)
        selected = {i + 2: "north" for i in range(selected_n)}
        codes = bytes([0] * reported + [2] * (selected_n - reported))  # reported / dropped
        nodes = NodeStatuses(list(selected), ["north"], np.zeros(selected_n, np.intp), codes, {})
        health = Health(selected=selected_n, reported=reported, dropped=selected_n - reported)
        rows = np.full((reported, 1), 1.0)  # every reporter's loss, inside the clip
        got = Intake(nodes, {"north": health}, {"north": {"loss": rows}}, 0)
        report = strategy._release(_Planned(plan, MappingProxyType(selected), ()), got)
    record = published(report, health_public=False)
    return {k: v for k, v in record.items() if k in ("released", "refused", "north/loss/refused")}


def test_add_remove_publishes_the_same_refusals_for_one_reporter_more(tmp_path: Path) -> None:
    loss = MetricPlan("loss", "clipped_loss", "scalar_mean", Bounds(low=0.0, high=3.4), None,
                      {}, True)  # fmt: skip
    limit = PlainSum(bits=40).grid(loss).max_clients  # 9,637: a public bound on *rows*
    assert limit < SELECTED
    fewer = _published_refusals(tmp_path / "a.db", limit)
    more = _published_refusals(tmp_path / "b.db", limit + 1)  # one client added
    assert fewer == more
    # decided on the public cohort (selected), before any reply is read: refused alike
    assert fewer == {"released": 0, "refused": 1, "north/loss/refused": 1}
    # a cohort within the grid's range: both neighbours released
    ok = [_published_refusals(tmp_path / f"c{n}.db", n, limit) for n in (limit - 1, limit)]
    assert ok[0] == ok[1] == {"released": 1, "refused": 0, "north/loss/refused": 0}

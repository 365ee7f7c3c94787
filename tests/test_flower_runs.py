"""The Flower wrapper's runs and public keys, from review s34: a second run gets new release
ids however the loop is driven, a metric cannot publish under the health counters' keys,
an aggregator that cannot sum nobody's rows is refused under add_remove, and a loss that
cannot be computed is sent as the worst loss, not the best."""

from __future__ import annotations

import functools
import os
import random
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")  # read when flwr is imported
os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")

import numpy as np
import pytest

pytest.importorskip(
    "flwr", reason="the flower extra is not installed (pip install dpledger[flower])"
)

from flwr.app import Array, ArrayRecord, ConfigRecord
from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping, FedAvg
from test_flower import (
    HEALTH,
    METRICS,
    N_NODES,
    PARAMS,
    POLICY,
    client_data,
    exact,
    make_client,
    policy,
    region_of,
    regions_by_id,
    regression_inputs,
)

from dpledger import Ledger, Policy
from dpledger.errors import InvalidInput
from dpledger.flower import (
    LedgerEvaluation,
    PlainSum,
    QueryRegistry,
    StaticRegistry,
    contributions,
)
from dpledger.flower.client import substitute
from dpledger.flower.testing import LocalGrid
from dpledger.flower.wire import RoundPlan
from dpledger.sim.fleet import Fleet, make_fleet


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return make_fleet(n_clients=N_NODES, regions=("north", "south"), n_classes=3,
                      scenarios=("label_skew",), seed=1)  # fmt: skip


def wrapper(ledger: Ledger, registry: dict[int, str], **kw: Any) -> LedgerEvaluation:
    inner = FedAvg(fraction_train=0.0, min_evaluate_nodes=N_NODES, min_available_nodes=N_NODES)
    kw.setdefault("metrics", METRICS)
    return LedgerEvaluation(inner, ledger, params=PARAMS, registry=StaticRegistry(registry),
                            **kw)  # fmt: skip


@pytest.fixture
def grid(fleet: Fleet) -> Iterator[LocalGrid]:
    """An activated in-process grid of honest clients, deactivated after the test."""
    made = LocalGrid(make_client(fleet, bad=False), N_NODES, offline=())
    made.activate()
    yield made
    made.deactivate()


# ------------------------------------------------------------- a second run, new release ids


def test_a_second_run_under_an_outer_strategy_gets_new_release_ids(
    fleet: Fleet, grid: LocalGrid, tmp_path: Any
) -> None:
    """Flower's DP wrapper outermost (its start is Flower's, not the wrapper's): the second
    run (another model) is charged afresh under new release ids, never answered with the
    first run's recorded releases."""
    with Ledger.open(tmp_path / "l.db", exact(), mode="create") as ledger:
        inner = wrapper(ledger, regions_by_id(fleet, grid))
        outer = DifferentialPrivacyServerSideFixedClipping(
            inner, noise_multiplier=0.1, clipping_norm=1.0, num_sampled_clients=N_NODES
        )
        ids = []
        for run in (1, 2):
            arrays = ArrayRecord({"w": Array(np.full(2, float(run)))})
            outer.start(grid=grid, initial_arrays=arrays, num_rounds=1)
            ids.append({r.request.release_id for r in inner.rounds[1].releases})
        assert len(ids[0]) == len(ids[1]) == 8
        assert not ids[0] & ids[1]
        assert len(ledger) == 16  # both runs recorded: nothing answered as a retry


def test_a_round_configured_again_starts_a_new_run(fleet: Fleet, grid: LocalGrid) -> None:
    with Ledger.open(":memory:", exact(), mode="create") as ledger:
        strategy = wrapper(ledger, regions_by_id(fleet, grid))
        tags = []
        for r in (1, 2, 1, 2, 3):
            strategy.configure_evaluate(r, ArrayRecord(), ConfigRecord(), grid)
            tags.append(strategy.run_tag)
    assert tags[0] == tags[1] != tags[2]
    assert tags[2] == tags[3] == tags[4]


def test_a_round_whose_report_was_never_built_still_ends_its_run(
    fleet: Fleet, grid: LocalGrid, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interrupted after its commit (here in the FLAM derivation), round 1 has no report;
    configured again it is still a new run: its ids went to the ledger."""
    with Ledger.open(":memory:", exact(), mode="create") as ledger:
        strategy = wrapper(ledger, regions_by_id(fleet, grid))
        msgs = strategy.configure_evaluate(1, ArrayRecord(), ConfigRecord(), grid)
        replies = grid.send_and_receive(list(msgs))

        def interrupted(*_: Any) -> Any:
            raise KeyboardInterrupt

        with monkeypatch.context() as m:
            m.setattr(LedgerEvaluation, "_derive", interrupted)
            with pytest.raises(KeyboardInterrupt):
                strategy.aggregate_evaluate(1, replies)
        assert strategy.rounds == {}
        assert len(ledger) == 8  # committed
        tag = strategy.run_tag
        strategy.configure_evaluate(1, ArrayRecord(), ConfigRecord(), grid)
        assert strategy.run_tag != tag


def test_a_round_configured_twice_before_its_replies_stays_in_its_run(
    fleet: Fleet, grid: LocalGrid
) -> None:
    """An outer strategy that samples round 2 again keeps the run: its tag, round 1's
    report and every round still pending."""
    with Ledger.open(":memory:", exact(), mode="create") as ledger:
        strategy = wrapper(ledger, regions_by_id(fleet, grid))
        msgs = strategy.configure_evaluate(1, ArrayRecord(), ConfigRecord(), grid)
        strategy.aggregate_evaluate(1, grid.send_and_receive(list(msgs)))
        tag = strategy.run_tag
        strategy.configure_evaluate(2, ArrayRecord(), ConfigRecord(), grid)
        msgs = strategy.configure_evaluate(2, ArrayRecord(), ConfigRecord(), grid)
        strategy.aggregate_evaluate(2, grid.send_and_receive(list(msgs)))
        assert strategy.run_tag == tag
        assert sorted(strategy.rounds) == [1, 2]


# ------------------------------------------------------- the health counters' keys are theirs


def named_health(neighbouring: str) -> Policy:
    text = POLICY.format(
        neighbouring=neighbouring, eps="1", epoch="100", extra=HEALTH.format(eps="1")
    )
    return Policy.from_toml(text.replace('version = "1"', 'version = "h"'))


@pytest.mark.parametrize("neighbouring", ["replace", "add_remove"])
def test_a_metric_named_health_is_refused(neighbouring: str) -> None:
    with (
        Ledger.open(":memory:", named_health(neighbouring), mode="create") as ledger,
        pytest.raises(InvalidInput, match="health counters' keys"),
    ):
        wrapper(ledger, {}, metrics={**METRICS, "health": "calibration_gap"})


def test_the_health_metric_itself_may_be_named_health() -> None:
    with Ledger.open(":memory:", named_health("add_remove"), mode="create") as ledger:
        strategy = wrapper(ledger, {}, health_metric="health")
    assert "health" not in strategy.plans


# ------------------------------------------------ add_remove: nobody's rows sum to zeros


class ReduceSum(PlainSum):
    """A sum by reduction over the rows: it fails when no one reported."""

    def total(self, metric: Any, rows: Any) -> Any:
        return functools.reduce(np.add, list(rows)).reshape(metric.size)


class MeanTimesCount(PlainSum):
    """Exact for any rows, NaN for none."""

    def total(self, metric: Any, rows: Any) -> Any:
        x = np.asarray(rows, dtype=np.float64).reshape(-1, metric.size)
        with warnings.catch_warnings(), np.errstate(invalid="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)  # the mean of no rows: NaN
            return x.mean(axis=0) * len(x)


class Threshold(PlainSum):
    """A secure sum that needs two survivors."""

    def total(self, metric: Any, rows: Any) -> Any:
        if len(rows) < 2:
            raise RuntimeError("too few survivors to unmask")
        return super().total(metric, rows)


class AsList(PlainSum):
    """A sum of the wrong shape, always."""

    def total(self, metric: Any, rows: Any) -> Any:
        return super().total(metric, rows).reshape(1, -1)


@pytest.mark.parametrize(
    "aggregator", [ReduceSum(), MeanTimesCount(), Threshold(), AsList()], ids=type
)
def test_an_aggregator_that_fails_on_few_rows_is_refused_under_add_remove(
    aggregator: PlainSum,
) -> None:
    """A region is released under add_remove whoever reported: an aggregator whose total
    fails, or is malformed, on no rows or one would publish that few reported."""
    with (
        Ledger.open(":memory:", policy(neighbouring="add_remove"), mode="create") as ledger,
        pytest.raises(InvalidInput, match="must sum any rows"),
    ):
        wrapper(ledger, {}, aggregator=aggregator)
    with Ledger.open(":memory:", policy(), mode="create") as ledger:
        wrapper(ledger, {}, aggregator=aggregator)  # replace: who reports is public


class Float32Sum(PlainSum):
    """A correct sum that rounds through float32 (it sums no rows to zeros)."""

    def total(self, metric: Any, rows: Any) -> Any:
        return super().total(metric, rows).astype(np.float32)


@pytest.mark.parametrize("aggregator", [PlainSum(), Float32Sum()], ids=type)
def test_no_refusal_shows_that_nobody_reported(fleet: Fleet, aggregator: PlainSum) -> None:
    """add_remove, neighbouring fleets: every north node offline, or one reporting. A region
    with no accepted rows is summed to zeros by the wrapper: every refusal flag and count
    is the same in both."""
    north = [i for i in range(N_NODES) if fleet.regions[int(fleet.client_region[i])] == "north"]
    records = []
    for offline in (north, north[1:]):
        grid = LocalGrid(make_client(fleet, bad=False), N_NODES, offline=tuple(offline))
        grid.activate()
        try:
            with Ledger.open(":memory:", policy(neighbouring="add_remove"), mode="create") as led:
                strategy = wrapper(led, regions_by_id(fleet, grid), aggregator=aggregator)
                arrays = ArrayRecord({"w": Array(np.zeros(2))})
                result = strategy.start(grid=grid, initial_arrays=arrays, num_rounds=1)
        finally:
            grid.deactivate()
        records.append(result.evaluate_metrics_clientapp[1])
    a, b = records
    flags = sorted(k for k in a if k.endswith("/refused") or k in ("released", "refused"))
    assert flags == sorted(k for k in b if k.endswith("/refused") or k in ("released", "refused"))
    assert [a[k] for k in flags] == [b[k] for k in flags]
    assert a["north/loss/refused"] == 0


# ------------------------------------------------- a loss that cannot be computed is the worst


def the_plan() -> RoundPlan:
    with Ledger.open(":memory:", exact(), mode="create") as ledger:
        return RoundPlan(1, 0, "1", wrapper(ledger, {}).plans)


@pytest.mark.parametrize(
    "loss",
    [np.array([np.nan, 1.0]), np.array([np.inf, 1.0]), np.zeros(0)],
    ids=["nan", "inf", "no-samples"],
)
def test_a_loss_that_cannot_be_computed_is_sent_as_the_clips_upper_end(
    fleet: Fleet, loss: Any
) -> None:
    """Never the best value (0 before): a diverged model does not read as a perfect one,
    and an infinite loss ranks with a huge finite one (both the clip's upper end)."""
    plan = the_plan()
    data = {**client_data(fleet, 0), "loss": loss}
    content = contributions(plan, data, data_for=regression_inputs(data))
    assert content["dpledger.scalars"]["loss"] == 3.4
    huge = {**data, "loss": np.array([1e9, 1.0])}
    sent = contributions(plan, huge, data_for=regression_inputs(huge))["dpledger.scalars"]
    assert sent["loss"] == 3.4  # the client's mean, clipped: the same as an infinite loss


def test_other_metrics_substitute_an_empty_clients_contribution() -> None:
    plan = the_plan()
    assert substitute(plan.metrics["errors"]).tolist() == [0.0] * 7
    assert not substitute(plan.metrics["confusion"]).any()


def two_rounds(
    path: Path, p: Policy, grid: LocalGrid, inner: Any, registry: Any, on_round: Any
) -> tuple[LedgerEvaluation, Any]:
    """Two evaluate rounds of ``inner`` wrapped on a new ledger at ``path``: the wrapper
    and Flower's Result."""
    with Ledger.open(path, p, mode="create") as ledger:
        strategy = LedgerEvaluation(inner, ledger, metrics=METRICS, params=PARAMS,
                                    registry=registry, on_round=on_round)  # fmt: skip
        grid.activate()
        try:
            result = strategy.start(grid=grid, initial_arrays=ArrayRecord(
                {"w": Array(np.zeros(2))}), num_rounds=2)  # fmt: skip
        finally:
            grid.deactivate()
    return strategy, result


def test_under_add_remove_a_query_registry_asks_once_so_a_later_dropout_stays_private(
    fleet: Fleet, tmp_path: Path
) -> None:
    """Review s35 F1: a QueryRegistry asked each newly sampled node in its round, so under
    add_remove a node silent in its first round left its region's planned cohort — its
    dropout published through ``selected``. The run's roster is now taken once, from every
    connected node, and a later silence is a private dropout. World 1 silences, after
    round 1, every node not asked to evaluate in round 1; the public sides agree."""
    p = policy(neighbouring="add_remove", eps="1", epoch="40")
    seen = []
    for k in (0, 1):
        grid = LocalGrid(make_client(fleet), N_NODES)
        asked: list[set[int]] = []

        def on_round(
            report: Any, grid: LocalGrid = grid, k: int = k, asked: list[set[int]] = asked
        ) -> None:
            asked.append({m.metadata.dst_node_id for m in grid.sent
                          if m.metadata.message_type == "evaluate"})  # fmt: skip
            if k == 1 and report.server_round == 1:
                grid.offline |= set(grid.node_ids) - asked[0]

        random.seed(11)  # FedAvg samples with the module-level generator
        inner = FedAvg(fraction_train=0.0, fraction_evaluate=0.5, min_available_nodes=N_NODES)
        registry = QueryRegistry(("partition-id",), region_of(fleet))
        strategy, result = two_rounds(tmp_path / f"{k}.db", p, grid, inner, registry, on_round)
        queries = [m for m in grid.sent if m.metadata.message_type == "query.dpledger_region"]
        assert len(queries) == N_NODES  # one registration exchange, with every node
        report = strategy.rounds[2]
        newly = asked[1] - asked[0]
        assert newly  # round 2 sampled nodes that round 1 did not
        dropped = sum(h.dropped for h in report.health.values())
        assert dropped == (len(newly) if k else 0)  # the operator sees the silence
        record = result.evaluate_metrics_clientapp[2]
        public = {key: v for key, v in record.items() if "/health/" in key
                  or key.endswith(("/refused", "/ci95"))}  # fmt: skip
        seen.append((public, report.unregistered,
                     {r: h.selected for r, h in report.health.items()}))  # fmt: skip
    assert seen[0] == seen[1]


def test_an_on_round_that_raises_is_logged_and_the_rounds_values_still_reach_flower(
    fleet: Fleet, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Review 39 (Flower): a raising ``on_round`` escaped ``aggregate_evaluate`` after the
    round had spent ε, so Flower's Result lacked the round and the run ended. Now it is
    logged and every round's MetricRecord is returned."""
    grid = LocalGrid(make_client(fleet, bad=False), N_NODES, offline=())
    inner = FedAvg(fraction_train=0.0, min_evaluate_nodes=N_NODES, min_available_nodes=N_NODES)

    def on_round(report: Any) -> None:
        raise RuntimeError(f"alert failed in round {report.server_round}")

    registry = StaticRegistry(regions_by_id(fleet, grid))
    with caplog.at_level("ERROR", logger="dpledger.flower"):
        strategy, result = two_rounds(tmp_path / "l.db", exact(), grid, inner, registry, on_round)
    assert sorted(strategy.rounds) == [1, 2]
    for r in (1, 2):
        record = result.evaluate_metrics_clientapp[r]
        assert record["released"] == len(strategy.rounds[r].releases) > 0
    raised = [x for x in caplog.records if "on_round raised" in x.getMessage()]
    assert len(raised) == 2
    assert all(x.exc_info is not None for x in raised)  # the callback's traceback is kept

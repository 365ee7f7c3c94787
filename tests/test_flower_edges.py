"""The Flower wrapper at its edges, found by an outside review: rounds nobody answers,
client data a metric cannot use, a second run on the same ledger, hostile region answers,
misconfiguration caught before round 1, and the published counts.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")  # read when flwr is imported
os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")

import numpy as np
import pytest

pytest.importorskip(
    "flwr", reason="the flower extra is not installed (pip install dpledger[flower])"
)

from flwr.app import Array, ArrayRecord, Context, Message
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import FedAvg
from test_flower import (
    METRICS,
    N_NODES,
    PARAMS,
    client_data,
    exact,
    policy,
    regions_by_id,
    regression_inputs,
    run,
)

from dpledger import Ledger, Release
from dpledger.errors import InvalidInput
from dpledger.flower import (
    LedgerEvaluation,
    PlainSum,
    QueryRegistry,
    StaticRegistry,
    answer_region_queries,
    contribution_reply,
    contributions,
)
from dpledger.flower.testing import LocalGrid
from dpledger.flower.wire import RoundPlan
from dpledger.metrics import DECLARATIONS
from dpledger.sim.demo import bounds_of
from dpledger.sim.fleet import Fleet, make_fleet


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return make_fleet(n_clients=N_NODES, regions=("north", "south"), n_classes=3,
                      scenarios=("label_skew",), seed=1)  # fmt: skip


def crashing_client() -> ClientApp:
    app = ClientApp()
    answer_region_queries(app)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        raise RuntimeError("every node crashes")

    return app


def client_with(fleet: Fleet, change: dict[int, dict[str, Any]]) -> ClientApp:
    """Honest clients; partition i's arrays updated by ``change[i]`` (its private data)."""
    app = ClientApp()
    answer_region_queries(app)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        pid = int(context.node_config["partition-id"])
        data = {**client_data(fleet, pid), **change.get(pid, {})}
        return contribution_reply(msg, data, data_for=regression_inputs(data))

    return app


# ---------------------------------------------------------------- rounds nobody answers


@pytest.mark.parametrize("neighbouring", ["replace", "add_remove"])
def test_a_round_where_every_node_fails_is_counted_and_the_run_goes_on(
    fleet: Fleet, tmp_path: Path, neighbouring: str
) -> None:
    p = policy(neighbouring=neighbouring, eps="1000", epoch="100000")
    with Ledger.open(tmp_path / "l.db", p, mode="create") as ledger:
        strategy, result, _ = run(fleet, ledger, rounds=2, client=crashing_client())
    assert sorted(strategy.rounds) == [1, 2]
    for report in strategy.rounds.values():
        for h in report.health.values():
            assert h.failed + h.dropped == h.selected
            assert h.reported == 0
        if neighbouring == "replace":  # nobody reported: nothing is sent to the ledger
            assert not report.releases
            assert report.not_released == len(report.outcomes) == 8
        else:  # the planned cohort is released whatever came back (sums of zero)
            assert len(report.releases) == 8
    assert result.evaluate_metrics_clientapp[2]["released"] == (0 if neighbouring == "replace"
                                                                else 8)  # fmt: skip


def test_a_round_where_every_node_is_offline_is_counted(fleet: Fleet, tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db", exact(), mode="create") as ledger:
        strategy, result, _ = run(fleet, ledger, rounds=1, offline=tuple(range(N_NODES)))
    h = strategy.rounds[1].health
    assert h["north"].dropped == h["north"].selected == 20
    assert result.evaluate_metrics_clientapp[1]["refused"] == 8
    assert not strategy.rounds[1].releases
    assert not (tmp_path / "l.db").exists()  # nothing released: no ledger was created


# ------------------------------------------------- reporting never depends on the data


def test_data_a_metric_cannot_use_sends_a_public_substitute_not_a_failure(
    fleet: Fleet, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two neighbouring fleets (replace): client 4's data differs only by an infinite loss
    and a label outside the classes. Every public key but the values is identical."""
    bad = client_data(fleet, 4)
    loss = bad["loss"].copy()
    loss[0] = np.inf
    labels = bad["y_true"].copy()
    labels[0] = 7  # 3 classes
    records = []
    for k, change in enumerate([{}, {4: {"loss": loss, "y_true": labels}}]):
        with (
            Ledger.open(tmp_path / f"{k}.db", exact(), mode="create") as ledger,
            caplog.at_level(logging.WARNING, logger="dpledger.flower"),
        ):
            strategy, result, _ = run(fleet, ledger, rounds=1, client=client_with(fleet, change),
                                      offline=())  # fmt: skip
        records.append(result.evaluate_metrics_clientapp[1])
        report = strategy.rounds[1]
        assert report.health["north"].reported == 20
        assert report.health["north"].failed == 0
        rel = report.outcomes[("north", "loss")]
        assert isinstance(rel, Release)
        assert rel.request.cohort == 20
    assert "public substitute" in caplog.text
    # a client logs under its own name, apart from the server's "dpledger.flower" lines
    assert {r.name for r in caplog.records if "public substitute" in r.getMessage()} == {
        "dpledger.flower.client"
    }
    assert "NaN or inf" in caplog.text
    a, b = records
    assert sorted(a) == sorted(b)
    for key in a:
        if "/health/" in key or key.endswith("/refused") or key in ("released", "refused"):
            assert a[key] == b[key], key
    loss_bounds = bounds_of(exact().metric("loss"))
    own = DECLARATIONS["clipped_loss"].contribute(client_data(fleet, 4), loss_bounds)[0][0]
    assert own < loss_bounds.high - 0.01  # client 4 counts as the worst loss in fleet B
    worse = (loss_bounds.high - own) / 20
    assert b["north/loss"] == pytest.approx(a["north/loss"] + worse, abs=1e-4)


def test_the_client_helper_raises_on_bad_data_only_when_asked(fleet: Fleet) -> None:
    plan = _plan()
    data = client_data(fleet, 0)
    data["loss"] = data["loss"].copy()
    data["loss"][0] = np.nan
    extra = regression_inputs(data)
    content = contributions(plan, data, data_for=extra)
    high = plan.metrics["loss"].bounds.high
    assert content["dpledger.scalars"]["loss"] == high  # a loss's substitute: the worst
    with pytest.raises(InvalidInput, match="NaN or inf"):
        contributions(plan, data, data_for=extra, on_bad_data="raise")
    with pytest.raises(InvalidInput, match="on_bad_data"):
        contributions(plan, data, data_for=extra, on_bad_data="ignore")  # type: ignore[arg-type]
    del data["loss"]  # the app's mistake, not the data's: always raises
    with pytest.raises(InvalidInput, match=r"reads \['loss'\]"):
        contributions(plan, data, data_for=extra)


def _plan() -> RoundPlan:
    p = exact()
    with Ledger.open(":memory:", p, mode="create") as ledger:
        strategy = LedgerEvaluation(FedAvg(), ledger, metrics=METRICS, params=PARAMS,
                                    registry=StaticRegistry({}))  # fmt: skip
        return RoundPlan(1, 0, p.version, strategy.plans)


# ------------------------------------------------------------ a second run, same ledger


def test_a_second_start_is_a_new_run_with_its_own_release_ids(fleet: Fleet, tmp_path: Path) -> None:
    """The model changed between runs (every loss 2.5): the second run releases it, it
    does not get the first run's values back as retries."""
    change: dict[int, dict[str, Any]] = {}
    grid = LocalGrid(client_with(fleet, change), N_NODES)
    registry = StaticRegistry(regions_by_id(fleet, grid))
    with Ledger.open(tmp_path / "l.db", exact(), mode="create") as ledger:
        inner = FedAvg(fraction_train=0.0, min_evaluate_nodes=N_NODES,
                       min_available_nodes=N_NODES)  # fmt: skip
        strategy = LedgerEvaluation(inner, ledger, metrics=METRICS, params=PARAMS,
                                    registry=registry, release_prefix="nightly")  # fmt: skip
        arrays = ArrayRecord({"w": Array(np.zeros(2))})
        grid.activate()
        try:
            first = strategy.start(grid=grid, initial_arrays=arrays, num_rounds=1)
            first_reports, first_tag = strategy.rounds, strategy.run_tag
            change.update({i: {"loss": np.full_like(client_data(fleet, i)["loss"], 2.5)}
                           for i in range(N_NODES)})  # fmt: skip
            second = strategy.start(grid=grid, initial_arrays=arrays, num_rounds=1)
        finally:
            grid.deactivate()
        ids = [e.draft.release_id for e in ledger.entries()]
    assert strategy.run_tag != first_tag
    assert strategy.rounds is not first_reports
    assert len(ids) == len(set(ids)) == 16
    assert all(i is not None and i.startswith("nightly/") for i in ids)
    assert abs(first.evaluate_metrics_clientapp[1]["north/loss"] - 2.5) > 0.1
    assert second.evaluate_metrics_clientapp[1]["north/loss"] == pytest.approx(2.5, abs=1e-3)


# ------------------------------------------------------------ hostile region answers


def test_a_region_answer_to_region_cannot_map_leaves_the_node_unregistered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    regions = ["north", "south"]

    def to_region(c: Any) -> str:
        return regions[c["partition-id"]]  # IndexError for a hostile id

    app = ClientApp()
    answer_region_queries(app)
    grid = LocalGrid(app, 3, node_configs=[
        {"partition-id": 0}, {"partition-id": 10**9}, {"partition-id": 1}])  # fmt: skip
    grid.activate()
    try:
        with caplog.at_level(logging.WARNING, logger="dpledger.flower"):
            got = QueryRegistry(("partition-id",), to_region).regions(grid.node_ids, grid)
    finally:
        grid.deactivate()
    a, b, c = grid.node_ids
    assert got == {a: "north", b: None, c: "south"}
    assert "IndexError" in caplog.text


# ------------------------------------------------ misconfiguration, before round 1


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: PlainSum(bits=3), "bits must be an integer"),
        (lambda: QueryRegistry(None), "keys is a list"),  # type: ignore[arg-type]
        (lambda: QueryRegistry(5), "keys is a list"),  # type: ignore[arg-type]
        (lambda: LocalGrid(ClientApp(), 0), "num_nodes"),
        (lambda: LocalGrid(ClientApp(), -1), "num_nodes"),
        (lambda: LocalGrid(ClientApp(), 3, offline=[99]), "offline"),
        (lambda: LocalGrid(ClientApp(), 3, offline=[True]), "offline"),
    ],
)
def test_bad_parts_are_typed_errors(make: Any, match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        make()


@pytest.mark.parametrize(
    ("metrics", "params", "match"),
    [  # a 9-number confusion metric computed by a 3-number declaration
        (
            {"confusion": "pooled_along_across_ratio"},
            {"confusion": {"error_bound": 10.0, "max_samples": 50.0}},
            "dimension 9",
        ),
        ({"confusion": "pooled_along_across_ratio"}, {}, "error_bound"),
        ({"errors": "coverage"}, {}, "cap must be 1"),  # a one-hot under a cap of 100
    ],
)
def test_a_declaration_of_the_wrong_size_is_refused_before_round_1(
    metrics: dict[str, str], params: dict[str, Any], match: str
) -> None:
    with (
        Ledger.open(":memory:", exact(), mode="create") as ledger,
        pytest.raises(InvalidInput, match=match),
    ):
        LedgerEvaluation(FedAvg(), ledger, metrics=metrics, params=params)


# ------------------------------------------------------------------ published counts


def test_released_and_refused_count_the_health_release_alike(fleet: Fleet, tmp_path: Path) -> None:
    # ε_eval 4 × 1 = 4: round 1's 2 regions × (loss + health) at ε 1 each fit one region's
    # budget only partly — confusion is not evaluated here, so loss and health compete
    p = policy(neighbouring="add_remove", eps="1", epoch="4", health=True)
    with Ledger.open(tmp_path / "l.db", p, mode="create") as ledger:
        strategy, result, _ = run(fleet, ledger, rounds=2, metrics={"loss": "clipped_loss"},
                                  health_metric="health")  # fmt: skip
    for r, report in strategy.rounds.items():
        record = result.evaluate_metrics_clientapp[r]
        ledger_side = len(report.releases) + report.not_released
        assert record["released"] + record["refused"] == ledger_side == 4
        assert record["refused"] == sum(
            1 for k, v in record.items() if k.endswith("/refused") and v == 1
        )
    assert result.evaluate_metrics_clientapp[2]["refused"] == 4  # the epoch is spent


def test_plain_sum_reads_a_value_within_the_rounding_slack_as_the_clip_edge() -> None:
    """Audit 5, F9: the grid now refuses values outside its clip beyond its own rounding
    allowance (up to its next grid point), which at 40 bits is narrower than the slack
    PlainSum.check allows: such a row passed the check and must still be summed (as the
    edge), not refused after the check."""
    from dpledger.flower.aggregation import ROUNDING_SLACK
    from dpledger.flower.wire import MetricPlan
    from dpledger.metrics.declarations import Bounds

    m = MetricPlan("loss", "clipped_loss", "scalar_mean", Bounds(low=0.0, high=3.4), None, {},
                   True)  # fmt: skip
    agg = PlainSum(bits=40)
    value = 3.4 * (1 + 0.9 * ROUNDING_SLACK)  # past the grid's next point, inside the slack
    assert value > agg.grid(m).accepted_range()[1]
    rows = np.array([[value], [1.0]])
    assert agg.check(m, rows) == [None, None]
    assert agg.total(m, rows).tobytes() == agg.total(m, np.array([[3.4], [1.0]])).tobytes()
    assert agg.check(m, np.array([[3.4 * (1 + 2 * ROUNDING_SLACK)]])) != [None]


def test_plain_sum_builds_each_grid_once_per_bounds_and_bits() -> None:
    """PlainSum.grid is asked twice per (region, metric) a round: it keeps each grid, and
    a metric with other bounds, or the same PlainSum with other bits, gets its own."""
    from dpledger.flower.wire import MetricPlan
    from dpledger.metrics.declarations import Bounds
    from dpledger.metrics.secure_sum import FixedPoint

    loss = MetricPlan("loss", "clipped_loss", "scalar_mean", Bounds(low=0.0, high=3.4), None,
                      {}, True)  # fmt: skip
    gap = MetricPlan("gap", "calibration_gap", "vector_sum", Bounds(cap=20.0, dimension=10),
                     None, {}, False)  # fmt: skip
    agg = PlainSum(bits=30)
    assert agg.grid(loss) is agg.grid(loss)
    assert agg.grid(loss) == FixedPoint(0.0, 3.4, 30)
    assert agg.grid(gap) == FixedPoint.for_cap(20.0, 30)
    agg.bits = 20
    assert agg.grid(loss) == FixedPoint(0.0, 3.4, 20)
    assert agg.grid(gap) == FixedPoint(-20.0, 20.0, 20)

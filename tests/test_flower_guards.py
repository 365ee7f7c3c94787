"""The Flower wrapper's guards found by review s33: a client's pinned bounds stay within
the plan's (else whether it is counted would depend on its data), the round's table keeps
add_remove's private counts for the operator, and a third-party aggregator that raises
costs one reply or one release, never the run."""

from __future__ import annotations

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

from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import FedAvg
from test_flower import METRICS, PARAMS, client_data, exact, policy, regression_inputs, run

from dpledger import Ledger, Release, Verdict
from dpledger.errors import InvalidInput
from dpledger.flower import (
    LedgerEvaluation,
    PlainSum,
    StaticRegistry,
    answer_region_queries,
    contribution_reply,
    contributions,
)
from dpledger.flower.report import NotReleased
from dpledger.flower.wire import MetricPlan, RoundPlan
from dpledger.metrics.declarations import Bounds
from dpledger.sim.fleet import Fleet, make_fleet

N_NODES = 40  # test_flower's run() serves 40 nodes


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return make_fleet(n_clients=N_NODES, regions=("north", "south"), n_classes=3,
                      scenarios=("label_skew",), seed=1)  # fmt: skip


def the_plan() -> RoundPlan:
    p = exact()
    with Ledger.open(":memory:", p, mode="create") as ledger:
        strategy = LedgerEvaluation(FedAvg(), ledger, metrics=METRICS, params=PARAMS,
                                    registry=StaticRegistry({}))  # fmt: skip
        return RoundPlan(1, 0, p.version, strategy.plans)


# ------------------------------------------------------------------ pinned bounds


@pytest.mark.parametrize(
    ("metric", "pinned", "named"),
    [
        ("loss", Bounds(low=0.0, high=5.0), "high 5.0 above the plan's 3.4"),
        ("loss", Bounds(low=-1.0, high=3.0), "low -1.0 below the plan's 0.0"),
        ("loss", Bounds(), "high None above"),
        ("errors", Bounds(cap=200.0, edges=(0.5, 1.0, 2.0, 5.0, 10.0, 25.0)), "cap 200.0"),
        ("errors", Bounds(cap=50.0, edges=(0.5, 1.0, 2.0, 5.0, 10.0, 25.0)), "cap 50.0"),
        ("errors", Bounds(cap=100.0, edges=(0.5, 1.0, 2.0)), "3 edges, the plan has 6"),
        ("regression", Bounds(cap=5.0, dimension=5), "cap 5.0, the plan's is 10.0"),
        ("loss", {"low": 0.0, "high": 1.0}, "must be a Bounds, got dict"),
        ("loss", None, "must be a Bounds, got NoneType"),
    ],
)
def test_pinned_bounds_that_do_not_fit_the_plan_raise(
    fleet: Fleet, metric: str, pinned: Any, named: str
) -> None:
    """Wider room, or another cap (a codec metric such as the regression measures is
    decoded with the plan's cap: a client pinning half of it had its values halved)."""
    data = client_data(fleet, 0)
    with pytest.raises(InvalidInput, match=named):
        contributions(the_plan(), data, data_for=regression_inputs(data), bounds={metric: pinned})


def test_pinned_bounds_within_the_plan_are_used(fleet: Fleet) -> None:
    data = client_data(fleet, 0)
    data["loss"] = np.full(10, 3.0)
    narrow = {"loss": Bounds(low=0.0, high=2.0)}
    content = contributions(the_plan(), data, data_for=regression_inputs(data), bounds=narrow)
    assert content["dpledger.scalars"]["loss"] == 2.0  # clipped at the pinned 2.0


def client_where(fleet: Fleet, pid: int, loss: float, bounds: Any = None) -> ClientApp:
    """Honest clients, but client ``pid``'s per-sample loss is ``loss`` (its private data)
    and its module pins ``bounds`` (name -> Bounds), if given."""
    app = ClientApp()
    answer_region_queries(app)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        me = int(context.node_config["partition-id"])
        data = client_data(fleet, me)
        if me != pid:
            return contribution_reply(msg, data, data_for=regression_inputs(data))
        data = {**data, "loss": np.full(len(data["loss"]), loss)}
        return contribution_reply(msg, data, data_for=regression_inputs(data), bounds=bounds)

    return app


def test_a_client_pinning_wider_bounds_is_counted_alike_whatever_its_data(
    fleet: Fleet, tmp_path: Path
) -> None:
    """Neighbouring fleets under replace (client 4's loss 1.0 or 4.0, past the plan's clip):
    the published record is the same but for the released values (before: rejected only
    when its loss passed 3.4, and the exact health counts said so)."""
    records = []
    wide = {"loss": Bounds(low=0.0, high=5.0)}
    for k, loss in enumerate((1.0, 4.0)):
        with Ledger.open(tmp_path / f"{k}.db", exact(), mode="create") as ledger:
            client = client_where(fleet, 4, loss, wide)
            strategy, result, _ = run(fleet, ledger, rounds=1, client=client, offline=())
        north = strategy.rounds[1].health["north"]
        assert (north.failed, north.rejected) == (1, 0)  # its ClientApp raised: an error reply
        records.append(result.evaluate_metrics_clientapp[1])
    a, b = records
    assert sorted(a) == sorted(b)
    for key in a:
        if "/health/" in key or key.endswith("/refused") or key in ("released", "refused"):
            assert a[key] == b[key], key


# ------------------------------------------------------------------ the round's table


@pytest.mark.parametrize("neighbouring", ["replace", "add_remove"])
def test_the_table_shows_exact_counts_under_add_remove_only_to_the_operator(
    fleet: Fleet, tmp_path: Path, neighbouring: str
) -> None:
    add_remove = neighbouring == "add_remove"
    p = policy(neighbouring=neighbouring, eps="1000", epoch="100000", health=add_remove)
    with Ledger.open(tmp_path / "l.db", p, mode="create") as ledger:
        kw = {"health_metric": "health"} if add_remove else {}
        strategy, _, _ = run(fleet, ledger, rounds=1, **kw)
    report = strategy.rounds[1]
    h = report.health["north"]
    exact_line = f"reported {h.reported}, failed {h.failed}, dropped {h.dropped}"
    assert exact_line in report.table(operator=True)
    if not add_remove:
        assert exact_line in report.table()
        assert f"'north': ({h.selected}, {h.reported}, {h.failed}, " in repr(report)
        return
    shown = report.table()
    assert "health (noisy counts)" in shown
    for private in (exact_line, f"failed {h.failed}", f"dropped {h.dropped}", "rejected"):
        assert private not in shown
    assert f"north: selected {h.selected} (who reported is private" in shown
    said = repr(report)  # what on_round=print or a log line shows
    assert "reported" not in said
    assert f"selected={{'north': {h.selected}, 'south': " in said


# ------------------------------------------------------- a third-party aggregator that raises


class Brittle(PlainSum):
    """A secure-sum stand-in that fails on one odd share (a loss of exactly 2.5), and whose
    total fails for one region's histogram."""

    def check(self, metric: MetricPlan, rows: Any) -> list[str | None]:
        if metric.scalar and bool((np.asarray(rows) == 2.5).any()):
            raise ValueError("share 2.5 failed to unmask")  # its text must not be shown
        return super().check(metric, rows)

    def total(self, metric: MetricPlan, rows: Any) -> Any:
        if metric.metric == "errors" and self.totals_to_fail:
            self.totals_to_fail -= 1
            raise ValueError("could not unmask the total")
        return super().total(metric, rows)

    totals_to_fail = 0


def test_an_aggregator_check_that_raises_rejects_that_reply_alone(
    fleet: Fleet, tmp_path: Path
) -> None:
    with Ledger.open(tmp_path / "l.db", exact(), mode="create") as ledger:
        client = client_where(fleet, 5, 2.5)
        strategy, result, _ = run(fleet, ledger, rounds=1, client=client, offline=(),
                                  aggregator=Brittle())  # fmt: skip
    report = strategy.rounds[1]
    assert report.health["north"].rejected == 1
    assert report.health["north"].reported == 19
    (odd,) = [n for n in report.nodes if n.status == "rejected"]
    assert "the aggregator's check failed (ValueError)" in odd.reason
    assert "2.5" not in odd.reason
    assert result.evaluate_metrics_clientapp[1]["released"] == 8


def test_an_aggregator_total_that_raises_releases_the_rest_and_spends_nothing_for_it(
    fleet: Fleet, tmp_path: Path
) -> None:
    brittle = Brittle()
    brittle.totals_to_fail = 1  # the first region's (north's) histogram
    with Ledger.open(tmp_path / "l.db", exact(), mode="create") as ledger:
        strategy, result, _ = run(fleet, ledger, rounds=1, offline=(), aggregator=brittle)
        report = strategy.rounds[1]
        failed = report.outcomes[("north", "errors")]
        assert isinstance(failed, NotReleased)
        assert "the aggregator's total failed (ValueError): not released" in failed.reason
        assert "unmask" not in failed.reason
        released = [k for k, o in report.outcomes.items() if isinstance(o, Release)]
        assert len(released) == 7
        assert {(e.draft.region, e.draft.metric) for e in ledger.entries()} == set(released)
    assert result.evaluate_metrics_clientapp[1]["released"] == 7


class Tupled(PlainSum):
    """An aggregator whose check answers a tuple of verdicts (any sequence will do)."""

    def check(self, metric: MetricPlan, rows: Any) -> list[str | None]:
        return tuple(super().check(metric, rows))  # type: ignore[return-value]


def test_an_aggregator_check_answering_a_tuple_is_read_as_its_verdicts(
    fleet: Fleet, tmp_path: Path
) -> None:
    with Ledger.open(tmp_path / "l.db", exact(), mode="create") as ledger:
        strategy, result, _ = run(fleet, ledger, rounds=1, aggregator=Tupled())
    north = strategy.rounds[1].health["north"]
    # test_flower's clients: one crashes, one is offline, two are malformed or stale
    assert (north.reported, north.failed, north.dropped, north.rejected) == (16, 1, 1, 2)
    assert result.evaluate_metrics_clientapp[1]["released"] == 8


class Unmasked:
    """A total whose conversion to numbers fails, quoting a share (an autograd tensor's can)."""

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise RuntimeError("cannot convert: share 2.5 from node 7")


class Opaque(PlainSum):
    """North's histogram total is an object numpy cannot read; its check answers a list of
    arrays for the loss (no verdicts: every comparison with None is ambiguous)."""

    def total(self, metric: MetricPlan, rows: Any) -> Any:
        if metric.metric == "errors" and not self.done:
            self.done = True
            return Unmasked()
        return super().total(metric, rows)

    def check(self, metric: MetricPlan, rows: Any) -> list[str | None]:
        if metric.metric == "loss" and len(rows) > 1:
            return [np.zeros(2)] * len(rows)  # type: ignore[list-item]
        return super().check(metric, rows)

    done = False


def test_an_unreadable_total_and_a_verdictless_check_end_neither_round_nor_run(
    fleet: Fleet, tmp_path: Path
) -> None:
    """The ledger refuses the unreadable total as its own Verdict (the rest released); the
    check is asked again row by row. Nothing quotes the aggregator's text."""
    with Ledger.open(tmp_path / "l.db", exact(), mode="create") as ledger:
        strategy, result, _ = run(fleet, ledger, rounds=1, offline=(), aggregator=Opaque())
    report = strategy.rounds[1]
    refused = report.outcomes[("north", "errors")]
    assert isinstance(refused, Verdict)
    assert [c.name for c in refused.failures] == ["aggregate_dtype"]
    assert "RuntimeError" in refused.summary()
    assert "node 7" not in report.table(operator=True)
    assert result.evaluate_metrics_clientapp[1]["released"] == 7
    north = report.health["north"]
    assert (north.reported, north.rejected) == (17, 2)  # a crash, a malformed and a stale

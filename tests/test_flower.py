"""The Flower wrapper in a real Flower evaluate loop, in process (no Ray): dpledger.flower.

A ``LocalGrid`` runs a real ClientApp for every node; ``FedAvg.start`` drives the rounds;
``LedgerEvaluation`` sorts the replies, sums them and releases through a real SQLite
ledger. Nodes are clients of a seeded synthetic fleet (label-skewed, two regions);
planted among them: a crashing client, a malformed reply (a loss beyond its clip), a
client with stale histogram edges and a node that never answers.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")  # read when flwr is imported
os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")

import numpy as np
import pytest

pytest.importorskip(
    "flwr", reason="the flower extra is not installed (pip install dpledger[flower])"
)

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.clientapp.mod import LocalDpMod
from flwr.serverapp.strategy import FedAvg, Result

from dpledger import Ledger, Policy, Release, ReleaseRequest, Verdict
from dpledger import mechanisms as mech
from dpledger.errors import InvalidInput
from dpledger.flower import (
    LedgerEvaluation,
    QueryRegistry,
    StaticRegistry,
    answer_region_queries,
    contribution_reply,
)
from dpledger.flower.report import DROPPED_CI95_FACTOR, dropped_ci95
from dpledger.flower.testing import LocalGrid
from dpledger.ledger.derived import release_confusion
from dpledger.metrics import (
    DECLARATIONS,
    classification_metrics,
    confusion_matrix,
    participant_weighted_classification,
    participant_weighted_regression,
    regression_measures,
    regression_metrics,
)
from dpledger.metrics.declarations import Bounds
from dpledger.metrics.secure_sum import FixedPoint, exact_sum
from dpledger.sim.demo import bounds_of
from dpledger.sim.fleet import Fleet, make_fleet

logging.getLogger("flwr").setLevel(logging.WARNING)  # Flower logs every round's record

N_NODES = 40
CRASH, MALFORMED, STALE_EDGES, OFFLINE = 0, 1, 2, 3  # partition ids (north, the first half)
BAD = {CRASH, MALFORMED, STALE_EDGES, OFFLINE}
EDGES = [0.5, 1.0, 2.0, 5.0, 10.0, 25.0]
PARAMS = {
    "confusion": {"n_classes": 3},
    "regression": {"y_bounds": [40.0, 160.0], "residual_bound": 50.0, "max_samples": 100.0},
}
METRICS = {
    "loss": "clipped_loss",
    "errors": "error_histogram",
    "confusion": "confusion_matrix",
    "regression": "regression_measures",
}
POLICY = """
name = "flower-test"
version = "1"
neighbouring = "{neighbouring}"
epoch_epsilon = "{epoch}"
rounds_per_epoch = 3
allocation = "pooled"

[regions]
names = ["north", "south"]

[metrics.loss]
kind = "scalar_mean"
epsilon = "{eps}"
clip = {{ low = "0", high = "3.4", source = "test" }}

[metrics.errors]
kind = "histogram"
epsilon = "{eps}"
edges = [0.5, 1.0, 2.0, 5.0, 10.0, 25.0]
edges_version = "abs-error-m/v1"
cap_per_client = "100"

[metrics.confusion]
kind = "vector_sum"
epsilon = "{eps}"
dimension = 9
cap_per_client = "100"
nonnegative = true

[metrics.regression]
kind = "vector_sum"
epsilon = "{eps}"
dimension = 5
cap_per_client = "10"
nonnegative = false
{extra}"""
HEALTH = """
[metrics.health]
kind = "vector_sum"
epsilon = "{eps}"
dimension = 3
cap_per_client = "1"
nonnegative = true
"""


def policy(
    *, neighbouring: str = "replace", eps: str = "0.05", epoch: str = "1.6", health: bool = False
) -> Policy:
    """ε per release ``eps``; ε_eval = epoch / 4 (0.4 by default: two rounds of 4 × 0.05 fit)."""
    extra = HEALTH.format(eps=eps) if health else ""
    text = POLICY.format(neighbouring=neighbouring, eps=eps, epoch=epoch, extra=extra)
    return Policy.from_toml(text, source="test_flower.py")


def exact() -> Policy:
    """Noise far below every figure compared (scale ≈ 1e-4 of a count)."""
    return policy(eps="1000000", epoch="100000000")


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return make_fleet(n_clients=N_NODES, regions=("north", "south"), n_classes=3,
                      scenarios=("label_skew",), seed=1)  # fmt: skip


def client_data(fleet: Fleet, i: int) -> dict[str, np.ndarray]:
    """Client i's per-sample arrays (what its model evaluation produced)."""
    ext = np.append(fleet.offsets, fleet.n_samples)
    s = slice(int(ext[i]), int(ext[i + 1]))
    return {
        "loss": fleet.loss[s], "along": fleet.along[s], "across": fleet.across[s],
        "y_true": fleet.y_true[s], "y_pred": fleet.y_pred[s],
        "y_reg": fleet.y_reg[s], "y_reg_pred": fleet.y_reg_pred[s],
    }  # fmt: skip


def regression_inputs(data: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """The regression declaration reads y_true/y_pred too: give it the regression pair."""
    return {"regression": {"y_true": data["y_reg"], "y_pred": data["y_reg_pred"]}}


def make_client(fleet: Fleet, *, dp_on_training: bool = False, bad: bool = True) -> ClientApp:
    app = ClientApp()
    answer_region_queries(app)

    train_mods = [LocalDpMod(1.0, 1.0, 1.0, 1e-5)] if dp_on_training else []

    @app.train(mods=train_mods)
    def train(msg: Message, context: Context) -> Message:
        w = msg.content["arrays"]["w"].numpy() + 0.5  # one "training step"
        return Message(RecordDict({"arrays": ArrayRecord({"w": Array(w)}), "metrics":
                                   MetricRecord({"num-examples": 1, "loss": 0.5})}),
                       reply_to=msg)  # fmt: skip

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        pid = int(context.node_config["partition-id"])
        data = client_data(fleet, pid)
        extra = regression_inputs(data)
        if not bad:
            return contribution_reply(msg, data, data_for=extra)
        if pid == CRASH:
            raise RuntimeError("the model ran out of memory")
        if pid == MALFORMED:  # a client that "forgot" to clip its loss
            reply = contribution_reply(msg, data, data_for=extra)
            reply.content["dpledger.scalars"]["loss"] = 99.0
            return reply
        if pid == STALE_EDGES:  # an old metric module with its own, older edges
            old = Bounds(cap=100.0, edges=(1.0, 2.0, 3.0, 4.0, 5.0, 6.0), dimension=7)
            return contribution_reply(msg, data, data_for=extra, bounds={"errors": old},
                                      edges_versions={"errors": "abs-error-m/v0"})  # fmt: skip
        return contribution_reply(msg, data, data_for=extra)

    return app


class RecordingLedger(Ledger):
    """A real ledger that also keeps every round's (request, aggregate) items."""

    items: list[tuple[ReleaseRequest, Any]]

    def release_round(self, items: Sequence[tuple[ReleaseRequest, object]], **kw: Any) -> Any:
        self.__dict__.setdefault("items", []).extend(items)
        return super().release_round(items, **kw)


def region_of(fleet: Fleet) -> Any:
    return lambda cfg: fleet.regions[int(fleet.client_region[int(cfg["partition-id"])])]


def regions_by_id(fleet: Fleet, grid: LocalGrid) -> dict[int, str]:
    """The operator's registry: each node's region, known on the server side."""
    return {n: fleet.regions[int(fleet.client_region[i])] for i, n in enumerate(grid.node_ids)}


def run(
    fleet: Fleet,
    ledger: Ledger,
    *,
    rounds: int = 3,
    client: ClientApp | None = None,
    metrics: dict[str, str] | None = None,
    fraction_train: float = 0.0,
    offline: Sequence[int] = (OFFLINE,),
    **kw: Any,
) -> tuple[LedgerEvaluation, Result, LocalGrid]:
    grid = LocalGrid(client or make_client(fleet), N_NODES, offline=offline)
    grid.activate()
    inner = FedAvg(fraction_train=fraction_train, min_train_nodes=1, min_evaluate_nodes=N_NODES,
                   min_available_nodes=N_NODES)  # fmt: skip
    kw.setdefault("registry", StaticRegistry(regions_by_id(fleet, grid)))
    strategy = LedgerEvaluation(inner, ledger, metrics=metrics or METRICS,
                                params={k: v for k, v in PARAMS.items()
                                        if k in (metrics or METRICS)}, **kw)  # fmt: skip
    arrays = ArrayRecord({"w": Array(np.zeros(2))})
    try:
        result = strategy.start(grid=grid, initial_arrays=arrays, num_rounds=rounds)
    finally:
        grid.deactivate()
    return strategy, result, grid


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    return tmp_path / "flower.db"


def reporters(fleet: Fleet, region: str) -> list[int]:
    return [i for i in fleet.client_range(region) if i not in BAD]


# ------------------------------------------------------------------------------- rounds


def test_three_rounds_sort_every_reply_and_publish_only_public_keys(
    fleet: Fleet, ledger_path: Path
) -> None:
    with Ledger.open(ledger_path, exact(), mode="create") as ledger:
        strategy, result, _ = run(fleet, ledger)
    assert sorted(strategy.rounds) == [1, 2, 3]
    assert sorted(result.evaluate_metrics_clientapp) == [1, 2, 3]
    for r, report in strategy.rounds.items():
        north, south = report.health["north"], report.health["south"]
        assert (north.selected, north.reported, north.failed, north.dropped, north.rejected) == (
            20, 16, 1, 1, 2)  # fmt: skip
        assert (south.selected, south.reported, south.failed + south.dropped + south.rejected) == (
            20, 20, 0)  # fmt: skip
        why = {s.node_id: s.reason for s in report.nodes if s.status == "rejected"}
        assert any("outside its clip" in w for w in why.values())
        assert any("abs-error-m/v0" in w for w in why.values())
        assert len(report.releases) == 8
        assert not report.refusals
        record = result.evaluate_metrics_clientapp[r]
        assert record["north/health/rejected"] == 2
        assert record["north/health/failed"] == 1
        assert record["epoch"] == 0
        assert record["north/loss/refused"] == 0
        rel = report.outcomes[("north", "loss")]
        assert isinstance(rel, Release)
        assert rel.request.cohort == 16
        assert record["north/loss"] == pytest.approx(rel.value)
        hist = report.outcomes[("north", "errors")]
        assert isinstance(hist, Release)
        assert record["north/errors"] == list(hist.value)
        allowed = ("/ci95", "/refused", "/unusable", "/ci95-low", "/ci95-high", "/health/")
        for key in record:
            if key in ("epoch", "released", "refused"):
                continue
            region, metric, *rest = key.split("/")
            assert region in ("north", "south"), key
            assert metric in {*METRICS, "health"}, key
            assert not rest or any(a in key for a in allowed) or metric in (
                "confusion", "regression"), key  # fmt: skip


def test_a_crash_and_malformed_replies_are_counted_and_the_run_goes_on(
    fleet: Fleet, ledger_path: Path
) -> None:
    # FedAvg alone ends the run on one reply that does not match the others' keys
    with Ledger.open(ledger_path, exact(), mode="create") as ledger:
        strategy, result, grid = run(fleet, ledger, rounds=1)
    report = strategy.rounds[1]
    failed = [s for s in report.nodes if s.status == "failed"]
    assert len(failed) == 1
    assert "out of memory" in failed[0].reason
    assert [s.status for s in report.nodes if s.node_id == grid.node_ids[OFFLINE]] == ["dropped"]
    assert result.evaluate_metrics_clientapp[1]["released"] == 8


def test_budget_exhaustion_is_refused_in_a_later_round(fleet: Fleet, ledger_path: Path) -> None:
    p = policy()  # ε_eval 0.4: two rounds of 4 × 0.05 per region fit, the third does not
    with Ledger.open(ledger_path, p, mode="create") as ledger:
        strategy, result, _ = run(fleet, ledger)
        assert ledger.spent(0, "north").amount == p.eval_budget  # two rounds of 4 × 0.05
        assert ledger.spent(0, "south").amount == p.eval_budget
    assert not strategy.rounds[1].refusals
    assert not strategy.rounds[2].refusals
    third = strategy.rounds[3]
    assert len(third.refusals) == 8
    assert not third.releases
    assert all(v.failures[0].name == "budget" for v in third.refusals)
    record = result.evaluate_metrics_clientapp[3]
    assert record["refused"] == 8
    assert record["north/loss/refused"] == 1
    assert "north/loss" not in record
    assert "north/loss/ci95" not in record


def ledger_bytes(path: Path) -> dict[str, bytes]:
    """The ledger's database and write-ahead log, byte for byte (-shm is only an index)."""
    return {p.name: p.read_bytes() for p in sorted(path.parent.glob(path.name + "*"))
            if not p.name.endswith("-shm")}  # fmt: skip


def test_refused_rounds_and_read_backs_leave_the_ledger_byte_identical(
    fleet: Fleet, ledger_path: Path
) -> None:
    after: dict[int, dict[str, bytes]] = {}

    def snapshot(report: Any) -> None:
        after[report.server_round] = ledger_bytes(ledger_path)

    p = policy()  # rounds 1 and 2 spend the epoch's evaluation budget, round 3 is refused
    with RecordingLedger.open(ledger_path, p, mode="create") as ledger:
        strategy, _, _ = run(fleet, ledger, on_round=snapshot)
        assert len(strategy.rounds[3].refusals) == 8
        assert after[3] == after[2]  # a refused round writes nothing
        # the FLAM metrics of a committed confusion release are read back (a retry of its id)
        committed = [(q, a) for q, a in ledger.items
                     if q.metric == "confusion" and q.release_id.split("/")[2] == "r1"]  # fmt: skip
        assert committed
        for req, agg in committed:
            again = release_confusion(ledger, req, agg)
            assert isinstance(again.release, Release)
            assert again.release.entry_id == strategy.rounds[1].outcomes[
                (req.region, "confusion")].entry_id  # fmt: skip
        assert ledger_bytes(ledger_path) == after[3]
        assert ledger.verify().ok


def test_released_values_equal_direct_ledger_use_on_the_same_sums(
    fleet: Fleet, tmp_path: Path
) -> None:
    p = exact()
    with RecordingLedger.open(tmp_path / "wrapped.db", p, mode="create") as ledger:
        strategy, _, _ = run(fleet, ledger, rounds=1)
        items = ledger.items
    report = strategy.rounds[1]
    for region in ("north", "south"):
        clients = reporters(fleet, region)
        for metric, declaration in METRICS.items():
            spec = p.metric(metric)
            rows = np.vstack([
                DECLARATIONS[declaration].contribute(
                    client_data(fleet, i) | regression_inputs(client_data(fleet, i)).get(metric, {}),  # noqa: E501
                    bounds_of(spec), **PARAMS.get(metric, {}))
                for i in clients
            ])  # fmt: skip
            grid = (FixedPoint(0.0, 3.4) if spec.kind == "scalar_mean"
                    else FixedPoint.for_cap(float(spec.cap_per_client or 0)))  # fmt: skip
            direct = exact_sum(rows, grid)
            ((req, agg),) = [(q, a) for q, a in items if (q.region, q.metric) == (region, metric)]
            assert np.array_equal(np.asarray(agg).reshape(-1), direct.reshape(-1))
            assert req.cohort == len(clients)
            assert req.epoch == 0
            with Ledger.open(tmp_path / f"direct-{region}-{metric}.db", p, mode="create") as lg:
                mine = lg.release(req.model_copy(update={"release_id": None}), direct)
            mine = mine.with_aggregate_error(grid.sum_error(req.cohort))  # the wrapper's bound
            theirs = report.outcomes[(region, metric)]
            assert isinstance(theirs, Release)
            assert (theirs.charge, theirs.scale, theirs.error_bar) == (
                mine.charge, mine.scale, mine.error_bar)  # fmt: skip
            np.testing.assert_allclose(theirs.value, mine.value, rtol=0, atol=60 * mine.scale)


def test_flam_metrics_are_exact_where_the_participant_weighted_average_is_not(
    fleet: Fleet, ledger_path: Path
) -> None:
    with Ledger.open(ledger_path, exact(), mode="create") as ledger:
        strategy, result, _ = run(fleet, ledger, rounds=1)
    record = result.evaluate_metrics_clientapp[1]
    for region in ("north", "south"):
        clients = reporters(fleet, region)
        ext = np.append(fleet.offsets, fleet.n_samples)
        idx = np.concatenate([np.arange(ext[i], ext[i + 1]) for i in clients])
        offsets = np.cumsum([0] + [int(ext[i + 1] - ext[i]) for i in clients])[:-1]
        yt, yp = fleet.y_true[idx], fleet.y_pred[idx]
        central = classification_metrics(confusion_matrix(yt, yp, n_classes=3), labels="all")
        naive = participant_weighted_classification(yt, yp, n_classes=3, offsets=offsets)
        released = record[f"{region}/confusion/f1_macro"]
        assert released == pytest.approx(central["f1_macro"], abs=1e-3)
        assert abs(naive["f1_macro"] - central["f1_macro"]) > 0.05
        assert record[f"{region}/confusion/f1_macro/ci95-low"] <= released
        y, yhat = fleet.y_reg[idx], fleet.y_reg_pred[idx]
        central_r2 = regression_metrics(regression_measures(y, yhat, shift=100.0))["r2"]
        naive_r2 = participant_weighted_regression(y, yhat, offsets=offsets)["r2"]
        assert record[f"{region}/regression/r2"] == pytest.approx(central_r2, abs=1e-3)
        assert abs(naive_r2 - central_r2) > 0.05
        derived = strategy.rounds[1].derived[(region, "regression")]
        assert derived.metrics["r2"] == record[f"{region}/regression/r2"]


def test_the_round_table_carries_the_derived_notes(fleet: Fleet, ledger_path: Path) -> None:
    """The round's table printed each derived release's rows without their notes (how the
    estimates were made; which intervals are measured rather than proven; how many metrics
    are unusable, never to be published): pasted into a review, the caveats were lost."""
    with Ledger.open(ledger_path, exact(), mode="create") as ledger:
        strategy, _, _ = run(fleet, ledger, rounds=1)
    report = strategy.rounds[1]
    table = report.table()
    caveats = {c.strip() for d in report.derived.values() for c in d.caveats()}
    assert caveats  # the projection line at least
    assert "notes on the derived metrics:" in table
    tail = table.split("notes on the derived metrics:")[1]
    for c in caveats:  # each once, after every region
        assert table.count(c) == 1
        assert c in tail
    for d in report.derived.values():
        for line in d.notes():
            assert line.strip() in table
        assert d.table().splitlines()[1:] == [*d.rows(), *d.notes()]
    # a table showing some metrics: the caveats and counts of those alone
    d = next(iter(report.derived.values()))
    shown = [next(iter(d.metrics))]
    narrow = report.table(derived=shown)
    assert all(line.strip() in narrow for line in d.notes(shown))
    assert d.caveats(shown)[0] == d.caveats()[0]  # how estimates were made: always


# ------------------------------------------------------------------ add_remove health


def test_add_remove_keeps_counts_with_the_operator_and_releases_on_the_planned_cohort(
    fleet: Fleet, ledger_path: Path
) -> None:
    p = policy(neighbouring="add_remove", eps="1", epoch="40")
    with Ledger.open(ledger_path, p, mode="create") as ledger:
        strategy, result, _ = run(fleet, ledger, rounds=1)
    report = strategy.rounds[1]
    record = result.evaluate_metrics_clientapp[1]
    assert report.health["north"].reported == 16  # the operator sees the exact counts
    assert record["north/health/selected"] == 20
    for name in ("reported", "failed", "dropped", "rejected"):
        assert f"north/health/{name}" not in record
    rel = report.outcomes[("north", "loss")]
    assert isinstance(rel, Release)
    assert rel.request.cohort == 20


def test_add_remove_decisions_do_not_depend_on_who_reported(fleet: Fleet, tmp_path: Path) -> None:
    # the loss's cohort floor is 19 (ci95 of the mean ≤ 0.55 at ε = 1, Δ = 3.4): the 20
    # selected nodes of north clear it, its 16 (or 13) reporters would not
    text = POLICY.format(neighbouring="add_remove", eps="1", epoch="40", extra="")
    text = text.replace('source = "test" }', 'source = "test" }\ntarget = 0.55', 1)
    p = Policy.from_toml(text, source="test_flower.py")
    seen = []
    for k, offline in enumerate([(OFFLINE,), (OFFLINE, 4, 5, 6)]):  # neighbouring fleets
        with Ledger.open(tmp_path / f"{k}.db", p, mode="create") as ledger:
            strategy, result, _ = run(fleet, ledger, rounds=1, offline=offline)
        report = strategy.rounds[1]
        assert report.health["north"].reported == 16 - 3 * k  # the operator sees the truth
        record = result.evaluate_metrics_clientapp[1]
        decisions = {key: (type(o).__name__, o.request.cohort if isinstance(o, Release) else 0)
                     for key, o in report.outcomes.items()}  # fmt: skip
        # which derived metrics are usable is post-processing of the noisy release: not compared
        public = sorted(k for k in record if k.count("/") < 2 or k.split("/")[2] in
                        ("ci95", "refused") or k.split("/")[1] == "health")  # fmt: skip
        seen.append((decisions, public, record["north/health/selected"]))
    assert seen[0] == seen[1]
    assert seen[0][0][("north", "loss")] == ("Release", 20)


def test_a_tight_pooled_budget_refuses_a_metric_before_the_health_count(
    fleet: Fleet, ledger_path: Path
) -> None:
    """Review s35 F4: a region's health release was queued after its metrics, so a pooled
    budget with room for one release spent it on the loss, refused the count, and the
    paid-for mean over reporters was unusable ("no noisy count"). The count goes first."""
    p = policy(neighbouring="add_remove", eps="0.05", epoch="0.2", health=True)  # one fits
    with Ledger.open(ledger_path, p, mode="create") as ledger:
        strategy, _, _ = run(fleet, ledger, rounds=1, health_metric="health")
        charged = {(e.draft.region, e.draft.metric) for e in ledger.entries()}
    report = strategy.rounds[1]
    assert charged == {("north", "health"), ("south", "health")}
    assert all(isinstance(report.health_releases[r], Release) for r in ("north", "south"))
    assert isinstance(report.outcomes[("north", "loss")], Verdict)


def test_add_remove_health_metric_releases_noisy_counts_through_the_ledger(
    fleet: Fleet, ledger_path: Path
) -> None:
    p = policy(neighbouring="add_remove", eps="1000", epoch="40000", health=True)
    with Ledger.open(ledger_path, p, mode="create") as ledger:
        strategy, result, _ = run(fleet, ledger, rounds=1, health_metric="health")
        charged = ledger.entries(metric="health")
    report = strategy.rounds[1]
    record = result.evaluate_metrics_clientapp[1]
    assert {e.draft.region for e in charged} == {"north", "south"}
    assert all(e.draft.charge.amount == p.release_budget("health") for e in charged)
    hr = report.health_releases["north"]
    assert isinstance(hr, Release)
    assert hr.request.cohort == 20
    for name, want in (("reported", 16), ("failed", 1), ("rejected", 2), ("dropped", 1)):
        assert record[f"north/health/{name}"] == pytest.approx(want, abs=0.1)
    assert record["north/health/ci95"] > 0


def test_add_remove_dropped_has_its_own_95_percent_bar(fleet: Fleet, ledger_path: Path) -> None:
    """Review s35 F2: ``dropped`` (selected minus three noisy counts) carries three
    coordinates' noise, and ``health/ci95`` (one count's bar) covered it about 80% of the
    time. ``dropped/ci95`` covers it at 95%, checked on 4,000 draws of the health release's
    own OpenDP mechanism (OpenDP cannot be seeded: Binomial(4000, 0.95) has sd 0.0035, and
    ±0.02 is 5.8 sd, a false failure below 1e-8)."""
    p = policy(neighbouring="add_remove", eps="1", epoch="40", health=True)
    with Ledger.open(ledger_path, p, mode="create") as ledger:
        strategy, result, _ = run(fleet, ledger, rounds=1, health_metric="health")
    hr = strategy.rounds[1].health_releases["north"]
    assert isinstance(hr, Release)
    record = result.evaluate_metrics_clientapp[1]
    bar = record["north/health/dropped/ci95"]
    assert bar == dropped_ci95(hr) > record["north/health/ci95"]
    noise = np.array(mech.apply_many(hr.facts, [np.zeros(3)] * 4000)).sum(axis=1)
    assert abs(np.mean(np.abs(noise) <= bar) - 0.95) < 0.02
    assert np.mean(np.abs(noise) <= record["north/health/ci95"]) < 0.88  # the old bar: ~0.80
    t = DROPPED_CI95_FACTOR["laplace"]  # the tail of a sum of three Laplace(1), closed form
    assert math.exp(-t) * (t * t + 5 * t + 8) / 8 == pytest.approx(0.05, rel=1e-12)


# ------------------------------------------------------------- the wrapper and clients


def test_training_passes_through_and_dp_mods_on_training_leave_evaluate_alone(
    fleet: Fleet, ledger_path: Path
) -> None:
    with Ledger.open(ledger_path, exact(), mode="create") as ledger:
        strategy, result, _ = run(fleet, ledger, rounds=1, fraction_train=1.0,
                                  client=make_client(fleet, dp_on_training=True))  # fmt: skip
    assert result.train_metrics_clientapp[1]["loss"] == pytest.approx(0.5)  # FedAvg's mean
    assert result.arrays["w"].numpy().shape == (2,)
    assert strategy.rounds[1].health["south"].reported == 20


def test_a_node_without_a_region_is_not_asked_to_evaluate(fleet: Fleet, ledger_path: Path) -> None:
    grid_ids = LocalGrid(make_client(fleet), N_NODES).node_ids  # same seed, same ids
    known = {n: fleet.regions[int(fleet.client_region[i])] for i, n in enumerate(grid_ids)
             if i != 39}  # fmt: skip
    with Ledger.open(ledger_path, exact(), mode="create") as ledger:
        strategy, _, grid = run(fleet, ledger, rounds=1, registry=StaticRegistry(known))
    report = strategy.rounds[1]
    assert report.unregistered == (grid_ids[39],)
    assert report.health["south"].selected == 19
    assert grid_ids[39] not in {m.metadata.dst_node_id for m in grid.sent}


def test_regions_are_asked_of_each_node_once_and_a_silent_node_is_asked_again(
    fleet: Fleet, ledger_path: Path
) -> None:
    registry = QueryRegistry(("partition-id",), region_of(fleet))
    with Ledger.open(ledger_path, exact(), mode="create") as ledger:
        strategy, _, grid = run(fleet, ledger, rounds=2, registry=registry)
    queries = [m for m in grid.sent if m.metadata.message_type == "query.dpledger_region"]
    assert len(queries) == N_NODES + 1  # every node once, the silent one again in round 2
    for report in strategy.rounds.values():
        assert report.unregistered == (grid.node_ids[OFFLINE],)
        assert report.health["north"].selected == 19
        assert report.health["north"].dropped == 0


def test_a_node_without_the_query_handler_stays_unregistered() -> None:
    app = ClientApp()  # no answer_region_queries(app): the query comes back as an error
    grid = LocalGrid(app, 3)
    grid.activate()
    try:
        regions = QueryRegistry().regions(grid.node_ids, grid)
    finally:
        grid.deactivate()
    assert regions == dict.fromkeys(grid.node_ids)


def test_wrong_configuration_is_refused_before_any_round(fleet: Fleet, tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "x.db", exact(), mode="create") as ledger:
        inner = FedAvg(fraction_train=0.0)
        with pytest.raises(InvalidInput, match="health counters are public"):
            LedgerEvaluation(inner, ledger, metrics=METRICS, params=PARAMS, health_metric="loss")
        with pytest.raises(InvalidInput, match="n_classes"):
            LedgerEvaluation(inner, ledger, metrics=METRICS,
                             params={**PARAMS, "confusion": {"n_classes": 4}})  # fmt: skip
        with pytest.raises(InvalidInput, match="computes a"):
            LedgerEvaluation(inner, ledger, metrics={"loss": "error_histogram"})
        with pytest.raises(InvalidInput, match="which declared contribution"):
            LedgerEvaluation(inner, ledger)
        ok = {"metrics": METRICS, "params": PARAMS}
        wrong: list[tuple[dict[str, Any], str]] = [
            ({"params": {**PARAMS, "confusion": 3}}, "mapping of settings"),
            ({"params": {**PARAMS, "regression": {**PARAMS["regression"], "shfit": 1}}},
             "reads no setting"),
            ({"params": {**PARAMS, "confusion": {"n_classes": np.int64(3)}}}, "plain finite"),
            ({"registry": {1: "north"}}, "regions"),
            ({"aggregator": sum}, "check"),
            ({"release_prefix": "x" * 65}, "release_prefix"),
            ({"release_prefix": "my run"}, "release_prefix"),
            ({"on_round": "print"}, "on_round"),
        ]  # fmt: skip
        for bad, why in wrong:
            with pytest.raises(InvalidInput, match=why):
                LedgerEvaluation(inner, ledger, **{**ok, **bad})
    cross_silo = Path(__file__).resolve().parent.parent / "policies" / "cross-silo.toml"
    unit = Policy.load(cross_silo)  # a record-level unit, with other bounds
    with (
        Ledger.open(":memory:", unit, mode="create") as ledger,
        pytest.raises(InvalidInput, match="client-level"),
    ):
        LedgerEvaluation(FedAvg(fraction_train=0.0), ledger, metrics=METRICS, params=PARAMS)
    for kw in ({"keys": "region"}, {"timeout": 0}, {"to_region": "region"}):
        with pytest.raises(InvalidInput):
            QueryRegistry(**kw)
    assert not (tmp_path / "x.db").exists()


def test_rounds_map_to_epochs_by_the_policys_rounds_per_epoch(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "x.db", exact(), mode="create") as ledger:  # 3 per epoch
        s = LedgerEvaluation(FedAvg(fraction_train=0.0), ledger, metrics=METRICS, params=PARAMS,
                             first_epoch=5)  # fmt: skip
    assert [s.epoch_of(r) for r in range(1, 8)] == [5, 5, 5, 6, 6, 6, 7]


def test_a_client_reply_carries_scalars_vectors_and_edges_versions(fleet: Fleet) -> None:
    grid = LocalGrid(make_client(fleet, bad=False), 2)
    grid.activate()
    try:
        with Ledger.open(":memory:", exact(), mode="create") as ledger:
            inner = FedAvg(fraction_train=0.0, min_available_nodes=2, min_evaluate_nodes=2)
            s = LedgerEvaluation(
                inner,
                ledger,
                metrics=METRICS,
                params=PARAMS,
                registry=StaticRegistry(dict.fromkeys(grid.node_ids, "south")),
            )
            msgs = list(s.configure_evaluate(1, ArrayRecord(), ConfigRecord(), grid))
            replies = list(grid.send_and_receive(msgs))
    finally:
        grid.deactivate()
    content = replies[0].content
    assert set(content.metric_records["dpledger.scalars"]) == {"loss"}
    assert set(content.array_records["dpledger.vectors"]) == {"errors", "confusion", "regression"}
    assert content.array_records["dpledger.vectors"]["confusion"].numpy().dtype == np.float64
    meta = content.config_records["dpledger.meta"]
    assert meta["edges-version.errors"] == "abs-error-m/v1"
    assert meta["round"] == 1


class _OwnContents(FedAvg):
    """FedAvg that gives every instruction its own RecordDict (FedAvg shares one)."""

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Any
    ) -> list[Message]:
        return [
            Message(content=RecordDict({"config": ConfigRecord({"k": i})}),
                    message_type=m.metadata.message_type, dst_node_id=m.metadata.dst_node_id)
            for i, m in enumerate(super().configure_evaluate(server_round, arrays, config, grid))
        ]  # fmt: skip


@pytest.mark.parametrize("inner", [FedAvg, _OwnContents])
def test_every_instruction_carries_the_plan_whether_contents_are_shared_or_not(
    inner: type[FedAvg],
) -> None:
    """The plan is set once per distinct content: every message sent must still carry it."""
    from dpledger.flower.wire import PLAN_RECORD

    grid = LocalGrid(lambda m, c: m, 6)
    grid.activate()
    try:
        with Ledger.open(":memory:", exact(), mode="create") as ledger:
            regions = dict(zip(grid.node_ids, ["north", "south", "*", "north", "south", "south"],
                               strict=True))  # fmt: skip
            s = LedgerEvaluation(
                inner(fraction_train=0.0, min_available_nodes=6, min_evaluate_nodes=6),
                ledger, metrics=METRICS, params=PARAMS, registry=StaticRegistry(regions),
            )  # fmt: skip
            msgs = list(s.configure_evaluate(1, ArrayRecord(), ConfigRecord(), grid))
    finally:
        grid.deactivate()
    assert sorted(m.metadata.dst_node_id for m in msgs) == sorted(
        n for n, r in regions.items() if r != "*"
    )
    plans = {m.content.config_records[PLAN_RECORD]["plan"] for m in msgs}
    assert len(plans) == 1
    assert len({id(m.content) for m in msgs}) == (1 if inner is FedAvg else 5)


class _Twice(FedAvg):
    """FedAvg that sends every instruction twice (a strategy may repeat a node)."""

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Any
    ) -> list[Message]:
        return 2 * list(super().configure_evaluate(server_round, arrays, config, grid))


def test_a_node_sent_two_instructions_is_selected_or_unregistered_once() -> None:
    grid = LocalGrid(lambda m, c: m, 4)
    grid.activate()
    try:
        with Ledger.open(":memory:", exact(), mode="create") as ledger:
            regions = dict(zip(grid.node_ids, ["north", "south", "*", "north"], strict=True))
            s = LedgerEvaluation(
                _Twice(fraction_train=0.0, min_available_nodes=4, min_evaluate_nodes=4),
                ledger, metrics=METRICS, params=PARAMS, registry=StaticRegistry(regions),
            )  # fmt: skip
            msgs = list(s.configure_evaluate(1, ArrayRecord(), ConfigRecord(), grid))
            s.aggregate_evaluate(1, [])  # nobody answered
    finally:
        grid.deactivate()
    assert len(msgs) == 3  # one instruction per node with a region
    report = s.rounds[1]
    assert report.unregistered == (grid.node_ids[2],)  # counted once, not twice
    assert report.health["north"].selected == 2
    assert report.health["north"].dropped == 2


def test_no_module_outside_dpledger_flower_imports_flwr() -> None:
    import ast

    package = Path(__file__).resolve().parent.parent / "dpledger"
    found = []
    for path in package.rglob("*.py"):
        if "flower" in path.relative_to(package).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            found += [f"{path}: {n}" for n in names if n.split(".")[0] == "flwr"]
    assert not found


def _plan() -> Any:
    from dpledger.flower import RoundPlan

    with Ledger.open(":memory:", exact(), mode="create") as ledger:
        s = LedgerEvaluation(FedAvg(fraction_train=0.0), ledger, metrics=METRICS, params=PARAMS)
        return RoundPlan(1, 0, "1", s.plans)


def _good(plan: Any) -> RecordDict:
    from dpledger.flower import contributions

    data = {"loss": [0.5, 1.0], "along": [0.2, 3.0], "across": [0.1, -1.0],
            "y_true": [0, 2], "y_pred": [0, 1]}  # fmt: skip
    reg = {"regression": {"y_true": [100.0, 90.0], "y_pred": [95.0, 91.0]}}
    return contributions(plan, data, data_for=reg)


def _break(how: str, content: RecordDict) -> RecordDict:
    if how == "no records":
        return RecordDict({"m": MetricRecord({"num-examples": 1})})
    if how == "another round":
        content["dpledger.meta"]["round"] = 2
    elif how == "another schema":
        content["dpledger.meta"]["schema"] = "dpledger-flower/0"
    elif how == "a missing scalar":
        del content["dpledger.scalars"]["loss"]
    elif how == "NaN loss":
        content["dpledger.scalars"]["loss"] = float("nan")
    elif how == "a short vector":
        content["dpledger.vectors"]["confusion"] = Array(np.zeros(4))
    elif how == "a string array":
        content["dpledger.vectors"]["confusion"] = Array(np.array(["a"] * 9))
    elif how == "a NaN vector":
        content["dpledger.vectors"]["errors"] = Array(np.full(7, np.nan))
    elif how == "a negative count":
        content["dpledger.vectors"]["confusion"] = Array(np.r_[-1.0, np.zeros(8)])
    elif how == "an L1 norm above the cap":
        content["dpledger.vectors"]["confusion"] = Array(np.full(9, 20.0))
    return content


@pytest.mark.parametrize(
    "how",
    ["no records", "another round", "another schema", "a missing scalar", "NaN loss",
     "a short vector", "a string array", "a NaN vector", "a negative count",
     "an L1 norm above the cap"],
)  # fmt: skip
def test_each_malformed_reply_is_rejected_with_a_reason(how: str) -> None:
    from dpledger.flower import PlainSum
    from dpledger.flower.wire import read_reply

    plan = _plan()
    got, why = read_reply(plan, _good(plan))
    assert why is None
    got, why = read_reply(plan, _break(how, _good(plan)))
    if why is None:  # structurally sound: the aggregator's bounds check must catch it
        found = [
            PlainSum().check(m, np.asarray([got[name]], dtype=np.float64).reshape(1, -1))[0]
            for name, m in plan.metrics.items()
        ]
        why = next((w for w in found if w is not None), None)
    assert why is not None, how


def test_flam_metrics_are_derived_from_the_committed_release_alone(
    fleet: Fleet, ledger_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Audit 5, F4: the wrapper read its FLAM metrics back by re-submitting the private sum
    to release_confusion, which refused a negative cell of a signed metric: whether they
    were published told the cell's sign. Now they are post-processing of the release."""
    from dpledger.ledger import derived as derived_module

    def resubmitted(*args: object, **kwargs: object) -> None:
        raise AssertionError("a private sum was submitted again")

    from dpledger.flower import strategy as strategy_module

    for module in (derived_module, strategy_module):
        for name in ("release_confusion", "release_regression"):
            monkeypatch.setattr(module, name, resubmitted, raising=False)
    with Ledger.open(ledger_path, exact(), mode="create") as ledger:
        strategy, _, _ = run(fleet, ledger, rounds=1)
        report = strategy.rounds[1]
        for region in ("north", "south"):
            rel = report.outcomes[(region, "confusion")]
            assert isinstance(rel, Release)
            again = derived_module.derive_confusion(rel, 100.0 * rel.request.cohort)
            got = dict(report.derived[(region, "confusion")].metrics)
            assert got == pytest.approx(dict(again.metrics), rel=0, abs=0, nan_ok=True)
            assert (region, "regression") in report.derived
        assert not report.derive_errors


def test_an_epoch_past_the_ledgers_last_is_refused_before_any_round(
    fleet: Fleet, ledger_path: Path
) -> None:
    """Audit 5, F6: first_epoch was unbounded; a round past epoch 2**63 - 1 raised out of
    aggregate_evaluate and ended the run (after earlier rounds had written)."""
    last = 2**63 - 1
    with Ledger.open(ledger_path, exact(), mode="create") as ledger:
        inner = FedAvg(fraction_train=0.0)
        with pytest.raises(InvalidInput, match="first_epoch"):
            LedgerEvaluation(inner, ledger, metrics=METRICS, params=PARAMS, first_epoch=last + 1)
        strategy = LedgerEvaluation(inner, ledger, metrics=METRICS, params=PARAMS,
                                    first_epoch=last)  # fmt: skip
        grid = LocalGrid(make_client(fleet), N_NODES, offline=(OFFLINE,))
        with pytest.raises(InvalidInput, match="past the last ledger epoch"):
            strategy.start(grid=grid, initial_arrays=ArrayRecord({"w": Array(np.zeros(2))}),
                           num_rounds=exact().rounds_per_epoch + 1)  # fmt: skip
        assert len(ledger) == 0
        assert list(strategy.configure_evaluate(4, ArrayRecord(), ConfigRecord(), grid)) == []


def test_a_noise_draw_that_overflows_does_not_end_the_run(fleet: Fleet, ledger_path: Path) -> None:
    """Review s27b: a policy that loads with a noise scale near the doubles' limit
    overflows in some draws (PolicyError, nothing recorded); it escaped aggregate_evaluate
    and ended the run. Now (review P3) each such release is refused before any draw by the
    noise_range check, as its Verdict, and the run goes on."""
    edge = Policy.from_toml(
        POLICY.format(neighbouring="replace", eps="3.35e-306", epoch="1", extra=""), source="edge"
    )
    with Ledger.open(ledger_path, edge, mode="create") as ledger:
        strategy, _, _ = run(fleet, ledger, rounds=3, offline=())
        assert sorted(strategy.rounds) == [1, 2, 3]
        refused = [o for report in strategy.rounds.values() for o in report.outcomes.values()
                   if isinstance(o, Verdict)]  # fmt: skip
        assert refused
        assert all([c.name for c in v.failures] == ["noise_range"] for v in refused)
        if ledger_path.exists():  # no release may have passed: then nothing was made
            assert ledger.verify().ok

"""ServerApp: FedAvg (evaluation only) wrapped in dpledger's LedgerEvaluation.

Every evaluate round's per-region sums go through a dpledger ledger; what Flower records
in ``Result.evaluate_metrics_clientapp`` is only the noisy values, their 95% intervals,
refusal flags and the public health counters. Each round's full report (every release and
refusal) is printed as it happens.
"""

from __future__ import annotations

import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flwr.app import Array, ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg, Result

from dpledger import Ledger, Policy
from dpledger.flower import LedgerEvaluation, QueryRegistry, RoundReport
from flower_eval import task

DEFAULTS: dict[str, Any] = {
    "num-server-rounds": 4,
    "num-nodes": 200,
    "policy": "policy.toml",
    "ledger": "",
    "seed": 0,
}


def settings(context: Context, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run config over the defaults, then ``overrides`` (a demo's or a test's)."""
    return {**DEFAULTS, **dict(context.run_config), **(overrides or {})}


def ledger_location(setting: str, run_id: int) -> str:
    """The ledger to release into: the setting, or a fresh file for this run."""
    if setting:
        return setting
    folder = Path(tempfile.gettempdir()) / "dpledger-flower-eval"
    folder.mkdir(exist_ok=True)
    return str(folder / f"run-{run_id}.db")


def run(
    grid: Grid,
    context: Context,
    overrides: dict[str, Any] | None = None,
    on_round: Callable[[RoundReport], object] | None = None,
) -> tuple[LedgerEvaluation, Result]:
    """Evaluate the model for the configured rounds; return the wrapper and Flower's result."""
    cfg = settings(context, overrides)
    nodes, seed = int(cfg["num-nodes"]), int(cfg["seed"])
    policy = Policy.load(task.policy_path(str(cfg["policy"])))
    location = ledger_location(str(cfg["ledger"]), context.run_id)

    def to_region(answer: dict[str, Any]) -> str:
        """A node's region from its partition id, range-checked against the server's own
        fleet size (never a size the node reports)."""
        pid = answer["partition-id"]
        if isinstance(pid, bool) or not isinstance(pid, int) or not 0 <= pid < nodes:
            raise ValueError(f"partition-id {pid!r} is not in [0, {nodes})")
        return task.region_of(pid, nodes, seed)

    registry = QueryRegistry(("partition-id",), to_region)
    inner = FedAvg(fraction_train=0.0, fraction_evaluate=1.0, min_evaluate_nodes=nodes,
                   min_available_nodes=nodes)  # fmt: skip
    health = "health" if "health" in policy.metrics else None
    model = ArrayRecord({k: Array(v) for k, v in task.initial_model(seed).items()})
    with Ledger.open(location, policy, mode="create", labels={"purpose": "flower-eval"}) as ledger:
        strategy = LedgerEvaluation(
            inner, ledger, metrics={"loss": "clipped_loss", "confusion": "confusion_matrix"},
            params={"confusion": {"n_classes": task.CLASSES}}, registry=registry,
            health_metric=health, on_round=on_round,
        )  # fmt: skip
        result = strategy.start(grid=grid, initial_arrays=model,
                                num_rounds=int(cfg["num-server-rounds"]))  # fmt: skip
    return strategy, result


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """`flwr run` entry point: print each round's report as it is released."""
    strategy, _ = run(grid, context, on_round=lambda report: print(report.table(), flush=True))
    if not any(report.releases for report in strategy.rounds.values()):
        print("nothing was released in this run: no budget spent, nothing written (a "
              "refusal writes nothing; a ledger that was not there was not created)")  # fmt: skip
        return
    policy = Path("flower_eval") / str(settings(context)["policy"])  # from the app's folder
    print(f"ledger: {strategy.ledger.location}; audit it with: dpledger ledger verify "
          f"--policy {policy} --ledger {strategy.ledger.location}")  # fmt: skip

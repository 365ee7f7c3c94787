"""Review 42 (flw): the server example in ``dpledger.flower``'s docstring runs.

It built ``LedgerEvaluation(FedAvg(fraction_train=0.0), ledger, params={"confusion":
{"n_classes": 10}})`` with no ``metrics=``: the default evaluates each policy metric
*named as* a declaration, and no declaration is called ``confusion`` (it is
``confusion_matrix``), so for any policy with a ``confusion`` metric it raised "say which
declared contribution computes ['confusion']" — and a policy whose metric is named
``confusion_matrix`` would have its params refused as "for a metric that is not
evaluated". The example now names the declaration; this test runs the docstring's code
as written, on a ledger, grid and arrays of the kind it assumes.
"""

from __future__ import annotations

import os
import re
import textwrap

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")
os.environ.setdefault("FLWR_DISABLE_UPDATE_CHECK", "1")

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the flower extra is not installed")

from flwr.app import Array, ArrayRecord, Context, Message
from flwr.clientapp import ClientApp

import dpledger.flower
from dpledger import Ledger, Policy
from dpledger.flower import answer_region_queries, contribution_reply
from dpledger.flower.testing import LocalGrid

POLICY = """
name = "docstring"
version = "1"
privacy_unit = "client"
neighbouring = "replace"
epoch_epsilon = "8"

[regions]
names = ["north", "south"]

[metrics.confusion]
kind = "vector_sum"
epsilon = "1"
dimension = 100
cap_per_client = "40"
nonnegative = true
"""


def server_example() -> str:
    doc = dpledger.flower.__doc__ or ""
    found = re.search(r"Server::\n(.*?)\n\S", doc, re.S)
    assert found, "the package docstring has a Server:: example"
    return textwrap.dedent(found.group(1))


def client_app() -> ClientApp:
    app = ClientApp()
    answer_region_queries(app)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        rng = np.random.default_rng(int(context.node_config["partition-id"]))
        y = rng.integers(0, 10, 30)
        return contribution_reply(msg, {"y_true": y, "y_pred": (y + rng.integers(0, 2, 30)) % 10})

    return app


def test_the_package_docstrings_server_example_runs() -> None:
    grid = LocalGrid(client_app(), 8, node_configs=[{"region": ("north", "south")[i % 2]}
                                                    for i in range(8)])  # fmt: skip
    grid.activate()
    try:
        policy = Policy.from_toml(POLICY, source="test")
        with Ledger.open(":memory:", policy, mode="create") as ledger:
            scope = {
                "ledger": ledger,
                "grid": grid,
                "arrays": ArrayRecord({"w": Array(np.zeros(2))}),
            }
            exec(compile(server_example(), "dpledger.flower docstring", "exec"), scope)
    finally:
        grid.deactivate()
    assert sorted(scope["result"].evaluate_metrics_clientapp) == [1, 2, 3]
    assert "round 1" in scope["strategy"].rounds[1].table()

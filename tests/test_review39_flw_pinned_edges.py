"""Review 39 (flw): a client that pins other histogram edges must not claim the plan's.

``contributions(plan, data, bounds={"errors": Bounds(edges=OTHER, ...)})`` without naming
the edges' version packed the reply under the plan's edges version (the default), so the
server accepted a histogram bucketed over other edges and added it to everyone else's:
the release mixed buckets silently. The docstring says the server rejects a reply
bucketed with edges its policy does not have — it could not tell. Now pinned edges that
differ from the plan's raise (the app's mistake, whatever the data) unless another edges
version is named, which the server then rejects as stale.
"""

from __future__ import annotations

import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import pytest

pytest.importorskip("flwr", reason="the flower extra is not installed")

from test_flower_guards import the_plan

from dpledger.errors import InvalidInput
from dpledger.flower import contributions
from dpledger.flower.wire import PACKED_RECORD, packed_blob, read_packed, read_reply
from dpledger.metrics.declarations import Bounds

DATA = {"loss": [0.5, 1.0], "along": [0.2, 3.0], "across": [0.1, -1.0],
        "y_true": [0, 2], "y_pred": [0, 1]}  # fmt: skip
REG = {"regression": {"y_true": [100.0, 90.0], "y_pred": [95.0, 91.0]}}
OTHER = Bounds(cap=100.0, edges=(100.0, 200.0, 300.0, 400.0, 500.0, 600.0), dimension=7)


@pytest.mark.parametrize("packed", [False, True], ids=["records", "packed"])
@pytest.mark.parametrize("version", [None, "abs-error-m/v1"], ids=["default", "the-plans"])
def test_other_edges_under_the_plans_edges_version_raise(packed: bool, version: str | None) -> None:
    plan = the_plan()
    assert plan.metrics["errors"].edges_version == "abs-error-m/v1"
    versions = None if version is None else {"errors": version}
    with pytest.raises(InvalidInput, match="edges"):
        contributions(plan, DATA, data_for=REG, bounds={"errors": OTHER},
                      edges_versions=versions, packed=packed)  # fmt: skip


def test_other_edges_under_their_own_version_are_rejected_by_the_server() -> None:
    plan = the_plan()
    versions = {"errors": "abs-error-m/v0"}
    c = contributions(plan, DATA, data_for=REG, bounds={"errors": OTHER}, edges_versions=versions)
    assert "edges version" in str(read_reply(plan, c)[1])
    c = contributions(plan, DATA, data_for=REG, bounds={"errors": OTHER},
                      edges_versions=versions, packed=True)  # fmt: skip
    blob = packed_blob(c[PACKED_RECORD], plan.packed.width)
    assert not isinstance(blob, str)
    assert read_packed(plan, [blob])[1][0] is not None


def test_the_plans_own_edges_pinned_are_fine() -> None:
    plan = the_plan()
    same = Bounds(cap=100.0, edges=plan.metrics["errors"].bounds.edges, dimension=7)
    c = contributions(plan, DATA, data_for=REG, bounds={"errors": same})
    assert read_reply(plan, c)[1] is None


@pytest.mark.parametrize("packed", [False, True], ids=["records", "packed"])
def test_an_edges_version_for_a_metric_without_edges_raises_in_either_format(
    packed: bool,
) -> None:
    """The same call was accepted as three records (the server reads no edges version for
    the loss) and rejected as packed (the layout digest counts it): now it raises."""
    plan = the_plan()
    assert plan.metrics["loss"].edges_version is None
    with pytest.raises(InvalidInput, match="no edges"):
        contributions(plan, DATA, data_for=REG, edges_versions={"loss": "x"}, packed=packed)

"""Review 42 (flw): the client helper refuses malformed arguments with a typed error.

``contributions`` / ``contribution_reply`` took ``data``, ``data_for``, ``bounds`` and
``edges_versions`` through ``dict()`` and ``**`` unchecked: a list or text raised an
untyped ``TypeError``/``ValueError`` (``dictionary update sequence element #0 has length
1``), a ``plan`` or ``msg`` of the wrong type an ``AttributeError``. ``packed="yes"`` sent
packed replies and ``edges_versions={"errors": 5}`` an int version that every server
rejects as stale — accepted silently. In a ClientApp each of these is an error (or a
rejection) in every round, with nothing saying which argument. Bad input now gets an
``InvalidInput`` naming it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import pytest

pytest.importorskip("flwr", reason="the flower extra is not installed")

import test_review42_flw_extra_records as flw
from flwr.app import RecordDict
from test_flower import METRICS, exact
from test_flower_runs import wrapper

from dpledger import Ledger
from dpledger.errors import InvalidInput
from dpledger.flower import contribution_reply, contributions
from dpledger.flower.testing import LocalGrid
from dpledger.flower.wire import PLAN_RECORD, RoundPlan
from dpledger.metrics.declarations import Bounds

DATA, REG = flw.DATA, flw.REG  # a client's evaluation data and its regression pairs


@pytest.fixture(scope="module")
def plan() -> RoundPlan:
    with Ledger.open(":memory:", exact(), mode="create") as ledger:
        plans = wrapper(ledger, {}, metrics=METRICS).plans
    return RoundPlan(1, 0, exact().version, plans)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"data": None}, "data must map"),
        ({"data": [1.0, 2.0]}, "data must map"),
        ({"data_for": [("regression", {})]}, "data_for must map"),
        ({"data_for": {"regression": None}}, "data_for must map"),
        ({"bounds": "loss"}, "bounds must map"),
        ({"bounds": [("loss", Bounds(low=0.0, high=1.0))]}, "bounds must map"),
        ({"edges_versions": ["errors"]}, "edges_versions must map"),
        ({"edges_versions": {"errors": 5}}, "edges_versions must map"),
        ({"packed": "yes"}, "packed must be True or False"),
        ({"packed": None}, "packed must be True or False"),
        ({"plan": {"metrics": {}}}, "plan must be a RoundPlan"),
    ],
)
def test_a_malformed_argument_is_refused_by_name(
    plan: RoundPlan, kwargs: dict[str, Any], named: str
) -> None:
    args: dict[str, Any] = {"plan": plan, "data": DATA, "data_for": REG, **kwargs}
    with pytest.raises(InvalidInput, match=named):
        contributions(args.pop("plan"), args.pop("data"), **args)


def test_well_formed_arguments_still_work(plan: RoundPlan) -> None:
    assert isinstance(contributions(plan, DATA, data_for=REG, packed=True), RecordDict)
    assert isinstance(contributions(plan, DATA, data_for=REG, bounds=None), RecordDict)


@pytest.fixture
def active() -> Iterator[None]:
    grid = LocalGrid(lambda m, c: m, 1)
    grid.activate()
    yield
    grid.deactivate()


@pytest.mark.usefixtures("active")
def test_a_reply_to_something_else_than_a_message_is_refused(plan: RoundPlan) -> None:
    with pytest.raises(InvalidInput, match="msg must be the evaluate instruction"):
        contribution_reply(RecordDict({PLAN_RECORD: plan.record()}), DATA)  # type: ignore[arg-type]

"""Review 42 (flw): ``contribution_reply``'s ``extra`` records cannot replace the contribution.

``extra`` "adds the app's own records ...; the wrapper ignores them". An extra record
named like one of the wrapper's (``dpledger.scalars``, ``dpledger.packed``...) silently
overwrote the bounded contribution just computed: the server then read the app's record
as the client's contribution — an unclipped loss, accepted when it happened to fall
within the clip and rejected otherwise, so whether the node counted depended on its data
(published under ``replace``). A value that is not a record raised an untyped
``TypeError`` from Flower's ``RecordDict``. Both are now a typed ``InvalidInput`` naming
the problem, whatever the data.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the flower extra is not installed")

from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from test_flower import METRICS, exact
from test_flower_runs import wrapper

from dpledger import Ledger
from dpledger.errors import InvalidInput
from dpledger.flower import contribution_reply
from dpledger.flower.testing import LocalGrid
from dpledger.flower.wire import PLAN_RECORD, RoundPlan

DATA = {"loss": np.array([0.2, 0.4]), "along": np.array([0.1, 0.2]),
        "across": np.array([0.3, 0.1]), "y_true": np.array([0, 1]),
        "y_pred": np.array([0, 2])}  # fmt: skip
REG = {"regression": {"y_true": np.array([50.0, 60.0]), "y_pred": np.array([55.0, 58.0])}}


@pytest.fixture
def instruction() -> Iterator[Message]:
    grid = LocalGrid(lambda m, c: m, 1)
    grid.activate()
    try:
        with Ledger.open(":memory:", exact(), mode="create") as ledger:
            plans = wrapper(ledger, {}, metrics=METRICS).plans
        plan = RoundPlan(1, 0, exact().version, plans)
        msg = Message(RecordDict({PLAN_RECORD: plan.record()}), dst_node_id=grid.node_ids[0],
                      message_type="evaluate")  # fmt: skip
        msg.metadata.__dict__["_message_id"] = "m1"
        yield msg
    finally:
        grid.deactivate()


def test_a_plain_extra_record_is_added(instruction: Message) -> None:
    reply = contribution_reply(instruction, DATA, data_for=REG,
                               extra={"mine": MetricRecord({"raw": 1.0})})  # fmt: skip
    assert reply.content["mine"]["raw"] == 1.0
    assert reply.content["dpledger.scalars"]["loss"] == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("name", "record"),
    [
        ("dpledger.scalars", MetricRecord({"loss": 99.0})),
        ("dpledger.packed", ArrayRecord()),
        ("dpledger.meta", ConfigRecord({"round": 1})),
    ],
)
def test_an_extra_record_in_the_wrappers_namespace_is_refused(
    instruction: Message, name: str, record: Any
) -> None:
    with pytest.raises(InvalidInput, match="are the wrapper's"):
        contribution_reply(instruction, DATA, data_for=REG, extra={name: record})


@pytest.mark.parametrize("record", [{"raw": 1.0}, 5, None])
def test_an_extra_value_that_is_not_a_record_is_refused_typed(
    instruction: Message, record: Any
) -> None:
    with pytest.raises(InvalidInput, match="must be an ArrayRecord, MetricRecord or ConfigRecord"):
        contribution_reply(instruction, DATA, data_for=REG, extra={"mine": record})


# review 42 diff 2: an extra that is no mapping (a list of pairs, text, a number)
@pytest.mark.parametrize("extra", [[("mine", MetricRecord({"raw": 1.0}))], "mine", 5])
def test_extra_that_is_not_a_mapping_is_refused_typed(instruction: Message, extra: Any) -> None:
    with pytest.raises(InvalidInput, match="extra must map record names to records"):
        contribution_reply(instruction, DATA, data_for=REG, extra=extra)

"""A reply's Array is summed only when its ``.npy`` bytes agree with its declared dtype and shape.

Flower's ``Array`` carries ``dtype``/``shape`` fields beside ``.npy`` bytes and checks
neither against the other; the wrapper reads the data by the fields (without parsing
each header). An Array whose header says something else (here: the same bytes declared
float64 but written as int64, or as a 2-D array) decodes differently through
``Array.numpy()`` than what would be summed, so it is rejected — counted as ``rejected``
with a reason — in both reply formats. Headers that agree, whatever numpy wrote them
(a version 2.0 header, big-endian data), are accepted.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")  # read when flwr is imported

import numpy as np
import pytest

pytest.importorskip(
    "flwr", reason="the flower extra is not installed (pip install dpledger[flower])"
)

from flwr.app import Array, ArrayRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.constant import SType
from test_flower import (
    N_NODES,
    _good,
    _plan,
    answer_region_queries,
    client_data,
    exact,
    regression_inputs,
    run,
)

from dpledger import Ledger
from dpledger.flower import contribution_reply, contributions
from dpledger.flower.wire import PACKED_KEY, PACKED_RECORD, packed_blob, read_reply
from dpledger.sim.fleet import Fleet, make_fleet


def lying(row: np.ndarray, header_dtype: str | None = None, header_shape: Any = None,
          version: tuple[int, int] = (1, 0)) -> Array:  # fmt: skip
    """An Array declaring ``row``'s dtype and shape over the same data bytes, whose
    ``.npy`` header says ``header_dtype`` and ``header_shape`` (default: the truth)."""
    shown = row.view(header_dtype) if header_dtype else row
    shown = shown.reshape(header_shape) if header_shape is not None else shown
    out = io.BytesIO()
    np.lib.format.write_array(out, shown, version=version, allow_pickle=False)
    return Array(dtype=str(row.dtype), shape=tuple(row.shape), stype=SType.NUMPY,
                 data=out.getvalue())  # fmt: skip


def _packed_row(plan: Any) -> np.ndarray:
    data = {"loss": [0.5, 1.0], "along": [0.2, 3.0], "across": [0.1, -1.0],
            "y_true": [0, 2], "y_pred": [0, 1]}  # fmt: skip
    reg = {"regression": {"y_true": [100.0, 90.0], "y_pred": [95.0, 91.0]}}
    content = contributions(plan, data, data_for=reg, packed=True)
    return np.asarray(content[PACKED_RECORD][PACKED_KEY].numpy(), dtype=np.float64)


@pytest.mark.parametrize(
    ("header_dtype", "header_shape"), [("<i8", None), (None, (1, -1)), ("<u8", None)]
)
def test_a_vector_whose_npy_header_disagrees_is_rejected(
    header_dtype: str | None, header_shape: Any
) -> None:
    plan = _plan()
    content = _good(plan)
    row = content["dpledger.vectors"]["confusion"].numpy().astype(np.float64)
    content["dpledger.vectors"]["confusion"] = lying(row, header_dtype, header_shape)
    _, why = read_reply(plan, content)
    assert why is not None
    assert "confusion: the .npy header says" in why


@pytest.mark.parametrize(
    ("header_dtype", "header_shape"), [("<i8", None), (None, (1, -1)), ("<f4", None)]
)
def test_a_packed_row_whose_npy_header_disagrees_is_rejected(
    header_dtype: str | None, header_shape: Any
) -> None:
    plan = _plan()
    row = _packed_row(plan)
    blob = packed_blob(ArrayRecord({PACKED_KEY: lying(row, header_dtype, header_shape)}),
                       plan.packed.width)  # fmt: skip
    assert isinstance(blob, str)
    assert blob.startswith("packed: the .npy header says")


def test_agreeing_headers_from_other_writers_are_accepted() -> None:
    plan = _plan()
    row = _packed_row(plan)
    blob = packed_blob(ArrayRecord({PACKED_KEY: lying(row, version=(2, 0))}), plan.packed.width)
    assert not isinstance(blob, str)
    assert np.array_equal(np.frombuffer(blob, dtype="<f8"), row)
    content = _good(plan)
    confusion = content["dpledger.vectors"]["confusion"].numpy().astype(">f8")
    content["dpledger.vectors"]["confusion"] = Array(confusion)  # big-endian, declared so
    got, why = read_reply(plan, content)
    assert why is None
    assert np.array_equal(got["confusion"], confusion)


def test_truncated_or_padded_data_is_rejected() -> None:
    plan = _plan()
    row = _packed_row(plan)
    good = lying(row)
    padded = Array(dtype=good.dtype, shape=good.shape, stype=good.stype, data=good.data + b"\0" * 8)
    blob = packed_blob(ArrayRecord({PACKED_KEY: padded}), plan.packed.width)
    assert isinstance(blob, str)
    assert blob.startswith(f"packed: {len(row) * 8 + 8} data bytes")


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return make_fleet(n_clients=N_NODES, regions=("north", "south"), n_classes=3,
                      scenarios=("label_skew",), seed=1)  # fmt: skip


def test_disagreeing_replies_are_counted_as_rejected_and_the_round_goes_on(
    fleet: Fleet, tmp_path: Path
) -> None:
    app = ClientApp()
    answer_region_queries(app)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        pid = int(context.node_config["partition-id"])
        data = client_data(fleet, pid)
        reply = contribution_reply(msg, data, data_for=regression_inputs(data), packed=pid == 5)
        content: RecordDict = reply.content
        if pid == 5:  # packed: the same bytes, an int64 header
            row = content[PACKED_RECORD][PACKED_KEY].numpy()
            content[PACKED_RECORD][PACKED_KEY] = lying(row, "<i8")
        if pid == 6:  # three records: a 2-D header over the histogram's bytes
            row = content["dpledger.vectors"]["errors"].numpy()
            content["dpledger.vectors"]["errors"] = lying(row, None, (1, -1))
        return reply

    with Ledger.open(tmp_path / "l.db", exact(), mode="create") as ledger:
        strategy, _, grid = run(fleet, ledger, rounds=1, client=app, offline=())
    report = strategy.rounds[1]
    bad = {n.node_id: n for n in report.nodes if n.status == "rejected"}
    assert set(bad) == {grid.node_ids[5], grid.node_ids[6]}
    assert all(".npy header says" in n.reason for n in bad.values())
    assert sum(h.reported for h in report.health.values()) == N_NODES - 2
    assert len(report.releases) == 8

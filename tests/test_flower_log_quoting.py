"""A node's text reaches the server's log quoted and bounded (review 42 flw, suspected).

The region query logs why a node answered no region: the text of ``to_region``'s exception
(which may quote the node's answer) and the value it returned. Unquoted, a hostile node's
newline forged a log line of its own, and a megabyte string flooded the log.
"""

from __future__ import annotations

import logging
import os
from typing import Any

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")  # read when flwr is imported

import pytest

pytest.importorskip(
    "flwr", reason="the flower extra is not installed: pip install dpledger[flower]"
)

from flwr.clientapp import ClientApp

from dpledger.flower import QueryRegistry, answer_region_queries
from dpledger.flower.testing import LocalGrid

FORGED = "\nINFO dpledger.flower: budget reset by operator"


@pytest.mark.parametrize("mode", ["raises", "returns"])
def test_a_nodes_text_is_quoted_and_bounded_in_the_log(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    def to_region(c: Any) -> Any:
        said = str(c["partition-id"]) + FORGED + "x" * 100_000
        if mode == "raises":
            raise ValueError(said)
        return [said]  # not a region name

    app = ClientApp()
    answer_region_queries(app)
    grid = LocalGrid(app, 2, node_configs=[{"partition-id": 0}, {"partition-id": 1}])
    grid.activate()
    try:
        with caplog.at_level(logging.WARNING, logger="dpledger.flower"):
            got = QueryRegistry(("partition-id",), to_region).regions(grid.node_ids, grid)
    finally:
        grid.deactivate()
    assert set(got.values()) == {None}
    said = [r.getMessage() for r in caplog.records if "region" in r.getMessage()]
    assert len(said) == 2
    for line in said:
        assert "\n" not in line
        assert "budget reset" in line  # quoted, not dropped
        assert len(line) < 400

"""Review 43 (priv): the service's body limit let a valid aggregate's digits decide a 413.

``serve`` refuses a body limit below ``body_bytes_needed(policy)`` "so that a 413 never
depends on an aggregate's digits" (docs/service.md), counting 32 bytes a number: the 24
characters of the longest float ``repr`` plus a separator and spare. That held for JSON
written compactly, not for the same body written with ``json.dumps(body, indent=4)`` (a
number in the aggregate list then sits behind a newline and 8 spaces: up to 34 bytes).
Under ``add_remove`` two neighbouring fleets of a signed 10,000-value ``vector_sum`` —
nobody, and one client whose capped contribution is −1.23…e-05 in every coordinate —
sent in that layout at the smallest limit the service accepts: the first was checked
(200), the second refused with 413, uncharged. The answer depended on the data.
Deterministic (a dry run: no noise is drawn).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _service import call

from dpledger.ledger import Ledger
from dpledger.policy import Policy
from dpledger.service import create_app
from dpledger.service.keys import ACTIONS, Scopes
from dpledger.service.state import Settings, body_bytes_needed
from dpledger.service.store import ServiceStore, default_location

DIMENSION = 10_000
POLICY = f"""
name = "wide-signed"
version = "1"
neighbouring = "add_remove"
epoch_epsilon = "4"
allocation = "pooled"

[regions]
names = ["north"]

[metrics.wide]
kind = "vector_sum"
epsilon = "0.5"
dimension = {DIMENSION}
cap_per_client = "1"
nonnegative = false
"""
NOBODY = [0.0] * DIMENSION
ONE = [-1.2345678901234567e-05] * DIMENSION  # one client: L1 0.12, within its cap of 1
LONGEST = [-2.2250738585072014e-308] * DIMENSION  # the longest float repr (24 characters)


def _answer(tmp_path: Path, name: str, aggregate: list[float], indent: int | None) -> int:
    policy = Policy.from_toml(POLICY, source="wide.toml")
    ledger = str(tmp_path / f"{name}-{indent}.db")
    with Ledger.open(ledger, policy, mode="create") as made:
        made.init()
    with ServiceStore.open(default_location(ledger), create=True) as store:
        key, _ = store.create_key("admin", Scopes(ACTIONS))
    limit = body_bytes_needed(policy)  # the smallest limit serve accepts
    app = create_app(Settings(ledger=ledger, policy=policy, max_body_bytes=limit))
    body: dict[str, Any] = {
        "request": {"epoch": 0, "metric": "wide", "region": "north", "cohort": 1000},
        "aggregate": aggregate,
    }
    headers = {"Authorization": f"Bearer {key.token}", "content-type": "application/json"}
    try:
        r = call(app, "POST", "/v1/check", content=json.dumps(body, indent=indent),
                 headers=headers)  # fmt: skip
        return r.status_code
    finally:
        app.state.service.close()


def test_the_aggregates_are_valid_neighbours() -> None:
    assert float(np.abs(np.asarray(ONE)).sum()) <= 1.0  # one client's capped contribution
    assert len(repr(ONE[0])) == 23
    assert len(repr(LONGEST[0])) == 24


@pytest.mark.parametrize("indent", [None, 2, 4, 8])
def test_neighbouring_aggregates_get_the_same_answer_whatever_their_digits(
    tmp_path: Path, indent: int | None
) -> None:
    answers = {
        name: _answer(tmp_path, name, agg, indent)
        for name, agg in (("nobody", NOBODY), ("one", ONE), ("longest", LONGEST))
    }
    assert set(answers.values()) == {200}, answers

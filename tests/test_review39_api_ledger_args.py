"""Review 39 (api): two public methods still reached untyped errors.

* ``Ledger.metric_spent(epoch, region, metric)`` with an unhashable ``metric`` (a list, a
  dict, an array) looked it up in the policy's metrics: ``TypeError: unhashable type``.
* ``Release.half_width(factor)`` multiplied whatever it was given: None, text or an object
  was a TypeError, NaN gave a NaN half-width and a negative factor a negative one.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest

import dpledger as dl
from dpledger.errors import InvalidInput
from dpledger.mechanisms import bar_factor
from tests.factories import policy


@pytest.fixture
def ledger(tmp_path: Path) -> dl.Ledger:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dl.PolicyWarning)
        return dl.Ledger.open(tmp_path / "l.db", policy(), mode="create")


@pytest.mark.parametrize("metric", [["loss"], {"loss": 1}, np.array(["loss"]), None, 3])
def test_metric_spent_refuses_a_metric_that_is_no_name(ledger: dl.Ledger, metric: object) -> None:
    with pytest.raises(InvalidInput, match="metric"):
        ledger.metric_spent(0, "north", metric)  # type: ignore[arg-type]


@pytest.mark.parametrize("factor", [None, "1.96", object(), math.nan, -1.0, math.inf, True])
def test_half_width_refuses_a_factor_that_is_no_number_at_least_0(
    ledger: dl.Ledger, factor: object
) -> None:
    request = dl.ReleaseRequest(epoch=0, metric="loss", region="north", cohort=100)
    rel = ledger.release(request, 50.0)
    with pytest.raises(InvalidInput, match="factor"):
        rel.half_width(factor)  # type: ignore[arg-type]
    assert rel.half_width(bar_factor("ci95")) == rel.error_bar

"""Review 39 (api): three planning arguments still reached untyped errors.

* ``budget_for_scale(dimension=...)``: ``True`` passed ``MechanismFacts``' int check (a bool
  is an int) and reached OpenDP (``TypeError: inferred type is bool``); 2**31 and more
  reached OpenDP's i32 (``ValueError: ... is not representable by i32``).
* ``cohort_floor(bar=...)``: an unhashable bar (a list, an array, a dict) or
  ``Decimal("sNaN")`` reached the cache of ``cohort_floor_for_scale`` before the bar was
  checked (``TypeError: unhashable type``), where ``error_bar`` refused it.
* ``calibrate_clip(percentiles=np.array(99.0))``: a 0-d array is ``Iterable`` by type but
  cannot be iterated (``TypeError: iteration over a 0-d array``).
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest

import dpledger as dl
from dpledger.errors import InvalidInput


@pytest.mark.parametrize("dimension", [True, False, 2**31, 2**63, 10**400])
def test_budget_for_scale_refuses_odd_dimensions(dimension: object) -> None:
    with pytest.raises(InvalidInput, match="dimension"):
        dl.budget_for_scale(1.0, 1.0, dimension=dimension)  # type: ignore[arg-type]


def test_budget_for_scale_reads_a_plain_dimension() -> None:
    assert dl.budget_for_scale(1.0, 1.0, dimension=3).amount > 0


@pytest.mark.parametrize("bar", [[1], np.array(["ci95"]), {}, Decimal("sNaN"), "ci99"])
def test_cohort_floor_refuses_odd_bars(bar: object) -> None:
    with pytest.raises(InvalidInput, match="bar"):
        dl.cohort_floor(1.0, 1.0, 0.1, bar=bar)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="bar"):
        dl.error_bar(1.0, 1.0, 100, bar=bar)  # type: ignore[arg-type]


@pytest.mark.parametrize("percentiles", [np.array(99.0), np.array([[50.0, 99.0]])])
def test_calibrate_clip_refuses_odd_percentile_arrays(percentiles: object) -> None:
    with pytest.raises(InvalidInput, match="percentiles"):
        dl.calibrate_clip(
            np.linspace(0, 1, 500),
            epsilon=1.0,
            cohort=100,
            percentiles=percentiles,  # type: ignore[arg-type]
        )


def test_calibrate_clip_reads_a_flat_percentile_array() -> None:
    cal = dl.calibrate_clip(
        np.linspace(0, 1, 500), epsilon=1.0, cohort=100, percentiles=np.array([50.0, 99.0])
    )
    assert cal is not None

"""Review 42 (diff 2, M): 371f1a2 made ``sum_contributions`` refuse a Contribution whose
bounds are a dict (it raised AttributeError), one step to the side it stayed:
``MetricDeclaration.grid({'cap': 2.0})`` still raised AttributeError ('dict' object has
no attribute 'need'), and ``contribute_sums(data, {'cap': 2.0}, ...)`` (or ``grid=2.0``)
was refused as "expected a Contribution(declaration, bounds, settings) ..." — a
Contribution its caller never built. Both now name the argument, as ``contribute`` does."""

from __future__ import annotations

import pytest

import dpledger as dl
from dpledger.metrics.declarations import DECLARATIONS, Bounds

DATA = {"y_true": [0, 1], "y_pred": [1, 1]}
CONFUSION = DECLARATIONS["confusion_matrix"]


def test_grid_of_a_dict_of_bounds_is_a_typed_refusal() -> None:
    with pytest.raises(dl.InvalidInput, match="confusion_matrix: bounds must be a Bounds"):
        CONFUSION.grid({"cap": 2.0})  # type: ignore[arg-type]


def test_contribute_sums_names_its_own_arguments() -> None:
    with pytest.raises(dl.InvalidInput, match="bounds must be a Bounds, got dict") as bad:
        CONFUSION.contribute_sums(DATA, {"cap": 2.0}, offsets=[0], n_classes=2)  # type: ignore[arg-type]
    assert "Contribution" not in str(bad.value)
    with pytest.raises(dl.InvalidInput, match="grid must be a FixedPoint, got float"):
        CONFUSION.contribute_sums(DATA, Bounds(cap=2.0), offsets=[0], grid=2.0, n_classes=2)  # type: ignore[arg-type]


def test_valid_calls_are_unchanged() -> None:
    got = CONFUSION.contribute_sums(DATA, Bounds(cap=2.0), offsets=[0], n_classes=2)
    assert got.tolist() == [0.0, 1.0, 0.0, 1.0]
    assert CONFUSION.grid(Bounds(cap=2.0)) == dl.metrics.secure_sum.FixedPoint.for_cap(2.0)

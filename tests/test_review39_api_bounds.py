"""Review 39 (api): ``Bounds`` (a metric's per-client bounds, "in plain numbers") took
anything, and the declarations converted it with ``float()``: text ``"x"``, a list, an
array, a dict or an object in ``low``/``high``/``cap`` was float()'s ValueError or
TypeError (in ``contribute`` and in ``grid``), the text ``"2"`` was silently the bound
2.0, and an array ``cap`` or ``dimension`` was numpy's ambiguous-truth ValueError. Now
each bound is read by type when the Bounds is made."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpledger.errors import InvalidInput
from dpledger.metrics.declarations import Bounds

ODD = ["x", "2", [1.0], np.array([1.0, 2.0]), {}, object(), True, np.nan, np.inf]


@pytest.mark.parametrize("field", ["low", "high", "cap", "dimension"])
@pytest.mark.parametrize("value", ODD, ids=[repr(v)[:12] for v in ODD])
def test_odd_bounds_are_refused_when_made(field: str, value: object) -> None:
    with pytest.raises(InvalidInput, match=field):
        Bounds(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("edges", ["x", (2.0, 1.0), (), (1.0, np.nan), {}])
def test_odd_edges_are_refused_when_made(edges: object) -> None:
    with pytest.raises(InvalidInput, match="edges"):
        Bounds(edges=edges)  # type: ignore[arg-type]


def test_an_upside_down_clip_is_refused() -> None:
    with pytest.raises(InvalidInput, match="low < high"):
        Bounds(low=3.0, high=0.0)


def test_plain_bounds_still_read() -> None:
    b = Bounds(low=0, high=Fraction(17, 5), cap=np.float32(4.0), edges=(0.5, 1.0), dimension=10)
    assert b.high == Fraction(17, 5)
    assert Bounds(dimension=np.int64(4)).dimension == 4

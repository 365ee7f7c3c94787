"""Review 42 (met): ``blocks.encode`` (exported: "``grid.encode(rows)``, bit for bit")
ran its fast path on whatever it was given. A boolean array was encoded as 1.0 (the
grid refuses flags), a masked array was encoded with its mask kept, so a masked value
outside the grid was never refused, a list raised AttributeError ('list' object has no
attribute 'size'), and a grid that is no FixedPoint AttributeError too; ``capped_units``
raised TypeError on a list. Anything but a plain float64 array now goes to the grid's
own encode (read by type), and the arguments are checked."""

from __future__ import annotations

import numpy as np
import pytest

import dpledger as dl
from dpledger.metrics.blocks import capped_units, encode
from dpledger.metrics.secure_sum import FixedPoint

GRID = FixedPoint(0.0, 1.0)


@pytest.mark.parametrize(
    ("rows", "why"),
    [
        (np.array([[True, False]]), "bool"),
        (np.ma.array([0.5, 7.0], mask=[False, True]), "masked"),
        ([[0.5, 2.0]], "outside the grid"),
        ([[0.5, True]], "boolean"),
    ],
)
def test_what_the_grid_refuses_encode_refuses(rows: object, why: str) -> None:
    with pytest.raises(dl.InvalidInput, match=why):
        GRID.encode(rows)
    with pytest.raises(dl.InvalidInput, match=why):
        encode(GRID, rows)  # type: ignore[arg-type]


def test_a_list_and_integers_encode_as_the_grid_does() -> None:
    for rows in ([[0.5, 0.25]], np.array([[1, 0]]), np.array([[0.5]], dtype=np.float32)):
        np.testing.assert_array_equal(encode(GRID, rows), GRID.encode(rows))  # type: ignore[arg-type]


def test_bad_arguments_are_invalid_input() -> None:
    with pytest.raises(dl.InvalidInput, match="FixedPoint"):
        encode(None, np.array([0.5]))  # type: ignore[arg-type]
    with pytest.raises(dl.InvalidInput, match="capped_units"):
        capped_units(GRID, [[1]], [0.5])  # type: ignore[arg-type]
    with pytest.raises(dl.InvalidInput, match="capped_units"):
        capped_units(None, np.array([[1]]), np.array([0.5]))  # type: ignore[arg-type]
    got = capped_units(GRID, np.array([[1, 2]]), np.array([0.25]))
    np.testing.assert_array_equal(got, GRID.encode(np.array([[0.25, 0.5]])))

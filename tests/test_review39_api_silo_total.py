"""Review 39 (api): ``SiloSums.total(silos)`` indexed with whatever it was given. A silo
listed twice was summed twice — one person's records in it counted double, past the
sensitivity the ledger charges for the release of that total — and float indices, an
index past the silos or a mask of the wrong length were numpy's untyped IndexError."""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.errors import InvalidInput
from dpledger.metrics.records import record_scalar

SUMS = record_scalar(np.array([0.5, 1.0, 0.25, 0.75]), low=0, high=1, offsets=[0, 1, 2, 3])


@pytest.mark.parametrize(
    "silos",
    [[0, 0], [1, 1, 2], [0.0, 1.0], [7], [-1], [True, False], np.ma.array([0, 1], mask=[0, 1])],
    ids=["twice", "twice-of-three", "floats", "past", "negative", "short-mask", "masked"],
)
def test_odd_silo_choices_are_refused(silos: object) -> None:
    with pytest.raises(InvalidInput, match="silos"):
        SUMS.total(silos)  # type: ignore[arg-type]


def test_indices_and_masks_still_choose_silos() -> None:
    assert SUMS.total([0, 2])[0] == 0.75
    assert SUMS.total(np.array([True, False, True, False]))[0] == 0.75
    assert SUMS.total([])[0] == 0.0
    assert SUMS.total()[0] == 2.5

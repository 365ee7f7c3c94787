"""Review 39 (diff): ``SiloSums.total(silos)`` takes "indices or a mask"; d92c6c7 read
``silos`` with ``read_plain``, which refuses booleans in a list ("booleans among the
numbers (a flag is not a count)"), so a mask given as a list or tuple of booleans — which
worked before, as a numpy mask still does — was refused with a message about counts."""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.errors import InvalidInput
from dpledger.metrics.records import record_scalar

SUMS = record_scalar(np.array([0.5, 1.0, 0.25, 0.75]), low=0, high=1, offsets=[0, 1, 2, 3])


@pytest.mark.parametrize("kind", [list, tuple])
def test_a_mask_given_as_a_list_chooses_silos(kind: type) -> None:
    mask = kind([True, False, True, False])
    assert SUMS.total(mask)[0] == SUMS.total(np.array(list(mask)))[0] == 0.75
    assert SUMS.total(kind([np.bool_(False)] * 4))[0] == 0.0


@pytest.mark.parametrize("silos", [[True, False], [True, 1, 0, 0], [True] * 5])
def test_a_short_or_mixed_list_mask_is_still_refused(silos: object) -> None:
    with pytest.raises(InvalidInput, match="silos"):
        SUMS.total(silos)  # type: ignore[arg-type]

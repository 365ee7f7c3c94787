"""Review 39 (api): a masked array of person ids was read with ``np.asarray``, which
drops the mask: each masked (missing) id became its hidden value, so records whose ids
were masked could each count as a different person and escape ``max_records`` — what
audit 6 (G5) refused for ``None`` and NaN ids, and what a masked entry in a list is
refused for. Now a masked array with any masked id is refused the same way."""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.errors import InvalidInput
from dpledger.metrics.records import keep_per_person, record_scalar

MASKED = np.ma.array([7, 100, 101, 102], mask=[0, 1, 1, 1])


def test_masked_person_ids_are_refused() -> None:
    with pytest.raises(InvalidInput, match="masked"):
        keep_per_person(MASKED, 1)
    with pytest.raises(InvalidInput, match="masked"):
        record_scalar(np.ones(4), low=0, high=1, persons=MASKED, max_records=1)


def test_a_masked_array_without_masked_ids_reads_as_its_ids() -> None:
    ids = np.ma.array([7, 7, 8, 8], mask=False)
    assert keep_per_person(ids, 1).tolist() == [True, False, True, False]

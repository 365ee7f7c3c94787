"""Review 40 (silo): person ids held in NumPy 2's variable-width text (``StringDType``,
dtype kind "T": what ``np.array(..., dtype=StringDType())`` and text columns converted
from dataframes give) were refused with "person ids must be integers or strings" — text
ids refused as not text. They are read as objects now, so the person bound applies, and
a missing id (the dtype's ``na_object``: NaN or None) is refused as missing, as it is in
a list (audit 6, G5): never one pseudo-person per missing id. Deterministic."""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.errors import InvalidInput
from dpledger.metrics.records import keep_per_person, record_confusion

StringDType = np.dtypes.StringDType


def test_text_ids_in_stringdtype_are_bounded_like_a_list() -> None:
    ids = ["p", "q", "p", "p", "q"]
    as_text = np.array(ids, dtype=StringDType())
    assert keep_per_person(as_text, 2).tolist() == keep_per_person(ids, 2).tolist()
    sums = record_confusion([0] * 5, [0] * 5, n_classes=2, persons=as_text, max_records=1)
    assert sums.total().tolist() == [2.0, 0.0, 0.0, 0.0]  # p once, q once
    assert sums.dropped.tolist() == [3]


@pytest.mark.parametrize("na", [np.nan, None])
def test_a_missing_stringdtype_id_is_refused(na: object) -> None:
    ids = np.array(["p", na, "q", na], dtype=StringDType(na_object=na))
    with pytest.raises(InvalidInput, match="missing"):
        keep_per_person(ids, 1)
    with pytest.raises(InvalidInput, match="missing"):
        record_confusion([0] * 4, [0] * 4, n_classes=2, persons=ids, max_records=1)

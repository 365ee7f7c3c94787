"""Review 42 (met): an empty batch's person ids as ``np.array([])`` (numpy's dtype for no
values is float64) were refused, "person ids must be integers or strings, got dtype
float64", while the same empty batch's values, labels and an empty list of ids passed:
a silo with no records could not report under a record-level policy. No ids are no
wrong ids."""

from __future__ import annotations

import numpy as np

from dpledger.metrics.records import keep_per_person, record_confusion, record_scalar


def test_no_records_with_no_person_ids_sum_to_nothing() -> None:
    none = np.array([])
    assert keep_per_person(none, 1).shape == (0,)
    scalar = record_scalar(none, low=0, high=1, persons=none, max_records=1)
    assert scalar.units.tolist() == [[0]]
    assert scalar.records.tolist() == [0]
    counts = record_confusion(
        np.array([], dtype=int), np.array([], dtype=int), n_classes=2, persons=none, max_records=1
    )
    assert counts.units.tolist() == [[0, 0, 0, 0]]

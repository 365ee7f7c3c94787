"""Review (priv): a missing person id must be refused on every path (audit 6, G5), not
merged. ``keep_per_person`` refuses ``["p", nan]`` given as a list, but the record_*
functions pass ``np.asarray(persons)`` to it, which turns NaN into the text ``"nan"``:
every record without an id becomes one pseudo-person whose kept record depends on the
OTHER people's records. Adding one person then changes two records of the sum: an L1
change of 2 where the cross-silo policy (add_remove, max_records_per_person = 1,
cap_per_record = 1) charges Δ = 1. Deterministic (no noise)."""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.errors import InvalidInput
from dpledger.metrics.records import keep_per_person, record_confusion

NAN = float("nan")


def test_keep_per_person_refuses_a_missing_id_in_a_list() -> None:
    with pytest.raises(InvalidInput, match="missing"):
        keep_per_person(["p", NAN], 1)


def test_record_confusion_refuses_the_same_missing_id() -> None:
    with pytest.raises(InvalidInput, match="missing"):
        record_confusion([0, 0], [0, 0], n_classes=2, persons=["p", NAN], max_records=1)


def test_adding_one_person_moves_the_sum_by_at_most_the_charged_sensitivity() -> None:
    # add_remove neighbours: D = {p, B}; D' = {A, p, B}, A listed first; A and B lack an id
    try:
        d = record_confusion([0, 0], [0, 0], n_classes=2, persons=["p", NAN], max_records=1)
        d2 = record_confusion(
            [1, 0, 0], [1, 0, 0], n_classes=2, persons=[NAN, "p", NAN], max_records=1
        )
    except InvalidInput:
        return  # refused: the fix
    assert float(np.abs(d.total() - d2.total()).sum()) <= 1.0  # Δ₁ = cap_per_record × 1

"""record_confusion checked only the labels of the records its person bound kept (review 44 G).

It dropped each person's records past ``max_records`` first and validated the labels of
the rest, so a label outside [0, n_classes) — 7, or −3 — on a dropped record passed
silently (record_histogram and record_regression refuse a bad value on any record), and
an error on a kept record named its index among the kept records, not the caller's.
"""

from __future__ import annotations

import pytest

from dpledger.errors import InvalidInput
from dpledger.metrics import records


@pytest.mark.parametrize("bad", [(7, 0), (0, -3)])
def test_a_bad_label_on_a_dropped_record_is_refused(bad: tuple[int, int]) -> None:
    y_true, y_pred = [0, 1, bad[0]], [0, 1, bad[1]]
    with pytest.raises(InvalidInput, match="at index 2, outside"):
        records.record_confusion(y_true, y_pred, n_classes=2, persons=[1, 1, 1], max_records=2)


def test_a_bad_label_is_named_by_its_own_index() -> None:
    with pytest.raises(InvalidInput, match="label 5 at index 3,"):  # was index 2 (kept ones)
        records.record_confusion(
            [0, 1, 1, 5], [0, 1, 1, 0], n_classes=2, persons=[1, 1, 1, 2], max_records=2
        )


def test_good_labels_count_the_kept_records_only() -> None:
    sums = records.record_confusion(
        [0, 1, 1, 0], [0, 1, 0, 0], n_classes=2, persons=[1, 1, 1, 2], max_records=2
    )
    assert sums.total().tolist() == [2.0, 0.0, 0.0, 1.0]

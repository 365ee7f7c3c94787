"""Review 42 (diff 2, M): dae935e made ``participant_weighted_classification`` refuse a
``labels`` other than 'present'/'all' because "the rows read any other as 'all'" — but
left the rows themselves, the public ``dpledger.metrics.classification_metrics_rows``,
reading a typo ('presnt') as 'all': its macro averages then silently counted absent
classes (f1_macro 0.552 instead of 0.829 here). The rows refuse it now."""

from __future__ import annotations

import numpy as np
import pytest

import dpledger as dl
from dpledger.metrics import classification_metrics_rows

M = np.array([[[3.0, 0.0, 0.0], [1.0, 2.0, 0.0], [0.0, 0.0, 0.0]]])


@pytest.mark.parametrize("labels", ["presnt", "All", None, ["all"]])
def test_a_labels_typo_is_refused_by_the_rows(labels: object) -> None:
    with pytest.raises(dl.InvalidInput, match="labels must be 'present' or 'all'"):
        classification_metrics_rows(M, labels=labels)  # type: ignore[arg-type]


def test_valid_labels_keep_their_values() -> None:
    present = classification_metrics_rows(M, labels="present")["f1_macro"]
    every = classification_metrics_rows(M, labels="all")["f1_macro"]
    np.testing.assert_allclose(present, [0.8285714285714285], rtol=0, atol=1e-15)
    np.testing.assert_allclose(every, [0.5523809523809524], rtol=0, atol=1e-15)

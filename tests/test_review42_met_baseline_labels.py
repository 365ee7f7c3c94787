"""Review 42 (met): ``participant_weighted_classification`` passed ``labels`` to the
unvalidated rows function, which reads anything but "present" as "all": a typo
(``labels="presnt"``) silently averaged over every class (f1_macro 0.259 instead of
0.556 here), where ``classification_metrics`` refuses it."""

from __future__ import annotations

import numpy as np
import pytest

import dpledger as dl
from dpledger.metrics import classification_metrics, participant_weighted_classification

Y, P = np.array([0, 1, 1]), np.array([0, 1, 0])


@pytest.mark.parametrize("labels", ["presnt", "ALL", None, 3])
def test_an_unknown_labels_setting_is_refused(labels: object) -> None:
    with pytest.raises(dl.InvalidInput, match="labels must be 'present' or 'all'"):
        classification_metrics(np.eye(2), labels=labels)  # type: ignore[arg-type]
    with pytest.raises(dl.InvalidInput, match="labels must be 'present' or 'all'"):
        participant_weighted_classification(Y, P, n_classes=3, offsets=[0, 1], labels=labels)  # type: ignore[arg-type]


def test_the_two_settings_still_differ() -> None:
    present = participant_weighted_classification(Y, P, n_classes=3, offsets=[0, 1])
    every = participant_weighted_classification(Y, P, n_classes=3, offsets=[0, 1], labels="all")
    assert present["f1_macro"] == pytest.approx(5 / 9)
    assert every["f1_macro"] == pytest.approx(7 / 27)

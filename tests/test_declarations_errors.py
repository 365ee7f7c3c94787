"""Misuse of the declared-metric API gets InvalidInput naming the problem, not a raw error."""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.errors import InvalidInput
from dpledger.metrics.declarations import DECLARATIONS, Bounds, Contribution, sum_contributions

DATA = {"y_true": np.array([0, 1]), "y_pred": np.array([0, 1])}
CM = DECLARATIONS["confusion_matrix"]


def test_a_missing_setting_is_named_by_sum_contributions() -> None:
    with pytest.raises(InvalidInput, match="confusion_matrix needs the setting 'n_classes'"):
        sum_contributions({"cm": Contribution(CM, Bounds(cap=5.0))}, DATA, offsets=[0])


def test_a_missing_setting_is_named_by_contribute() -> None:
    with pytest.raises(InvalidInput, match="needs the setting 'n_classes'"):
        CM.contribute(DATA, Bounds(cap=5.0), offsets=[0])
    with pytest.raises(InvalidInput, match="needs the setting 'n_classes'"):
        CM.contribute(DATA, Bounds(cap=5.0))


def test_the_setting_given_works() -> None:
    job = Contribution(CM, Bounds(cap=5.0), {"n_classes": 2})
    sums = sum_contributions({"cm": job}, DATA, offsets=[0])
    assert float(np.sum(sums["cm"])) == pytest.approx(2.0)


def test_a_declaration_instead_of_a_contribution_is_named() -> None:
    with pytest.raises(InvalidInput, match=r"expected a Contribution.*got MetricDeclaration"):
        sum_contributions({"cm": CM}, DATA, offsets=[0])  # type: ignore[dict-item]


def test_no_metrics_is_said_plainly() -> None:
    with pytest.raises(InvalidInput, match="no metrics given"):
        sum_contributions({}, DATA, offsets=[0, 2])


def test_contribute_names_bounds_of_the_wrong_type() -> None:
    with pytest.raises(InvalidInput, match="bounds must be a Bounds, got dict"):
        CM.contribute(DATA, {"cap": 5.0}, n_classes=2)  # type: ignore[arg-type]

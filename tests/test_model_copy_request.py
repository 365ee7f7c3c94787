"""Every frozen model's ``model_copy(update=...)`` is validated like a new instance.

Pydantic's copy validates nothing: ``ReleaseRequest.model_copy(update={"bogus": 1})``
carried an unknown field into the request (and its fingerprint), and a cohort of -5 or an
epoch of True reached the ledger's checks unvalidated (noticed by review 39's API review;
the policy's copy was fixed there).
"""

from __future__ import annotations

from typing import Any

import pytest

import dpledger as dl
from dpledger.errors import InvalidInput

REQ = dl.ReleaseRequest(epoch=0, metric="m", region="a", cohort=5)


@pytest.mark.parametrize(
    ("update", "field"),
    [({"bogus": 1}, "bogus"), ({"cohort": -5}, "cohort"), ({"epoch": True}, "epoch")],
)
def test_a_request_copy_is_validated(update: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput, match=rf"invalid ReleaseRequest: {field}"):
        REQ.model_copy(update=update)


def test_a_valid_copy_is_a_new_request_and_no_update_is_an_equal_one() -> None:
    bigger = REQ.model_copy(update={"cohort": 7})
    assert bigger.cohort == 7
    assert (bigger.epoch, bigger.metric, bigger.region) == (0, "m", "a")
    assert REQ.cohort == 5
    assert REQ.model_copy() == REQ
    assert REQ.model_copy(deep=True) == REQ
    with pytest.raises(InvalidInput, match="update must map"):
        REQ.model_copy(update=[("cohort", 7)])  # type: ignore[arg-type]

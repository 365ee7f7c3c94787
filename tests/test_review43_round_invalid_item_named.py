"""Review 43 (round): a malformed item of a round was refused as InvalidInput without
saying which one ("each item must be a (ReleaseRequest, aggregate) pair", "request must
be a ReleaseRequest, got dict", "invalid ReleaseRequest: epoch: ..."): in a round of
dozens of (metric, region) items the caller could not tell which to fix. Every other
refusal of a round names its request ("request i of the round (from 0)"); so do these
now. Nothing is written either way, and a single release says nothing of a round."""

from __future__ import annotations

import pytest
from _stores import StoreUnderTest

from dpledger import ReleaseRequest
from dpledger.errors import InvalidInput


def loss(region: str) -> ReleaseRequest:
    return ReleaseRequest(epoch=0, metric="loss", region=region, cohort=100)


def constructed(**fields: object) -> ReleaseRequest:
    base: dict[str, object] = {
        "epoch": 0,
        "metric": "loss",
        "region": "b",
        "cohort": 100,
        "edges_version": None,
        "policy_version": None,
        "release_id": None,
    }
    return ReleaseRequest.model_construct(**{**base, **fields})


BAD = {
    "not a pair": (loss("b"),),
    "not a request": ({"epoch": 0, "metric": "loss", "region": "b", "cohort": 100}, 30.0),
    "epoch a bool": (constructed(epoch=True), 30.0),
    "cohort zero": (constructed(cohort=0), 30.0),
    "release id with a space": (constructed(release_id="a b"), 30.0),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_malformed_item_of_a_round_is_named(store: StoreUnderTest, case: str) -> None:
    ledger = store.open()
    ledger.release(loss("a"), 30.0)
    before = (len(ledger), ledger.head())
    items = [(loss("a"), 30.0), (loss("b"), 30.0), BAD[case], (loss("b"), 30.0)]
    with pytest.raises(InvalidInput, match=r"request 2 of the round \(from 0\)"):
        ledger.release_round(items)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"request 2 of the round \(from 0\)"):
        ledger.release_round(items, partial=True)  # type: ignore[arg-type]
    assert (len(ledger), ledger.head()) == before


def test_a_single_release_names_no_round(store: StoreUnderTest) -> None:
    ledger = store.open()
    with pytest.raises(InvalidInput) as refused:
        ledger.release(constructed(epoch=True), 30.0)
    assert "of the round" not in str(refused.value)
    assert not ledger.exists

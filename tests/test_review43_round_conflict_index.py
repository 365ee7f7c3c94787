"""Review 43 (round): a round's ReleaseIdConflict named neither the request's index nor
its place in the round. Every other refusal of a round (BudgetExceeded, CohortTooSmall,
InvalidAggregate, PolicyMismatch) carries ``index`` and says "request i of the round
(from 0)", as the README promises for "a round's refusal"; a reused release id — found
in the round itself, in the record, or taken by another writer while the round waited for
the lock — came back with ``index=None`` and the bare verdict text, so a caller of a
20-request round could not tell which request to fix."""

from __future__ import annotations

import numpy as np
import pytest
from _stores import StoreUnderTest

from dpledger import ReleaseIdConflict, ReleaseRequest
from dpledger.ledger import writer as writer_module


def loss(region: str, rid: str | None = None) -> ReleaseRequest:
    return ReleaseRequest(epoch=0, metric="loss", region=region, cohort=100, release_id=rid)


def hist5(region: str, rid: str | None = None) -> ReleaseRequest:
    return ReleaseRequest(epoch=0, metric="hist5", region=region, cohort=100,
                          edges_version="h5/v1", release_id=rid)  # fmt: skip


def _named(e: ReleaseIdConflict, index: int, rid: str) -> None:
    assert (e.index, e.release_id) == (index, rid)
    assert f"request {index} of the round (from 0) (release id {rid!r})" in str(e)


def test_a_recorded_id_reused_in_a_round_names_the_request(store: StoreUnderTest) -> None:
    ledger = store.open()
    ledger.release(loss("a", "old"), 30.0)
    before = (len(ledger), ledger.head())
    items = [(loss("b"), 30.0), (hist5("a"), np.full(5, 20.0)), (loss("b", "old"), 30.0)]
    with pytest.raises(ReleaseIdConflict) as refused:
        ledger.release_round(items)
    _named(refused.value, 2, "old")
    assert (len(ledger), ledger.head()) == before


def test_an_id_repeated_within_a_round_names_the_later_request(store: StoreUnderTest) -> None:
    ledger = store.open()
    items = [(loss("a", "u"), 30.0), (loss("b"), 30.0), (loss("b", "u"), 30.0)]
    with pytest.raises(ReleaseIdConflict) as refused:
        ledger.release_round(items)
    _named(refused.value, 2, "u")
    assert not ledger.exists


def test_an_id_taken_while_the_round_waited_names_the_request(
    store: StoreUnderTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs = store.open(), store.open()
    ours.init()
    look_up = writer_module.Writer._retries

    def look_up_then_race(self: writer_module.Writer, *args: object) -> object:
        out = look_up(self, *args)  # type: ignore[arg-type]  # found nothing under "shared"
        monkeypatch.setattr(writer_module.Writer, "_retries", look_up)
        theirs.release(hist5("a", "shared"), np.full(5, 20.0))
        return out

    monkeypatch.setattr(writer_module.Writer, "_retries", look_up_then_race)
    items = [(loss("b"), 30.0), (loss("a", "shared"), 30.0)]
    with pytest.raises(ReleaseIdConflict) as refused:
        ours.release_round(items)
    _named(refused.value, 1, "shared")
    assert len(ours) == 1


def test_a_single_release_names_no_index(store: StoreUnderTest) -> None:
    """Outside a round (one request) nothing changes: no index, no "request 0" prefix."""
    ledger = store.open()
    ledger.release(loss("a", "old"), 30.0)
    with pytest.raises(ReleaseIdConflict) as refused:
        ledger.release(loss("b", "old"), 30.0)
    assert refused.value.index is None
    assert "of the round" not in str(refused.value)

"""The release path's edges found by review s34 (A): a repeat of a release id inside one
round meets the retry rule even when the policy refuses it, requests built without a field
fail as typed input errors, the dry run reads the recorded policy a release would, a
recorded policy is parsed once, and a refusal's reason never counts the aggregate's cells.
Both stores where a store is involved."""

from __future__ import annotations

import numpy as np
import pytest
from _stores import CONTRACT, CONTRACT_POLICY, StoreUnderTest
from test_retry_next_policy import V2, first_releases, hist, loss

from dpledger import (
    LedgerCorrupted,
    Policy,
    Release,
    ReleaseIdConflict,
    ReleaseRequest,
    Verdict,
    release_confusion,
)
from dpledger.errors import InvalidAggregate, InvalidInput
from dpledger.ledger import Ledger
from dpledger.ledger.store import SqlStore

N = 60
PASSES, REFUSED = 59.0, 61.0  # loss's bounds are [0, 60]: 61 is 0.2 noise scales from 59


def fresh(rid: str) -> ReleaseRequest:
    return ReleaseRequest(epoch=0, metric="loss", region="a", cohort=N, release_id=rid)


def test_a_refused_repeat_in_a_round_is_a_retry_of_the_earlier_request(
    store: StoreUnderTest,
) -> None:
    """As in separate calls: the later request (refused on its own, within the retry
    tolerance of the earlier one's aggregate) gets the earlier one's release."""
    ledger = store.open()
    a = ledger.release(fresh("seq"), PASSES)
    assert ledger.release(fresh("seq"), REFUSED).entry_id == a.entry_id  # separate calls
    whole = ledger.release_round([(fresh("aon"), PASSES), (fresh("aon"), REFUSED)])
    partial = ledger.release_round([(fresh("par"), PASSES), (fresh("par"), REFUSED)], partial=True)
    again = ledger.release_round([(fresh("par"), PASSES), (fresh("par"), REFUSED)], partial=True)
    for result in (whole, partial, again):
        first, second = result.outcomes
        assert isinstance(first, Release)
        assert isinstance(second, Release)
        assert second.entry_id == first.entry_id
    assert again.outcomes[0].entry_id == partial.outcomes[0].entry_id  # type: ignore[union-attr]
    assert len(ledger) == 3


def test_a_refused_request_before_its_twin_or_far_from_it_is_refused(
    store: StoreUnderTest,
) -> None:
    ledger = store.open()
    with pytest.raises(InvalidAggregate):  # refused first, as a first call would be
        ledger.release_round([(fresh("x"), REFUSED), (fresh("x"), PASSES)])
    later, _ = ledger.release_round([(fresh("y"), 1.0), (fresh("y"), 500.0)], partial=True).outcomes
    assert isinstance(later, Release)
    _, far = ledger.release_round([(fresh("z"), 1.0), (fresh("z"), 500.0)], partial=True).outcomes
    assert isinstance(far, Verdict)  # 500 is far from 1: not the earlier one's retry
    assert len(ledger) == 2
    with pytest.raises(InvalidAggregate):
        ledger.release_round([(fresh("w"), 1.0), (fresh("w"), float("nan"))])
    assert len(ledger) == 2  # the round was all or nothing


@pytest.mark.parametrize("left_out", ["cohort", "metric", "epoch", "region"])
def test_a_request_built_without_a_field_is_invalid_input(
    store: StoreUnderTest, left_out: str
) -> None:
    fields = {"epoch": 0, "metric": "loss", "region": "a", "cohort": N}
    del fields[left_out]
    request = ReleaseRequest.model_construct(**fields)  # type: ignore[arg-type]
    named = {"metric": "cm"} if "metric" in fields else {}
    matrix = ReleaseRequest.model_construct(**{**fields, **named})  # type: ignore[arg-type]
    ledger = store.open(with_matrix("1"))
    for attempt in (
        lambda: ledger.check(request, 30.0),
        lambda: ledger.release(request, 30.0),
        lambda: ledger.release_round([(request, 30.0)], partial=True),
        lambda: ledger.release_parallel({"a": (request, 30.0)}),
        lambda: release_confusion(ledger, matrix, np.ones(4)),
    ):
        with pytest.raises(InvalidInput, match=left_out if left_out != "metric" else "Field"):
            attempt()


def test_the_dry_run_of_a_retry_reads_the_recorded_policy_as_a_release_does(
    store: StoreUnderTest,
) -> None:
    first_releases(store)
    with store.tampering():
        store.raw("UPDATE dpl_policies SET body = 'not json'")
    ledger = store.open(V2)
    with pytest.raises(LedgerCorrupted, match="unreadable"):
        ledger.check(hist(), np.full(5, 12.0))
    with pytest.raises(LedgerCorrupted, match="unreadable"):
        ledger.release(hist(), np.full(5, 12.0))


def test_a_recorded_policy_is_read_once_per_handle(
    store: StoreUnderTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    first_releases(store)
    ledger = store.open(V2)
    reads: list[str] = []
    body = SqlStore.policy_body

    def counted(self: SqlStore, policy_hash: str) -> str | None:
        reads.append(policy_hash)
        return body(self, policy_hash)

    monkeypatch.setattr(SqlStore, "policy_body", counted)
    retries = [(hist(), np.full(5, 12.0)), (loss(), 40.0)] * 20
    assert all(isinstance(o, Release) for o in ledger.release_round(retries).outcomes)
    assert len(reads) == 1


@pytest.mark.parametrize(
    ("metric", "aggregates", "said"),
    [
        ("hist5", [[-1.0, 2, 3, 4, 5], [-1.0, -2, -3, 4, 5]], "a count is negative"),
        ("hist5", [[np.nan, 1, 1, 1, 1], [np.nan, np.inf, 1, 1, 1]], "a value is not finite"),
    ],
)
def test_a_refusal_never_counts_the_aggregates_cells(
    metric: str, aggregates: list[list[float]], said: str
) -> None:
    """Two aggregates that fail one check in one and in several cells get one reason (the
    number of failing cells is the aggregate's, not a public fact)."""
    request = ReleaseRequest(epoch=0, metric=metric, region="a", cohort=N, edges_version="h5/v1")
    with Ledger.open(":memory:", CONTRACT, mode="create") as ledger:
        reasons = [
            [c.reason for c in ledger.check(request, np.array(a)).failures] for a in aggregates
        ]
    assert reasons[0] == reasons[1]
    assert reasons[0][0].startswith(said)


CM = """
[metrics.cm]
kind = "vector_sum"
dimension = 4
nonnegative = NONNEG
cap_per_client = "CAP"
epsilon = "0.1"
"""


def with_matrix(cap: str, nonnegative: str = "true", version: str = "1") -> Policy:
    text = CONTRACT_POLICY.replace('epoch_epsilon = "4"', 'epoch_epsilon = "400"')
    text += CM.replace("CAP", cap).replace("NONNEG", nonnegative)
    return Policy.from_toml(text.replace('version = "1"', f'version = "{version}"'))


@pytest.mark.parametrize(
    "later",
    [with_matrix("4", version="2"), with_matrix("1", "false", version="2")],
    ids=["cap-raised", "made-signed"],
)
def test_a_derived_retry_under_a_later_policy_is_the_original(
    store: StoreUnderTest, later: Policy
) -> None:
    """release_confusion's retry derives with the cap of the policy the entry was released
    under (a raised cap lifted the original's unusable flags), and is not refused by the
    later version's checks (a metric made signed)."""
    first = store.open(with_matrix("1"))
    m = np.array([[25.0, 5.0], [5.0, 25.0]])
    requests = [
        ReleaseRequest(epoch=0, metric="cm", region="a", cohort=N, release_id=f"cm-{k}")
        for k in range(30)
    ]
    originals = [release_confusion(first, r, m) for r in requests]
    again = store.open(later)
    for r, d1 in zip(requests, originals, strict=True):
        d2 = release_confusion(again, r, m)
        assert d2.release.entry_id == d1.release.entry_id
        assert d2.unusable == d1.unusable
        assert d2.metrics == pytest.approx(d1.metrics, nan_ok=True)
    assert len(again) == 30


def test_release_confusion_never_counts_the_negative_cells(store: StoreUnderTest) -> None:
    ledger = store.open(with_matrix("1"))
    request = ReleaseRequest(epoch=0, metric="cm", region="a", cohort=N)
    said = []
    for cells in ([-1.0, 5, 5, 5], [-1.0, -1, -1, 5]):
        with pytest.raises(InvalidInput) as refused:
            release_confusion(ledger, request, np.array(cells))
        said.append(str(refused.value))
    assert said[0] == said[1]
    assert "has a negative cell" in said[0]
    assert len(ledger) == 0


def test_a_dry_run_that_is_no_retry_reads_no_recorded_policy(store: StoreUnderTest) -> None:
    """Another request under a recorded id is the conflict it is, in the dry run as in the
    release, even when the recorded policy cannot be read (only a retry reads it)."""
    first_releases(store)
    with store.tampering():
        store.raw("UPDATE dpl_policies SET body = 'not json'")
    ledger = store.open(V2)
    other = hist().model_copy(update={"region": "b", "edges_version": "h5/v2"})
    verdict = ledger.check(other, np.full(5, 12.0))
    assert [c.name for c in verdict.failures] == ["release_id"]
    with pytest.raises(ReleaseIdConflict):
        ledger.release(other, np.full(5, 12.0))

"""A retry after the ledger is reopened under its policy's next version (review s33, R5).

A release id committed under version 1 answers its retry with the recorded release even
when version 2 would refuse the request itself (its edges changed, its clip narrowed, the
metric was removed): the retry is read against the record, not the new policy. Anything
that is not the retry (another aggregate, another caller) still meets version 2's refusal.
Both stores.
"""

from __future__ import annotations

import numpy as np
import pytest
from _stores import CONTRACT_POLICY, StoreUnderTest

from dpledger import PolicyMismatch, Release, ReleaseRequest, Verdict
from dpledger.errors import InvalidAggregate, ReleaseRefused
from dpledger.ledger import Ledger
from dpledger.policy import Policy

N = 60
V2 = Policy.from_toml(
    CONTRACT_POLICY.replace('version = "1"', 'version = "2"')
    .replace('edges_version = "h5/v1"', 'edges_version = "h5/v2"')  # new edges
    .replace(
        'high = "1", source = "contract test" }\ntarget', 'high = "0.5", source = "c" }\ntarget'
    )
)
"""Version 2: ``hist5`` has new edges, ``loss`` a clip half as wide."""


def hist(rid: str = "h-1") -> ReleaseRequest:
    return ReleaseRequest(epoch=0, metric="hist5", region="a", cohort=N,
                          edges_version="h5/v1", release_id=rid)  # fmt: skip


def loss(rid: str = "l-1") -> ReleaseRequest:
    return ReleaseRequest(epoch=0, metric="loss", region="a", cohort=N, release_id=rid)


HIST = np.full(5, 12.0)
LOSS = 40.0  # within version 1's bounds (n x 1 = 60), beyond version 2's (n x 0.5 = 30)


def first_releases(store: StoreUnderTest) -> tuple[Release, Release]:
    ledger = store.open()
    return ledger.release(hist(), HIST), ledger.release(loss(), LOSS)


def same(a: Release, b: Release) -> bool:
    return (
        a.entry_id == b.entry_id
        and a.entry_hash == b.entry_hash
        and np.array_equal(a.noisy_sum, b.noisy_sum)
        and a.error_bar == b.error_bar
        and a.charge == b.charge
    )


def test_version_2_refuses_these_requests_as_new_releases(store: StoreUnderTest) -> None:
    """The premise: without a recorded id, version 2 refuses both requests."""
    first_releases(store)
    ledger = store.open(V2)
    with pytest.raises(PolicyMismatch, match="edges_version"):
        ledger.release(hist(rid="new-h"), HIST)
    with pytest.raises(InvalidAggregate, match="clipping_bounds"):
        ledger.release(loss(rid="new-l"), LOSS)
    assert len(ledger) == 2


def test_a_retry_that_version_2_would_refuse_returns_its_recorded_release(
    store: StoreUnderTest,
) -> None:
    h1, l1 = first_releases(store)
    ledger = store.open(V2)
    head = ledger.head()
    assert same(ledger.release(hist(), HIST), h1)
    assert same(ledger.release(loss(), LOSS + 1e-9), l1)  # a retry's rounding is a retry
    partial = ledger.release_round([(hist(), HIST), (loss(), LOSS)], partial=True)
    whole = ledger.release_round([(loss(), LOSS), (hist(), HIST)])
    assert [same(a, b) for a, b in zip(partial.outcomes, (h1, l1), strict=True)] == [True] * 2
    assert [same(a, b) for a, b in zip(whole.outcomes, (l1, h1), strict=True)] == [True] * 2
    assert ledger.head() == head  # nothing written, nothing charged
    assert len(ledger) == 2
    assert ledger.spent(0).amount == h1.charge.amount + l1.charge.amount
    assert ledger.verify().ok


def test_a_retry_of_a_metric_version_2_removed_returns_its_recorded_release(
    store: StoreUnderTest,
) -> None:
    _, l1 = first_releases(store)
    text = CONTRACT_POLICY.replace('version = "1"', 'version = "2"')
    start = text.index("[metrics.loss]")
    dropped = Policy.from_toml(text[:start] + text[text.index("[metrics.big]") :])
    ledger = store.open(dropped)
    assert same(ledger.release(loss(), LOSS), l1)
    assert ledger.check(loss(), LOSS).approved
    with pytest.raises(PolicyMismatch, match="metric_known"):
        ledger.release(loss(rid="l-2"), LOSS)


@pytest.mark.parametrize(
    "aggregate",
    [LOSS + 500.0, float("nan"), float("inf"), np.array([LOSS, LOSS]), "40", None],
    ids=["far", "nan", "inf", "two-values", "text", "none"],
)
def test_anything_but_the_retry_meets_version_2s_refusal(
    store: StoreUnderTest, aggregate: object
) -> None:
    """Another aggregate (or one that is not real numbers) under the recorded id is not
    the retry: version 2 refuses it as it would any request, in every form of release."""
    first_releases(store)
    ledger = store.open(V2)
    head = ledger.head()
    with pytest.raises(ReleaseRefused):
        ledger.release(loss(), aggregate)
    (refused,) = ledger.release_round([(loss(), aggregate)], partial=True).outcomes
    assert isinstance(refused, Verdict)
    assert not refused.approved
    assert not ledger.check(loss(), aggregate).approved
    assert ledger.head() == head


def test_another_principal_or_request_under_the_id_is_refused(store: StoreUnderTest) -> None:
    first_releases(store)
    ledger = store.open(V2)
    with pytest.raises(PolicyMismatch, match="edges_version"):
        ledger.release(hist(), HIST, principal="someone-else")
    other = hist().model_copy(update={"cohort": N + 1})
    with pytest.raises(PolicyMismatch, match="edges_version"):
        ledger.release(other, HIST)
    assert not ledger.check(hist(), HIST, principal="someone-else").approved


def test_the_dry_run_says_what_the_retry_will_do(store: StoreUnderTest) -> None:
    """``check`` approves the retry at no charge: its release_id check names the entry and
    the policy it was recorded under; version 2's checks are shown, as not applied."""
    h1, _ = first_releases(store)
    ledger = store.open(V2)
    verdict = ledger.check(hist(), HIST)
    assert verdict.approved
    assert verdict.charge is not None
    assert verdict.charge.amount == 0
    checks = {c.name: c for c in verdict.checks}
    assert "is entry 1 (policy contract 1)" in checks["release_id"].reason
    assert checks["edges_version"].reason.startswith("not applied to a retry (")
    assert "h5/v2" in checks["edges_version"].reason
    assert ledger.release(hist(), HIST).entry_id == h1.entry_id


def test_a_read_only_handle_still_refuses_to_release(store: StoreUnderTest) -> None:
    first_releases(store)
    with Ledger.open(store.target, V2, mode="read") as reader:
        with pytest.raises(Exception, match="mode='write'"):
            reader.release(hist(), HIST)
        assert reader.check(hist(), HIST).approved  # the dry run reads the record

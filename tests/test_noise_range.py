"""A noise scale near the doubles' limit is refused before any draw (review P3): one such
request was a PolicyError after drawing, which ended a whole ``partial=True`` round. Now
the ``noise_range`` check (public facts: the scale, the grid, the policy's largest
aggregate for the cohort) refuses that request alone, in ``check`` too. Both stores."""

from __future__ import annotations

import dataclasses
import sys
import warnings

import pytest
from _stores import CONTRACT_POLICY, StoreUnderTest
from test_rounds import _files

from dpledger import NoiseOutOfRange, Policy, Release, ReleaseRequest, Verdict
from dpledger.approval.checks import costing
from dpledger.approval.noise_range import noise_reach, tail_scales

TINY = """
[metrics.tiny]
kind = "scalar_mean"
epsilon = "2.2250738585072014e-308"  # scale 4.5e307: 1.8% of draws overflowed a double
clip = { low = "0", high = "1", source = "test" }
"""
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # a tiny ε is unwise, not invalid
    POLICY = Policy.from_toml(CONTRACT_POLICY + TINY)

N = 100


def req(metric: str, rid: str | None = None) -> ReleaseRequest:
    return ReleaseRequest(epoch=0, metric=metric, region="a", cohort=N, release_id=rid)


def test_a_partial_round_refuses_the_overflowing_request_and_keeps_the_others(
    store: StoreUnderTest,
) -> None:
    ledger = store.open(POLICY)
    items = [(req("loss"), 30.0), (req("tiny"), 30.0), (req("loss", "l2"), 30.0)]
    result = ledger.release_round(items, partial=True)
    kept, refused, also = result.outcomes
    assert isinstance(kept, Release)
    assert isinstance(also, Release)
    assert isinstance(refused, Verdict)
    assert [c.name for c in refused.failures] == ["noise_range"]
    assert "raise the metric's ε or narrow its clip or cap" in refused.failures[0].reason
    assert len(ledger) == 2
    assert ledger.verify().ok


def test_an_all_or_nothing_round_is_refused_naming_the_request(store: StoreUnderTest) -> None:
    ledger = store.open(POLICY)
    ledger.release(req("loss"), 30.0)
    before, files = (ledger.head(), len(ledger), ledger.spent(0, "a")), _files(store)
    with pytest.raises(NoiseOutOfRange) as refused:
        ledger.release_round([(req("loss", "x"), 30.0), (req("tiny", "t-1"), 30.0)])
    assert (refused.value.index, refused.value.release_id) == (1, "t-1")
    assert "request 1 of the round (from 0) (release id 't-1')" in str(refused.value)
    assert "noise_range" in str(refused.value)
    with pytest.raises(NoiseOutOfRange):
        ledger.release(req("tiny"), 30.0)
    assert (ledger.head(), len(ledger), ledger.spent(0, "a")) == before
    assert _files(store) == files  # byte for byte (SQLite)


def test_check_reports_the_same_failing_check(store: StoreUnderTest) -> None:
    ledger = store.open(POLICY)
    ledger.release(req("loss"), 30.0)
    low, high = ledger.check(req("tiny"), 0.0), ledger.check(req("tiny"), 100.0)
    assert [c.name for c in low.failures] == ["noise_range"]
    assert low.failures == high.failures  # public facts only: never the aggregate
    assert ledger.check(req("loss"), 30.0).approved


def test_the_threshold_makes_an_overflow_astronomically_unlikely() -> None:
    facts = costing(POLICY, "loss", N).facts
    tiny = costing(POLICY, "tiny", N).facts
    assert facts is not None
    assert tiny is not None
    assert 691 < tail_scales(facts) < 692  # Laplace: 2e^(-t) = 1e-300
    assert noise_reach(tiny, 100.0) == float("inf")
    edge = dataclasses.replace(facts, scale=0.99 * sys.float_info.max / tail_scales(facts))
    assert noise_reach(edge, 0.0) < sys.float_info.max

"""A noise scale near the doubles' limit is refused before any draw (review P3): one such
request was a PolicyError after drawing, which ended a whole ``partial=True`` round. Now
the ``noise_range`` check (public facts: the scale, the grid, the policy's largest
aggregate for the cohort) refuses that request alone, in ``check`` too. Both stores."""

from __future__ import annotations

import dataclasses
import math
import sys
import warnings

import pytest
from _stores import CONTRACT_POLICY, StoreUnderTest
from test_rounds import _files

from dpledger import InvalidAggregate, NoiseOutOfRange, Policy, Release, ReleaseRequest, Verdict
from dpledger.accounting import EpochSpend
from dpledger.approval import evaluate
from dpledger.approval.aggregate import noise_room
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


HUGE = """
[metrics.huge]
kind = "scalar_mean"
epsilon = "1e-300"  # scale 1e300: the declared n = 100's sums and noise fit a double
clip = { low = "0", high = "1", source = "test" }
"""
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    ADD_REMOVE = Policy.from_toml(
        (CONTRACT_POLICY + HUGE).replace('neighbouring = "replace"', 'neighbouring = "add_remove"')
    )


def test_add_remove_aggregate_beyond_the_cohort_is_refused_before_any_draw(
    store: StoreUnderTest,
) -> None:
    """Under add_remove any finite sum passes the aggregate checks (the count is private),
    and noise_range bounds the noisy value for the declared cohort's n x magnitude. An
    aggregate at the doubles' limit (more clients than declared: not truncated) overflowed
    in half the draws, after drawing, as an InternalError asking for a bug report. Now the
    clipping check refuses it before any draw (on the aggregate alone, never the noise),
    in a dry run too, naming the room and not the aggregate; nothing is written."""
    ledger = store.open(ADD_REMOVE)
    assert costing(ADD_REMOVE, "huge", N).noise is not None
    assert costing(ADD_REMOVE, "huge", N).noise.passed  # type: ignore[union-attr]
    ledger.release(req("loss"), 30.0)
    before, files = (ledger.head(), len(ledger), ledger.spent(0, "a")), _files(store)
    edge = sys.float_info.max
    dry = ledger.check(req("huge"), edge)
    assert [c.name for c in dry.failures] == ["clipping_bounds"]
    said = dry.failures[0].reason
    assert "truncate to it" in said
    assert "1.8e+308" not in said  # names the room, never the aggregate
    assert repr(edge) not in said
    for attempt in range(40):  # a draw-dependent outcome would let some through (2^-40)
        with pytest.raises(InvalidAggregate) as bad:
            ledger.release(req("huge", f"h-{attempt}"), edge)
        assert "clipping_bounds" in str(bad.value)
    with pytest.raises(InvalidAggregate, match="request 1 of the round"):
        ledger.release_round([(req("loss"), 30.0), (req("huge"), -edge)])
    assert (ledger.head(), len(ledger), ledger.spent(0, "a")) == before
    assert _files(store) == files  # byte for byte (SQLite)
    result = ledger.release_round([(req("loss"), 30.0), (req("huge"), edge)], partial=True)
    kept, refused = result.outcomes
    assert isinstance(kept, Release)
    assert isinstance(refused, Verdict)
    assert [c.name for c in refused.failures] == ["clipping_bounds"]
    assert len(ledger) == 2
    fine = ledger.release(req("huge"), 100.0)  # the declared cohort's sums always fit
    assert math.isfinite(float(fine.noisy_sum[0]))
    assert ledger.check(req("huge"), 1e307).approved  # far beyond n x magnitude, room left
    assert ledger.verify().ok


def test_a_replace_policy_or_a_small_scale_keeps_the_largest_double_as_room() -> None:
    assert noise_room(POLICY, "loss", N) == sys.float_info.max  # replace
    # scale 10: its 691 scales are far below the largest double's ulp (~2e292)
    assert noise_room(ADD_REMOVE, "loss", N) == sys.float_info.max
    found = evaluate(ADD_REMOVE, req("loss"), 30.0, EpochSpend.empty())
    (bounds,) = [c for c in found.verdict.checks if c.name == "clipping_bounds"]
    assert bounds.reason.startswith("sum ≥ 0 as clip [0, 1] allows (add_remove:")  # as before
    assert "room" not in bounds.reason
    room = noise_room(ADD_REMOVE, "huge", N)  # scale 1e300: about 691 scales below the limit
    assert sys.float_info.max - 7e302 < room < sys.float_info.max - 6.8e302

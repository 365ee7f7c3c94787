"""Approval checks: each refusal names its check and maps to a typed error."""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest
from factories import policy, policy_text
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dpledger import (
    BudgetExceeded,
    CohortTooSmall,
    InvalidAggregate,
    Policy,
    PolicyMismatch,
    PolicyWarning,
    ReleaseRequest,
    Verdict,
)
from dpledger.accounting import EpochSpend
from dpledger.approval import evaluate, refusal
from dpledger.types import Budget

P = policy()


def spend(by_scope: dict[str, Fraction] | None = None, metric: str = "other") -> EpochSpend:
    """An epoch's spend: each scope's total as if another metric had spent it."""
    return EpochSpend({(scope, metric): v for scope, v in (by_scope or {}).items()})


def req(metric: str = "hist5", **kw: object) -> ReleaseRequest:
    fields: dict[str, object] = {"epoch": 0, "metric": metric, "region": "north", "cohort": 100}
    if metric == "hist5":
        fields["edges_version"] = "h5/v1"
    return ReleaseRequest(**{**fields, **kw})  # type: ignore[arg-type]


def verdict_of(
    request: ReleaseRequest, aggregate: object, spent: dict[str, Fraction] | None = None
) -> Verdict:
    return evaluate(P, request, aggregate, spend(spent)).verdict


GOOD = [10.0, 20.0, 30.0, 40.0, 50.0]


@pytest.mark.parametrize(
    ("request_", "aggregate", "check", "error"),
    [
        (req(), [np.nan, *GOOD[1:]], "aggregate_finite", InvalidAggregate),
        (req(), [np.inf, *GOOD[1:]], "aggregate_finite", InvalidAggregate),
        (req(), GOOD[:4], "aggregate_shape", InvalidAggregate),
        (req(), [GOOD, GOOD], "aggregate_shape", InvalidAggregate),
        (req(), np.array([*GOOD[:4], None], dtype=object), "aggregate_dtype", InvalidAggregate),
        (req(), np.array([*GOOD[:4], True], dtype=object), "aggregate_dtype", InvalidAggregate),
        (req(), np.array(GOOD, dtype=complex), "aggregate_dtype", InvalidAggregate),
        (req(), ["1", "2", "3", "4", "5"], "aggregate_dtype", InvalidAggregate),
        (req(), [2**60, 0, 0, 0, 0], "clipping_bounds", InvalidAggregate),
        (req(), [-1.0, *GOOD[1:]], "counts_nonnegative", InvalidAggregate),
        (req(), [401.0, 0, 0, 0, 0], "clipping_bounds", InvalidAggregate),
        (req("loss"), 201.0, "clipping_bounds", InvalidAggregate),
        (req("loss"), -0.5, "clipping_bounds", InvalidAggregate),
        (req("gap"), [-150.0, 60.0, 0.0, 0.0], "clipping_bounds", InvalidAggregate),
        (req("nope"), GOOD, "metric_known", PolicyMismatch),
        (req(region="west"), GOOD, "region_known", PolicyMismatch),
        (req(edges_version="h5/v0"), GOOD, "edges_version", PolicyMismatch),
        (req(edges_version=None), GOOD, "edges_version", PolicyMismatch),
        (req(policy_version="0"), GOOD, "policy_version", PolicyMismatch),
        (req("floored", cohort=50), 10.0, "cohort_floor", CohortTooSmall),
    ],
)
def test_each_bad_request_fails_its_named_check_with_a_typed_error(
    request_: ReleaseRequest, aggregate: object, check: str, error: type[Exception]
) -> None:
    v = verdict_of(request_, aggregate)
    assert not v.approved
    assert v.failures[0].name == check
    assert v.failures[0].reason
    assert type(refusal(v)) is error


def test_checks_after_a_failure_are_reported_as_skipped() -> None:
    v = verdict_of(req("nope"), GOOD)
    statuses = {c.name: c.status for c in v.checks}
    assert statuses["metric_known"] == "FAIL"
    assert statuses["budget"] == "skipped"
    assert "not checked" in next(c.reason for c in v.checks if c.name == "budget")


def test_over_budget_carries_requested_spent_remaining_and_scope() -> None:
    v = verdict_of(req(), GOOD, {"north": Fraction(3, 4)})
    err = refusal(v)
    assert isinstance(err, BudgetExceeded)
    assert (err.requested, err.spent, err.remaining) == (
        Budget(Fraction(1, 2), "epsilon"),
        Budget(Fraction(3, 4), "epsilon"),
        Budget(Fraction(1, 4), "epsilon"),
    )
    assert err.scope == "epoch 0, region north"
    assert "requested epsilon 1/2, spent 3/4, remaining 1/4" in str(err)


def test_global_release_is_bound_by_the_most_spent_region() -> None:
    v = verdict_of(req(region="*"), GOOD, {"south": Fraction(3, 4), "north": Fraction(1, 4)})
    assert v.failures[0].name == "budget"
    assert v.budget is not None
    assert "binding: south" in v.budget.scope


@pytest.mark.parametrize(
    "aggregate",
    [
        GOOD,
        np.array(GOOD, dtype=np.float32),
        np.array([1, 2, 3, 4, 5], dtype=np.int16),
        tuple(GOOD),
    ],
)
def test_real_aggregates_that_widen_exactly_are_approved(aggregate: object) -> None:
    result = evaluate(P, req(), aggregate, spend()).prepared
    assert result is not None
    assert result.values.dtype == np.float64
    assert result.values.shape == (5,)
    assert result.verdict.charge == Budget(Fraction(1, 2), "epsilon")


def test_scalar_accepts_a_number_or_a_length_one_vector() -> None:
    for agg in (150.0, [150.0], np.float32(150.0)):
        assert evaluate(P, req("loss"), agg, spend()).prepared is not None


def test_sum_at_exactly_clip_times_n_is_not_refused_for_float_rounding() -> None:
    n = 1000
    total = float(np.sum(np.full(n, 2.0 - 1e-16)))  # a secure sum of values at the clip
    assert evaluate(P, req("loss", cohort=n), total * (1 + 1e-12), spend()).prepared is not None


def test_verdict_as_dict_lists_every_check() -> None:
    d = verdict_of(req(), GOOD).as_dict()
    assert d["approved"] is True
    assert d["charge"] == "1/2"
    assert next(c["name"] for c in d["checks"]) == "metric_known"  # type: ignore[index]


def test_over_committed_policy_refuses_weighted_metrics_on_budget_not_by_crashing() -> None:
    from factories import SPATIAL

    from dpledger import Policy

    text = SPATIAL.read_text().replace('weight = "1"', 'epsilon = "0.5"', 3)
    with pytest.warns(PolicyWarning, match="over-committed"):
        p = Policy.from_toml(text)
    request = ReleaseRequest(epoch=0, metric="coverage", region="na", cohort=5000,
                             edges_version="coverage-cells/v1")  # fmt: skip
    found = evaluate(p, request, [1.0] * 6, spend())
    assert found.prepared is None
    result = found.verdict
    assert result.failures[0].name == "budget"
    assert "over-committed by 0.5" in result.failures[0].reason
    assert type(refusal(result)) is PolicyMismatch


def test_absolute_budgets_that_use_all_of_eval_say_so_not_over_committed_by_0() -> None:
    from factories import SPATIAL

    from dpledger import Policy

    text = SPATIAL.read_text().replace('weight = "1"', 'epsilon = "1"', 1)  # ε_eval = 1
    p = Policy.from_toml(text)  # exactly committed: no warning
    request = ReleaseRequest(epoch=0, metric="coverage", region="na", cohort=5000,
                             edges_version="coverage-cells/v1")  # fmt: skip
    reason = evaluate(p, request, [1.0] * 6, spend()).verdict.failures[0].reason
    assert "use all of eval_budget / rounds" in reason
    assert "over-committed" not in reason


@pytest.mark.parametrize(
    ("request_", "aggregate"),
    [(req("loss"), 137.123), (req("loss"), 999.875), (req(), [11.5, 22.25, 33.0, 40.0, 50.125])],
)
def test_verdicts_never_echo_the_unnoised_aggregate(
    request_: ReleaseRequest, aggregate: object
) -> None:
    import json

    text = json.dumps(verdict_of(request_, aggregate).as_dict())
    total = float(np.sum(aggregate))
    for shown in (f"{total:g}", f"{total:.4g}", f"{total:.2f}", repr(total)):
        assert shown not in text


def test_cohort_too_small_carries_the_cohort_and_the_floor() -> None:
    err = refusal(verdict_of(req("floored", cohort=50), 10.0))
    assert isinstance(err, CohortTooSmall)
    assert (err.cohort, err.floor) == (50, 300)  # ln 20 · (1 / 0.1) / 0.1 → 300


@pytest.mark.parametrize("neighbouring", ["replace", "add_remove"])
def test_a_passing_aggregates_shared_checks_are_the_ones_each_check_would_give(
    neighbouring: str,
) -> None:
    # evaluate shares one tuple of checks per (metric, shape, n) when they all pass; it
    # must be exactly what running each check gives, and a near miss must not take it
    from dpledger.approval.aggregate import aggregate_checks, each_aggregate_check

    p = policy(neighbouring=neighbouring)
    passing = {
        "loss": [np.array(150.0), np.array([0.0]), np.array(200.0)],
        "loss_b": [np.array(-100.0), np.array(300.0)],
        "hist5": [np.array([10.0, 20, 30, 40, 0]), np.zeros(5)],
        "gap": [np.array([-3.0, 5, 0, 1]), np.array([-50.0, 50, 50, 50])],
    }
    for metric, arrays in passing.items():
        spec = p.metric(metric)
        for arr in arrays:
            shared = aggregate_checks(spec, arr, 100, p, metric)
            assert tuple(shared) == tuple(each_aggregate_check(spec, arr, 100, p, metric))
            assert all(c.passed for c in shared)
    beyond_n = {"loss": np.array(200.0 * (1 + 1e-6)), "gap": np.array([-50.0, 50, 50, 51])}
    failing = {"loss": np.array(-1e-3), "hist5": np.array([10.0, -1, 0, 0, 0])}
    if neighbouring == "replace":
        failing.update(beyond_n)  # n is public: a sum beyond n clients' reach is refused
    else:  # the count is private: a sum beyond the planned n's reach passes (its sign holds)
        for metric, arr in beyond_n.items():
            assert all(c.passed for c in aggregate_checks(p.metric(metric), arr, 100, p, metric))
    for metric, arr in failing.items():
        spec = p.metric(metric)
        checks = aggregate_checks(spec, arr, 100, p, metric)
        assert checks == each_aggregate_check(spec, arr, 100, p, metric)
        assert not all(c.passed for c in checks)


_SCOPES = ["*", "north", "south", "east"]
_METRICS = ["loss", "loss_b"]


@settings(max_examples=400, deadline=None)
@given(
    pooled=st.booleans(),
    region=st.sampled_from(_SCOPES),
    metric=st.sampled_from(_METRICS),
    spent=st.dictionaries(
        st.tuples(st.sampled_from(_SCOPES), st.sampled_from(_METRICS)),
        st.integers(0, 16).map(lambda k: Fraction(k, 8))  # lands on the limits exactly
        | st.fractions(min_value=0, max_value=2, max_denominator=40),
        max_size=8,
    ),
    bound=st.sampled_from(["none", "same", "other"]),
)
@example(pooled=True, region="north", metric="loss", spent={("north", "loss"): Fraction(3, 4)},
         bound="none")  # fmt: skip
@example(pooled=True, region="*", metric="loss", spent={("south", "loss_b"): Fraction(3, 4)},
         bound="same")  # fmt: skip
@example(pooled=True, region="east", metric="loss_b", spent={("*", "loss"): Fraction(7, 8)},
         bound="none")  # fmt: skip
def test_the_lock_time_admission_decides_as_the_full_recheck(
    pooled: bool,
    region: str,
    metric: str,
    spent: dict[tuple[str, str], Fraction],
    bound: str,
) -> None:
    # admits (the round's hot path under the lock) must approve exactly what recheck
    # approves: on budgets, per-metric allocations, global releases and epoch bindings
    from dpledger.approval import admits, recheck

    text = policy_text(scalar_eps="0.25")
    with warnings.catch_warnings():  # per_metric at these budgets is over-committed, on purpose
        warnings.simplefilter("ignore", PolicyWarning)
        p = Policy.from_toml(text if pooled else text.replace('"pooled"', '"per_metric"'))
    request = ReleaseRequest(epoch=0, metric=metric, region=region, cohort=50)
    prepared = evaluate(p, request, 20.0, None).prepared
    assert prepared is not None
    binding = {"none": None, "same": (p.content_hash, p.version), "other": ("f" * 64, "9")}
    spend = EpochSpend(dict(spent))
    decided = admits(p, prepared, spend, binding[bound])
    assert decided == recheck(p, prepared, spend, binding[bound]).approved


_EVAL_POLICIES = {
    (n, unit): Policy.from_toml(
        policy_text(neighbouring=n)
        .replace(
            'allocation = "pooled"',
            'allocation = "pooled"'
            + ("" if unit == "client" else '\nprivacy_unit = "record"\nmax_records_per_person = 3'),
        )
        .replace("cap_per_client", f"cap_per_{unit}"),
        source="test",
    )
    for n in ("replace", "add_remove")
    for unit in ("client", "record")
}
_VALUES = st.floats(allow_nan=True, allow_infinity=True, width=64) | st.sampled_from(
    [0.0, -0.0, 1.0, -1.0, 200.0, 200.0 * (1 + 2e-9), 300.0, -100.0, 400.0, 1e308]
)


@settings(max_examples=600, deadline=None)
@given(
    key=st.sampled_from(sorted(_EVAL_POLICIES)),
    metric=st.sampled_from(["loss", "loss_b", "hist5", "hist20", "floored", "gap", "nope"]),
    region=st.sampled_from(["north", "*", "west"]),
    cohort=st.sampled_from([1, 50, 100, 299, 300, 5000]),
    edges=st.sampled_from([None, "h5/v1", "h20/v1", "other"]),
    version=st.sampled_from([None, "1", "2"]),
    size=st.sampled_from([None, 1, 4, 5, 20]),
    data=st.data(),
)
def test_the_shared_verdict_of_a_passing_request_is_the_full_evaluation(
    key: tuple[str, str],
    metric: str,
    region: str,
    cohort: int,
    edges: str | None,
    version: str | None,
    size: int | None,
    data: st.DataObject,
) -> None:
    # evaluate(spend=None) answers a passing request from a verdict shared per public
    # fields; it must equal running every check (decisions, texts, charge, floor, facts)
    from dpledger.approval.decide import _evaluate

    p = _EVAL_POLICIES[key]
    epoch = data.draw(st.integers(0, 3))
    request = ReleaseRequest(epoch=epoch, metric=metric, region=region, cohort=cohort,
                             edges_version=edges, policy_version=version)  # fmt: skip
    shape = () if size is None else (size,)
    aggregate = np.asarray(data.draw(st.lists(_VALUES, min_size=1, max_size=1)
                                     if size is None else st.lists(_VALUES, min_size=size,
                                                                   max_size=size)))  # fmt: skip
    aggregate = aggregate.reshape(shape)
    with np.errstate(all="ignore"):
        fast = evaluate(p, request, aggregate, None)
        full = _evaluate(p, request, aggregate, None, None)
    assert fast.verdict == full.verdict
    assert (fast.prepared is None) == (full.prepared is None)
    if fast.prepared is not None and full.prepared is not None:
        assert fast.prepared.facts == full.prepared.facts
        assert fast.prepared.spec == full.prepared.spec
        assert np.array_equal(fast.prepared.values, full.prepared.values)
        assert fast.prepared.values.shape == full.prepared.values.shape


_BIG = P.metric("hist5").cap or Fraction(0)  # one client's L1 cap (counts)


@settings(max_examples=500, deadline=None)
@given(
    metric=st.sampled_from(["loss", "hist5", "gap"]),
    cohort=st.sampled_from([1, 7, 100]),
    data=st.data(),
)
@example(metric="hist5", cohort=100, data=None)  # type: ignore[arg-type]
def test_the_one_pass_aggregate_check_decides_as_each_check(
    metric: str, cohort: int, data: st.DataObject | None
) -> None:
    # passes() decides finiteness, sign and bounds from one L1 mass; it must agree with
    # running each check in turn on every aggregate: NaN/inf, -0.0, overflowing masses,
    # masses on the rounding slack's edge, wrong shapes
    from dpledger.approval.aggregate import AGGREGATE_TOLERANCE, each_aggregate_check, passes

    spec = P.metric(metric)
    size = 1 if spec.kind == "scalar_mean" else spec.size
    limit = float(spec.cap or 0) * cohort
    edge = [limit, limit * (1 + AGGREGATE_TOLERANCE), limit * (1 + 2 * AGGREGATE_TOLERANCE)]
    values = _VALUES | st.sampled_from([*edge, -edge[1], 5e307, -5e307, 1e-320])
    if data is None:  # the example: an exact-limit mass spread so its float sum rounds
        arr = np.array([limit / 3, limit / 3, limit / 3, 0.0, 0.0])
    else:
        n = data.draw(st.sampled_from([size, size, size - 1, size + 1]))
        arr = np.array(data.draw(st.lists(values, min_size=max(n, 0), max_size=max(n, 0))))
        if spec.kind == "scalar_mean" and n == 1 and data.draw(st.booleans()):
            arr = arr.reshape(())
    with np.errstate(all="ignore"):
        checks = each_aggregate_check(spec, arr, cohort, P, metric)
        assert passes(spec, arr, cohort, P) == all(c.passed for c in checks)


@pytest.mark.parametrize("size", [3, 64, 65, 500])
def test_the_l1_mass_is_nan_or_inf_exactly_when_a_value_is_or_the_mass_overflows(
    size: int,
) -> None:
    from dpledger.approval.aggregate import l1_mass

    base = np.full(size, 1.5)
    assert l1_mass(base) == pytest.approx(1.5 * size, rel=1e-15)
    for bad, want in [(np.nan, "nan"), (np.inf, "inf"), (-np.inf, "inf")]:
        arr = base.copy()
        arr[size // 2] = bad
        got = l1_mass(arr)
        assert np.isnan(got) if want == "nan" else got == np.inf
    huge = np.full(size, 1.7e308)  # finite values whose mass exceeds the largest double
    with np.errstate(all="raise"):  # no FloatingPointError escapes either path
        assert l1_mass(huge) == np.inf
    assert l1_mass(-base) == l1_mass(base)


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(min_size=1, max_size=12),
    epoch=st.integers(0, 2**63 - 1),
    cohort=st.integers(1, 10**9),
    optional=st.sampled_from([None, "v/1", 'é\u2028"\\x']),
    principal=st.sampled_from([None, "svc-key-1", "ü", 7]),
)
def test_the_request_fingerprint_is_the_sha256_of_its_compact_json_fields(
    text: str, epoch: int, cohort: int, optional: str | None, principal: object
) -> None:
    # the fingerprint is recorded in every entry (inside the chain): its text is the
    # compact JSON array of the fields in order, then the principal, however it is built
    import hashlib
    import json

    from dpledger.approval import fingerprint

    r = ReleaseRequest(
        epoch=epoch,
        metric=text,
        region=text[::-1],
        cohort=cohort,
        edges_version=optional,
        policy_version=optional,
        release_id="id-1",
    )
    fields = [epoch, text, text[::-1], cohort, optional, optional, principal]
    want = hashlib.sha256(json.dumps(fields, separators=(",", ":")).encode()).hexdigest()
    assert fingerprint(r, principal) == want  # type: ignore[arg-type]
    assert fingerprint(r.model_copy(update={"release_id": None}), principal) == want  # type: ignore[arg-type]


def test_the_fingerprint_of_a_constructed_request_with_odd_field_types_is_its_json() -> None:
    # model_construct skips validation: the fingerprint still hashes the compact JSON text
    # (review s22: an int edges_version raised TypeError from the written-out path)
    import hashlib
    import json

    from dpledger.approval import fingerprint

    odd = ReleaseRequest.model_construct(
        epoch=1, metric="loss", region="north", cohort=5, edges_version=3,  # type: ignore[arg-type]
        policy_version=2.5, release_id=None,  # type: ignore[arg-type]
    )  # fmt: skip
    want = [1, "loss", "north", 5, 3, 2.5, None]
    text = json.dumps(want, separators=(",", ":"))
    assert fingerprint(odd) == hashlib.sha256(text.encode()).hexdigest()

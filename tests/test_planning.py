"""Budget planning: floors, plans, inverse planning, and consistency with the ledger."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpledger
from dpledger import mechanisms as mech
from dpledger.accounting import EpochSpend
from dpledger.approval import MAX_COHORT, ReleaseRequest, evaluate
from dpledger.errors import InvalidInput
from dpledger.ledger import Ledger
from dpledger.mechanisms import cohort_floor, error_bar, mechanism_facts
from dpledger.planning.forward import Plan, plan
from dpledger.planning.inverse import budget_for_scale, budget_for_target, required_budget
from dpledger.policy import MetricSpec, Policy, PolicyWarning
from dpledger.types import BarKind, Budget

ROOT = Path(__file__).resolve().parent.parent
SPATIAL = Policy.load(ROOT / "policies" / "spatial-eval.toml")

ABSOLUTE = """
name = "absolute"
version = "1"
neighbouring = "{neighbouring}"
definition = "{definition}"
{budget}
eval_fraction = "{eval_fraction}"
rounds_per_epoch = {rounds}

[regions]
names = ["north", "south"]

[metrics.loss]
kind = "scalar_mean"
{unit} = "{loss}"
target = 0.05
clip = {{ low = "0", high = "2", source = "test" }}

[metrics.hist]
kind = "histogram"
{unit} = "{hist}"
edges = [1.0, 2.0, 3.0]
edges_version = "h/v1"
cap_per_client = "4"
target = 0.5
bar = "std"

[metrics.share_a]
kind = "scalar_mean"
weight = "1"
clip = {{ low = "-1", high = "1", source = "test" }}

[metrics.share_b]
kind = "vector_sum"
weight = "3"
dimension = 3
cap_per_client = "2"
nonnegative = false
target = 1.0
bar = "scale"
"""


def make_policy(
    *,
    loss: str = "0.1",
    hist: str = "0.2",
    rounds: int = 1,
    eval_fraction: str = "0.25",
    neighbouring: str = "replace",
    zcdp: bool = False,
) -> Policy:
    """ε_eval = 1 (or ρ_eval = 0.25 under zCDP); two absolute and two weighted metrics."""
    text = ABSOLUTE.format(
        neighbouring=neighbouring,
        definition="zcdp" if zcdp else "pure",
        budget='epoch_rho = "1"' if zcdp else 'epoch_epsilon = "4"',
        eval_fraction=eval_fraction,
        rounds=rounds,
        unit="rho" if zcdp else "epsilon",
        loss=loss,
        hist=hist,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolicyWarning)
        return Policy.from_toml(text, source="absolute.toml")


def aggregate(spec: MetricSpec, n: int) -> npt.NDArray[np.float64]:
    """A valid secure sum: a mean inside the clip times n, or an all-zero vector."""
    if spec.kind == "scalar_mean":
        assert spec.clip is not None
        return np.asarray(float(spec.clip.low + spec.clip.high) / 2 * n)
    return np.zeros(spec.size)


def request(policy: Policy, region: str, metric: str, n: int, epoch: int = 0) -> ReleaseRequest:
    spec = policy.metric(metric)
    return ReleaseRequest(
        epoch=epoch, metric=metric, region=region, cohort=n, edges_version=spec.edges_version
    )


@pytest.fixture
def ledger_factory(tmp_path: Path) -> Iterator[object]:
    opened: list[Ledger] = []

    def open_(policy: Policy) -> Ledger:
        ledger = Ledger.open(tmp_path / f"ledger-{len(opened)}.db", policy, mode="create")
        opened.append(ledger)
        return ledger

    yield open_
    for ledger in opened:
        ledger.close()


def execute(ledger: Ledger, p: Plan) -> None:
    """Release what the plan says fits, in plan order: round by round, policy order."""
    policy = ledger.policy
    for region in p.regions:
        for r in range(p.rounds_per_epoch):
            for row in region.metrics:
                if r < row.releases:
                    spec = policy.metric(row.metric)
                    ledger.release(
                        request(policy, row.region, row.metric, row.cohort, p.epoch),
                        aggregate(spec, row.cohort),
                    )


# -- cohort floors and error bars (one implementation) ---------------------------------------


def test_the_package_shows_the_mechanisms_formulas_themselves() -> None:
    assert cohort_floor is mech.cohort_floor is dpledger.cohort_floor
    assert error_bar is mech.error_bar is dpledger.error_bar


@settings(max_examples=300, deadline=None)
@given(
    sensitivity=st.floats(1e-3, 1e3),
    epsilon=st.floats(1e-3, 10.0),
    target=st.floats(1e-3, 1e3),
    bar=st.sampled_from(mech.BAR_KINDS),
)
def test_cohort_floor_is_the_smallest_cohort_meeting_the_target(
    sensitivity: float, epsilon: float, target: float, bar: BarKind
) -> None:
    n = mech.least_cohort(sensitivity, epsilon, target, bar)
    assert n >= 1
    if n <= MAX_COHORT:  # the public floor: the same, or refused past the largest cohort
        assert cohort_floor(sensitivity, epsilon, target, bar) == n
    else:
        with pytest.raises(InvalidInput, match="above the largest cohort"):
            cohort_floor(sensitivity, epsilon, target, bar)

    def bar_at(k: int) -> float:  # error_bar's formula; error_bar takes cohorts up to 1e9 only
        if k <= MAX_COHORT:
            return error_bar(sensitivity, epsilon, k, bar)
        facts = mech.calibrate(
            sensitivity=sensitivity, budget=Fraction(epsilon), measure="epsilon",
            mechanism="laplace", dimension=0,
        )  # fmt: skip
        return mech.error_bar_for_scale(facts.scale, k, bar, slack=mech.GRID_SLACK)

    assert bar_at(n) <= target
    if n > 1:
        assert bar_at(n - 1) > target


@settings(max_examples=150, deadline=None)
@given(
    sensitivity=st.floats(1e-2, 1e2),
    rho=st.floats(1e-3, 2.0),
    target=st.floats(1e-2, 1e2),
    bar=st.sampled_from(mech.BAR_KINDS),
)
def test_gaussian_cohort_floor_is_the_smallest_cohort_meeting_the_target(
    sensitivity: float, rho: float, target: float, bar: BarKind
) -> None:
    kw = {"measure": "rho", "mechanism": "gaussian"}
    n = cohort_floor(sensitivity, rho, target, bar, **kw)  # type: ignore[arg-type]
    assert error_bar(sensitivity, rho, n, bar, **kw) <= target  # type: ignore[arg-type]
    if n > 1:
        assert error_bar(sensitivity, rho, n - 1, bar, **kw) > target  # type: ignore[arg-type]


# -- the plan -------------------------------------------------------------------------------


def test_plan_rows_use_the_approval_checks_calibration() -> None:
    p = plan(SPATIAL, {"eu-west": 2400, "apac": 900})
    assert len(p.rows) == 2 * len(SPATIAL.metrics)
    for row in p.rows:
        facts, charge = mechanism_facts(SPATIAL, row.metric)
        spec = SPATIAL.metric(row.metric)
        assert row.budget_per_release == Budget(charge, "epsilon")
        assert charge == Fraction(1, 5)
        assert float(row.budget_per_release) == 0.2
        assert row.noise_scale == facts.scale
        assert row.error_bar == mech.error_bar_of(facts, row.cohort, spec.bar, spec.magnitude)
        assert spec.target is not None
        assert row.cohort_floor == cohort_floor(facts.sensitivity, charge, spec.target, spec.bar)
        assert row.publishable == (row.cohort >= row.cohort_floor)


def test_spatial_plan_publishes_every_metric_in_a_large_region_and_reports_the_budget() -> None:
    p = plan(SPATIAL, {"eu-west": 2400, "apac": 900})
    eu, apac = p.region("eu-west"), p.region("apac")
    assert all(m.publishable for m in eu.metrics)
    assert (eu.planned.amount, eu.remaining.amount, eu.fits) == (Fraction(1), Fraction(0), True)
    blocked = {m.metric for m in apac.metrics if not m.publishable}
    assert blocked == {"error_histogram", "calibration_gap"}
    assert apac.planned.amount == Fraction(3, 5)
    assert apac.remaining.amount == Fraction(2, 5)
    reason = next(m.reason for m in apac.metrics if m.metric == "error_histogram")
    assert "cohort 900 < floor" in reason


@pytest.mark.parametrize(
    "cohorts",
    [
        {"eu-west": 2400, "apac": 900},
        {"na": 600, "eu-east": 1199, "apac": 1200},
        {"eu-west": 30},
    ],
)
def test_every_publishable_release_is_approved_and_the_rest_are_refused(
    cohorts: dict[str, int], ledger_factory: object
) -> None:
    ledger = ledger_factory(SPATIAL)  # type: ignore[operator]
    p = plan(SPATIAL, cohorts, ledger=ledger)
    for row in p.rows:
        spec = SPATIAL.metric(row.metric)
        verdict = ledger.check(
            request(SPATIAL, row.region, row.metric, row.cohort), aggregate(spec, row.cohort)
        )
        assert verdict.approved == row.publishable, (row, verdict.summary())
        if not row.publishable:
            assert [c.name for c in verdict.failures] == ["cohort_floor"]


@settings(max_examples=40, deadline=None)
@given(cohorts=st.dictionaries(st.sampled_from(SPATIAL.regions.names), st.integers(1, 4000)))
def test_publishable_is_exactly_what_the_approval_check_approves(cohorts: dict[str, int]) -> None:
    if not cohorts:
        return
    for row in plan(SPATIAL, cohorts).rows:
        spec = SPATIAL.metric(row.metric)
        req = request(SPATIAL, row.region, row.metric, row.cohort)
        found = evaluate(SPATIAL, req, aggregate(spec, row.cohort), EpochSpend.empty())
        assert (found.prepared is not None) == row.publishable


@settings(max_examples=60, deadline=None)
@given(
    loss=st.sampled_from(["0.05", "0.1", "0.3", "0.45"]),
    hist=st.sampled_from(["0.02", "0.2", "0.5"]),
    rounds=st.integers(1, 4),
    cohort=st.integers(50, 6000),
    spent=st.sampled_from([Fraction(0), Fraction(1, 10), Fraction(7, 10)]),
)
def test_plan_matches_the_approval_check_release_by_release(
    loss: str, hist: str, rounds: int, cohort: int, spent: Fraction
) -> None:
    policy = make_policy(loss=loss, hist=hist, rounds=rounds)

    class Spent:  # spent by releases of another metric (no allocation of these)
        def spent(self, epoch: int, region: str = "*") -> Budget:
            return Budget(spent, policy.unit)

        def metric_spent(self, epoch: int, region: str, metric: str) -> Budget:
            return Budget.zero(policy.unit)

    region = plan(policy, {"south": cohort}, ledger=Spent()).region("south")
    assert region.spent.amount == spent
    totals = {("south", "other"): spent}
    for r in range(rounds):
        for row in region.metrics:
            if row.budget_per_release.amount == 0:
                continue  # over-committed weighted metric: never released
            spec = policy.metric(row.metric)
            req = request(policy, "south", row.metric, cohort)
            found = evaluate(policy, req, aggregate(spec, cohort), EpochSpend(dict(totals)))
            assert (found.prepared is not None) == (r < row.releases), (r, row)
            if found.prepared is not None:
                key = ("south", row.metric)
                totals[key] = totals.get(key, Fraction(0)) + row.budget_per_release.amount
    used = sum(totals.values(), Fraction(0))
    assert used == spent + region.planned.amount
    assert region.remaining.amount == max(policy.eval_budget - used, 0)


@pytest.mark.parametrize(
    ("policy", "cohorts", "rounds"),
    [
        (SPATIAL, {"eu-west": 2400, "apac": 900, "na": 50}, None),
        (make_policy(), {"north": 5000, "south": 400}, None),
        (make_policy(rounds=3, loss="0.05"), {"north": 5000, "south": 900}, 3),
        # over-committed: 2 rounds × (0.3 + 0.5) > 1, so only some releases fit
        (make_policy(rounds=2, loss="0.3", hist="0.5"), {"north": 5000}, None),
        (make_policy(zcdp=True, loss="0.05", hist="0.1"), {"north": 5000, "south": 300}, None),
    ],
)
def test_plan_budget_use_equals_what_the_ledger_charges_after_executing_it(
    policy: Policy, cohorts: dict[str, int], rounds: int | None, ledger_factory: object
) -> None:
    ledger = ledger_factory(policy)  # type: ignore[operator]
    p = plan(policy, cohorts, rounds_per_epoch=rounds, ledger=ledger)
    execute(ledger, p)
    for region in p.regions:
        assert ledger.spent(0, region.region) == region.planned
        assert ledger.remaining(0, region.region) == region.remaining


def test_a_release_past_what_the_plan_fits_is_refused_by_the_budget(ledger_factory: object) -> None:
    policy = make_policy(rounds=2, loss="0.3", hist="0.5")
    ledger = ledger_factory(policy)  # type: ignore[operator]
    p = plan(policy, {"north": 5000}, ledger=ledger)
    loss, hist = (next(m for m in p.rows if m.metric == name) for name in ("loss", "hist"))
    assert (loss.releases, hist.releases) == (1, 1)
    assert not loss.publishable
    assert "only 1 of 2 release(s) fit" in loss.reason
    assert not p.region("north").fits
    assert any("ask" in w and "left" in w for w in p.warnings)
    execute(ledger, p)
    verdict = ledger.check(
        request(policy, "north", "loss", 5000), aggregate(policy.metric("loss"), 5000)
    )
    assert [c.name for c in verdict.failures] == ["budget"]


def test_plan_reads_what_the_ledger_has_already_spent(ledger_factory: object) -> None:
    policy = make_policy()
    ledger = ledger_factory(policy)  # type: ignore[operator]
    ledger.release(request(policy, "north", "hist", 5000, epoch=3), np.zeros(4))
    p = plan(policy, {"north": 5000, "south": 5000}, ledger=ledger, epoch=3)
    north, south = p.region("north"), p.region("south")
    assert north.spent.amount == Fraction(1, 5)
    assert south.spent.amount == 0
    # north: hist spent its allocation (1 release per epoch); loss 0.1 + share_a 0.175 +
    # share_b 0.525 fit in what is left after 0.2
    assert (north.planned.amount, south.planned.amount) == (Fraction(4, 5), Fraction(1))
    assert north.fits
    assert south.fits
    assert float(north.planned) == 0.8
    hist = next(m for m in north.metrics if m.metric == "hist")
    assert (hist.releases, hist.publishable) == (0, False)
    assert "already spent its allocation" in hist.reason
    assert p.ledger == ledger.location
    execute(ledger, p)
    assert ledger.spent(3, "north") == north.spent + north.planned
    fresh = plan(policy, {"north": 5000}, ledger=ledger, epoch=4)
    assert fresh.region("north").spent.amount == 0


def test_weighted_metrics_share_what_absolute_budgets_leave_by_weight() -> None:
    policy = make_policy(loss="0.1", hist="0.2")  # ε_eval = 1: weights 1:3 share 0.7
    p = plan(policy, {"north": 5000})
    budgets = {m.metric: m.budget_per_release.amount for m in p.rows}
    assert budgets == {
        "loss": Fraction(1, 10),
        "hist": Fraction(1, 5),
        "share_a": Fraction(7, 40),
        "share_b": Fraction(21, 40),
    }
    assert sum(budgets.values()) == policy.eval_budget
    assert p.overcommitment.amount == 0


def test_more_rounds_split_the_weighted_share_and_say_the_ledger_charges_per_the_policy() -> None:
    policy = make_policy(loss="0.1", hist="0.2")
    p = plan(policy, {"north": 5000}, rounds_per_epoch=2)
    budgets = {m.metric: m.budget_per_release.amount for m in p.rows}
    assert budgets["loss"] == Fraction(1, 10)  # absolute: honoured as written
    assert budgets["share_a"] == policy.release_budget("share_a", 2) == Fraction(1, 20)
    row = next(m for m in p.rows if m.metric == "share_a")
    delta = mech.release_sensitivity(policy.metric("share_a"), policy.neighbouring, "laplace")
    facts = mech.calibrate(
        sensitivity=delta,
        budget=Fraction(1, 20),
        measure="epsilon",
        mechanism="laplace",
        dimension=0,
    )
    assert row.noise_scale == facts.scale
    assert p.rounds_per_epoch == 2
    assert p.policy_rounds_per_epoch == 1
    assert any("rounds_per_epoch = 1" in w for w in p.warnings)
    assert p.region("north").planned.amount == Fraction(1)


def test_an_overcommitted_policy_is_reported_not_scaled() -> None:
    policy = make_policy(loss="0.6", hist="0.6")
    p = plan(policy, {"north": 5000})
    assert p.overcommitment.amount == Fraction(1, 5)
    assert any("over-committed by 0.2" in w for w in p.warnings)
    rows = {m.metric: m for m in p.rows}
    assert rows["loss"].budget_per_release.amount == Fraction(3, 5)  # not scaled down
    assert rows["share_a"].budget_per_release.amount == 0
    assert not rows["share_a"].publishable
    assert "no budget" in rows["share_a"].reason
    assert rows["share_a"].noise_scale is None
    assert rows["share_a"].error_bar is None
    assert rows["loss"].releases == 1
    assert rows["hist"].releases == 0


@pytest.mark.parametrize(("fraction", "warned"), [("0.05", True), ("0.25", False), ("0.5", True)])
def test_an_eval_fraction_outside_the_advised_range_is_warned(fraction: str, warned: bool) -> None:
    p = plan(make_policy(eval_fraction=fraction, loss="0.01", hist="0.01"), {"north": 100})
    assert any("eval_fraction" in w for w in p.warnings) == warned


def test_a_region_that_can_never_publish_is_warned() -> None:
    p = plan(SPATIAL, {"na": 50, "eu-west": 2400})
    never = [w for w in p.warnings if "can never publish" in w]
    assert len(never) == 1
    assert "region na (n=50)" in never[0]
    for metric in SPATIAL.metrics:
        assert metric in never[0]
    # apac at 900 misses the histogram floor at ε = 0.2 but not with the whole ε_eval
    p = plan(SPATIAL, {"apac": 900})
    assert not any("can never publish" in w for w in p.warnings)


@pytest.mark.parametrize(
    ("cohorts", "kwargs", "message"),
    [
        ({"mars": 100}, {}, "unknown region 'mars'"),
        ({"*": 100}, {}, "not a region"),
        ({}, {}, "at least one region"),
        ({"na": 0}, {}, "integer ≥ 1"),
        ({"na": -3}, {}, "integer ≥ 1"),
        ({"na": 2.5}, {}, "integer ≥ 1"),
        ({"na": True}, {}, "integer ≥ 1"),
        ({"na": 100}, {"rounds_per_epoch": 0}, "rounds_per_epoch"),
        ({"na": 100}, {"epoch": -1}, "epoch"),
    ],
)
def test_bad_plan_input_is_refused(
    cohorts: dict[str, object], kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        plan(SPATIAL, cohorts, **kwargs)  # type: ignore[arg-type]


def test_plan_is_frozen_and_json_serialisable_with_exact_budgets() -> None:
    p = plan(SPATIAL, {"eu-west": 2400})
    data = json.loads(p.model_dump_json())
    row = data["regions"][0]["metrics"][0]
    assert row["budget_per_release"] == {"unit": "epsilon", "amount": "1/5", "value": 0.2}
    assert data["eval_budget"]["amount"] == "1"
    assert Plan.model_validate_json(p.model_dump_json()) == p
    with pytest.raises(ValueError, match="frozen"):
        p.epoch = 2  # type: ignore[misc]


def test_plan_table_is_aligned_and_lists_budgets_and_warnings() -> None:
    p = plan(SPATIAL, {"eu-west": 2400, "na": 50})
    text = p.table()
    lines = text.splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.startswith("region   metric"))
    block = lines[header : header + 2 + len(p.rows)]
    col = block[0].index("publishable")
    assert all(ln[col - 2 : col] == "  " for ln in block[2:])
    assert all(ln[col] in "yn" for ln in block[2:])
    assert "plan uses" in text
    assert "warnings:" in text
    assert "can never publish" in text


# -- inverse planning -----------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    metric=st.sampled_from(sorted(SPATIAL.metrics)),
    target=st.floats(1e-3, 10.0),
    cohort=st.integers(1, 100_000),
)
def test_budget_for_target_is_the_smallest_4_digit_budget_meeting_the_floor(
    metric: str, target: float, cohort: int
) -> None:
    eps = budget_for_target(SPATIAL, metric, target, cohort).amount
    spec = SPATIAL.metric(metric)
    delta = float(mech.sensitivity(spec, "replace"))
    assert cohort_floor(delta, eps, target, spec.bar) <= cohort
    step = Fraction(10) ** (math.floor(math.log10(eps)) - 3)
    if eps - step > 0:
        assert cohort_floor(delta, eps - step, target, spec.bar) > cohort


def test_a_policy_written_with_the_required_epsilon_publishes_at_that_cohort(
    ledger_factory: object,
) -> None:
    need = budget_for_target(make_policy(), "loss", None, 800)
    policy = make_policy(loss=str(float(need)))
    assert policy.release_budget("loss") == need.amount
    row = next(m for m in plan(policy, {"north": 800}).rows if m.metric == "loss")
    assert row.publishable
    assert row.error_bar is not None
    assert row.error_bar <= 0.05
    ledger = ledger_factory(policy)  # type: ignore[operator]
    assert ledger.check(
        request(policy, "north", "loss", 800), aggregate(policy.metric("loss"), 800)
    ).approved


def test_required_budget_sums_the_needs_and_says_whether_the_epoch_holds_them() -> None:
    req = required_budget(SPATIAL, {"eu-west": 2400, "apac": 900, "na": 500})
    eu, apac, na = req.regions
    for r in req.regions:
        needs = {m.metric: m.required for m in r.metrics}
        assert needs == {m: budget_for_target(SPATIAL, m, None, r.cohort) for m in SPATIAL.metrics}
        assert r.total == sum(needs.values())
        assert r.eval_fraction_needed == r.total.amount / SPATIAL.epoch_budget
    # apac misses two floors at the policy's 0.2 each, yet their needs sum within ε_eval
    assert eu.fits
    assert apac.fits
    assert not na.fits
    assert not req.fits
    assert {m.metric for m in apac.metrics if not m.enough} == {
        "error_histogram",
        "calibration_gap",
    }
    assert req.untargeted == ()


def test_required_budget_takes_override_targets_and_lists_untargeted_metrics() -> None:
    policy = make_policy()
    req = required_budget(policy, {"north": 1000}, targets={"share_a": 0.1}, rounds_per_epoch=2)
    names = [m.metric for m in req.regions[0].metrics]
    assert names == ["loss", "hist", "share_a", "share_b"]
    assert req.untargeted == ()
    assert req.regions[0].total == 2 * sum(m.required for m in req.regions[0].metrics)
    bare = required_budget(policy, {"north": 1000})
    assert bare.untargeted == ("share_a",)
    with pytest.raises(InvalidInput, match="unknown metric"):
        required_budget(policy, {"north": 1000}, targets={"nope": 1.0})


@pytest.mark.parametrize(
    ("target", "cohort", "message"),
    [(0.0, 100, "target"), (math.inf, 100, "target"), (-1.0, 100, "target"), (0.1, 0, "cohort")],
)
def test_bad_inverse_planning_input_is_refused(target: float, cohort: int, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        budget_for_target(SPATIAL, "clipped_mean_loss", target, cohort)


def test_budget_for_target_needs_a_target_from_the_caller_or_the_policy() -> None:
    with pytest.raises(InvalidInput, match="no target"):
        budget_for_target(make_policy(), "share_a", None, 100)


@pytest.mark.parametrize("dimension", [0, 7])
def test_budget_for_scale_reads_opendps_map_and_inverts_calibrate(dimension: int) -> None:
    eps = budget_for_scale(3.4, 17.0, dimension=dimension).amount
    assert eps >= Fraction(1, 5)
    assert float(eps) == pytest.approx(0.2, rel=1e-9)
    facts = mech.calibrate(
        sensitivity=3.4, budget=Fraction(1, 5), measure="epsilon", mechanism="laplace",
        dimension=dimension,
    )  # fmt: skip
    assert budget_for_scale(3.4, facts.scale, dimension=dimension).amount <= Fraction(1, 5)


def test_budget_for_scale_under_zcdp_is_rho() -> None:
    rho = budget_for_scale(2.0, 4.0, measure="rho", mechanism="gaussian", dimension=3)
    assert rho.unit == "rho"
    assert float(rho) == pytest.approx(2.0**2 / (2 * 4.0**2), rel=1e-9)


@pytest.mark.parametrize(("sensitivity", "scale"), [(0.0, 1.0), (1.0, -2.0), (1.0, math.inf)])
def test_budget_for_scale_refuses_bad_input(sensitivity: float, scale: float) -> None:
    with pytest.raises(InvalidInput):
        budget_for_scale(sensitivity, scale)


def test_budget_for_scale_charges_what_the_ledger_would_for_that_scale() -> None:
    facts, charge = mechanism_facts(SPATIAL, "error_histogram")
    got = budget_for_scale(
        facts.sensitivity, facts.scale, dimension=facts.dimension, k=facts.k
    ).amount
    assert got == mech.privacy_loss(facts)
    assert got <= charge


def test_the_old_epsilon_names_warn_and_return_the_amount() -> None:
    import dpledger

    with pytest.warns(DeprecationWarning, match="budget_for_target"):
        old = dpledger.epsilon_for_target(SPATIAL, "clipped_mean_loss", None, 2400)
    assert old == budget_for_target(SPATIAL, "clipped_mean_loss", None, 2400).amount
    with pytest.warns(DeprecationWarning, match="budget_for_scale"):
        assert dpledger.epsilon_for_scale(2.0, 4.0, measure="rho", mechanism="gaussian") == (
            budget_for_scale(2.0, 4.0, measure="rho", mechanism="gaussian").amount
        )

"""Budget planning: per region × metric, what a policy's epoch of releases would cost and show.

:func:`plan` answers "if we release every metric of this policy in these regions, at
these cohort sizes, what ε does each release cost, how wide is each error bar, which
regions clear their cohort floors, and how much of the epoch's evaluation budget is
used and left?" It uses the very functions the approval check uses
(:func:`dpledger.mechanisms.mechanism_facts`, :func:`dpledger.mechanisms.cohort_floor`,
:func:`dpledger.mechanisms.error_bar_of`, the ``noise_range`` check's
:func:`dpledger.approval.checks.noise_check_at`) and the ledger's exact budget rule,
so a release the plan calls publishable is one ``Ledger.check`` approves.

Inverse planning (the budget a target needs) lives in :mod:`dpledger.planning.inverse`.
Budgets are exact :class:`~dpledger.types.Budget` values in the policy's unit (ε, or ρ
under zCDP); JSON carries each as ``{"unit", "amount": "p/q", "value": float}``.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Protocol

from dpledger import mechanisms as mech
from dpledger._shown import shown
from dpledger.approval.checks import noise_check_at
from dpledger.approval.request import MAX_EPOCH
from dpledger.errors import InvalidInput
from dpledger.mechanisms import mechanism_facts
from dpledger.planning._common import (
    release_sensitivity_of,
    text_table,
    validated_cohorts,
    validated_policy,
    validated_rounds,
)
from dpledger.policy import (
    ALL,
    BudgetValue,
    ExactDecimal,
    FrozenModel,
    Policy,
    eval_fraction_note,
)
from dpledger.types import (
    MAX_COHORT,
    BarKind,
    Budget,
    MechanismKind,
    MetricKind,
    Neighbouring,
    PrivacyUnit,
    Unit,
)

__all__ = [
    "MetricPlan",
    "Plan",
    "RegionPlan",
    "SpendSource",
    "plan",
    "text_table",
]

_ZERO = Fraction(0)


class SpendSource(Protocol):
    """Anything that reports a client's exact epoch spend per region (a ``Ledger``)."""

    def spent(self, epoch: int, region: str = ALL) -> Budget:
        """Exact ε (or ρ) a client of ``region`` has lost in ``epoch``."""
        ...

    def metric_spent(self, epoch: int, region: str, metric: str) -> Budget:
        """The part of that loss one metric used (against its allocation)."""
        ...


class MetricPlan(FrozenModel):
    """One metric in one region: its per-release cost, noise, error bar and floor.

    ``cohort`` counts clients, or records under a record-level policy (then ``error_bar``
    is on the per-record mean and ``cohort_floor`` is in records). ``noise_scale`` is
    the scale on the released *sum* (Laplace b or Gaussian σ, in
    the metric's units × clients); ``error_bar`` is on the per-client *mean* at the
    metric's bar kind, exactly as the approval check computes it. ``releases`` counts
    the releases of the epoch that pass every check, in plan order (round by round,
    metrics in policy order); ``publishable`` means all ``rounds`` of them do.
    """

    region: str
    metric: str
    kind: MetricKind
    mechanism: MechanismKind
    cohort: int
    budget_per_release: BudgetValue  # exact, in the policy's unit
    sensitivity: float
    noise_scale: float | None
    bar: BarKind
    error_bar: float | None
    target: float | None
    cohort_floor: int | None
    rounds: int
    releases: int
    publishable: bool
    reason: str


class RegionPlan(FrozenModel):
    """One region's releases and its epoch budget: spent before, used by the plan, left.

    ``requested`` is what the epoch's remaining releases of every metric that clears its
    floor would cost (each metric up to its allocation: ``rounds`` releases, minus those
    the ledger already recorded); ``planned`` is what the releases that fit actually
    use (what the ledger will charge); ``remaining`` is what a client has left afterwards.
    """

    region: str
    cohort: int
    metrics: tuple[MetricPlan, ...]
    spent: BudgetValue
    requested: BudgetValue
    planned: BudgetValue
    remaining: BudgetValue
    fits: bool


class Plan(FrozenModel):
    """A budget plan for one epoch of a policy's releases (JSON via ``model_dump_json``)."""

    policy_name: str
    policy_version: str
    policy_hash: str
    unit: Unit
    neighbouring: Neighbouring
    privacy_unit: PrivacyUnit = "client"
    max_records_per_person: int | None = None
    counted: str = "clients"  # what every cohort, floor and bar of the plan is per
    epoch: int
    epoch_budget: BudgetValue
    eval_fraction: ExactDecimal
    eval_budget: BudgetValue
    rounds_per_epoch: int
    policy_rounds_per_epoch: int
    overcommitment: BudgetValue
    ledger: str | None
    regions: tuple[RegionPlan, ...]
    warnings: tuple[str, ...]

    @property
    def rows(self) -> tuple[MetricPlan, ...]:
        """Every region × metric row, region by region."""
        return tuple(m for r in self.regions for m in r.metrics)

    def region(self, name: str) -> RegionPlan:
        """The plan of region ``name``; :class:`InvalidInput` if it was not planned."""
        for r in self.regions:
            if r.region == name:
                return r
        raise InvalidInput(
            f"region {name!r} is not in this plan: {[r.region for r in self.regions]}"
        )

    def table(self) -> str:
        """Aligned text: one line per region × metric, then each region's budget, then warnings."""
        u = _sym(self.unit)
        head = (
            f"plan for {self.policy_name} {self.policy_version}, epoch {self.epoch}: "
            f"{u}_eval = {_show(self.eval_budget)} ({_show(self.eval_fraction)} × "
            f"{_show(self.epoch_budget)}), {self.rounds_per_epoch} round(s), {self.neighbouring}"
        )
        if self.privacy_unit == "record":
            head += (
                f", privacy unit record (≤ {self.max_records_per_person} per person): n, floors "
                "and bars count records"
            )
        headers = ["region", "metric", f"n {self.counted}", f"{u}/release"]
        headers += ["scale(sum)", "bar(mean)", "target", "floor", "releases", "publishable"]
        body = [_metric_cells(m) for m in self.rows]
        budget = [
            [r.region, *map(_show, (r.spent, r.planned, r.requested, r.remaining)), _yes(r.fits)]
            for r in self.regions
        ]
        out = [head, text_table(headers, body, align="llrrrrrrrl"), ""]
        who = "client" if self.privacy_unit == "client" else "person"
        out.append(f"budget per {who} ({u}, of {_show(self.eval_budget)} per epoch):")
        budget_headers = ("region", "spent", "plan uses", "asks", "left after", "fits")
        out.append(text_table(budget_headers, budget, align="lrrrrl"))
        if self.warnings:
            out += ["", "warnings:", *(f"  - {w}" for w in self.warnings)]
        return "\n".join(out)


# -- helpers -------------------------------------------------------------------------------


def _show(value: Fraction | Budget) -> str:
    """An exact decimal when the amount has one (1/5 → 0.2), else ≈ 6 significant digits."""
    q = value.amount if isinstance(value, Budget) else value
    d = q.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    if d == 1:
        s = f"{q.numerator / q.denominator:.15g}"
        if Fraction(s) == q:
            return s
    return f"≈{float(q):.6g}"


def _metric_cells(m: MetricPlan) -> list[str]:
    floor = "-" if m.cohort_floor is None else str(m.cohort_floor)
    cells = [m.region, m.metric, str(m.cohort), _show(m.budget_per_release), _g(m.noise_scale)]
    cells += [f"{_g(m.error_bar)} {m.bar}", _g(m.target), floor, f"{m.releases}/{m.rounds}"]
    return [*cells, "yes" if m.publishable else f"no: {m.reason}"]


def _records_noun(policy: Policy) -> str:
    """`` records`` after a count under a record-level policy (client plans read as before)."""
    return " records" if policy.privacy_unit == "record" else ""


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


def _sym(unit: str) -> str:
    return "ε" if unit == "epsilon" else "ρ"


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _facts(policy: Policy, metric: str, rounds: int) -> tuple[mech.MechanismFacts | None, Fraction]:
    """The calibrated mechanism and exact charge of one release (None if it has no budget)."""
    charge = policy.release_budget(metric, rounds)
    if charge <= 0:
        return None, charge
    return mechanism_facts(policy, metric, rounds)  # what the ledger would charge


def _policy_warnings(policy: Policy, rounds: int) -> list[str]:
    out: list[str] = []
    advice = eval_fraction_note(policy.eval_fraction)
    if advice is not None:
        out.append(advice)
    over = policy.overcommitment_note(rounds)
    if over is not None:
        out.append(over)
    if rounds != policy.rounds_per_epoch:
        out.append(
            f"planned with {rounds} round(s) per epoch, but the ledger charges per the "
            f"policy's rounds_per_epoch = {policy.rounds_per_epoch}: issue a policy version "
            f"with rounds_per_epoch = {rounds} to release at these budgets"
        )
    return out


# -- planning --------------------------------------------------------------------------------


def plan(
    policy: Policy,
    cohorts: Mapping[str, int],
    rounds_per_epoch: int | None = None,
    ledger: SpendSource | None = None,
    epoch: int = 0,
) -> Plan:
    """Plan one epoch of regional releases of every metric of ``policy``.

    ``cohorts`` maps each region to its planned cohort (clients per release; RECORDS per
    release under a record-level policy, after each silo's per-person bound);
    ``rounds_per_epoch`` defaults to the policy's (weighted metrics share
    ``ε_eval / rounds`` by weight; absolute budgets are honoured as written);
    ``ledger`` (anything with ``spent(epoch, region)``) supplies what ``epoch`` has
    already spent. Raise :class:`InvalidInput` for an unknown region, a cohort < 1,
    rounds < 1 or a negative epoch.
    """
    policy = validated_policy(policy)
    if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral) or epoch < 0:
        raise InvalidInput(f"epoch must be an integer ≥ 0, got {shown(epoch)}")
    if epoch > MAX_EPOCH:  # as a release's and a ledger's: a plan for no possible epoch
        raise InvalidInput(f"epoch must lie in [0, 2**63 - 1], got {shown(epoch)}")
    cohort_of = validated_cohorts(policy, cohorts)
    rounds = validated_rounds(policy, rounds_per_epoch)
    if ledger is not None and not all(
        callable(getattr(ledger, f, None)) for f in ("spent", "metric_spent")
    ):
        raise InvalidInput(
            f"ledger must be an open dpledger Ledger (anything with spent and metric_spent), "
            f"got {type(ledger).__name__} {shown(ledger, 60)}: open one with "
            "dl.Ledger.open(path, policy, mode='read')"
        )
    warnings = _policy_warnings(policy, rounds)
    ledger_policy = getattr(ledger, "policy", None)
    if isinstance(ledger_policy, Policy) and ledger_policy.content_hash != policy.content_hash:
        warnings.append(
            f"the ledger is bound to policy {ledger_policy.name} {ledger_policy.version}, "
            f"not this {policy.name} {policy.version}: its releases will be checked "
            "against the ledger's policy"
        )
    bound_to = getattr(ledger, "epoch_policy", None)
    bound = bound_to(epoch) if callable(bound_to) else None
    if isinstance(bound, Policy) and bound.content_hash != policy.content_hash:
        raise InvalidInput(
            f"epoch {epoch} is bound to policy {bound.name} {bound.version} (its first "
            f"release), so every release in it under {policy.name} {policy.version} is "
            "refused: plan it with that policy, or plan an epoch not opened yet"
        )
    calibrated = {m: _facts(policy, m, rounds) for m in policy.metrics}
    regions = []
    for region, n in cohort_of.items():
        spent = ledger.spent(epoch, region).amount if ledger is not None else _ZERO
        used = {
            m: ledger.metric_spent(epoch, region, m).amount if ledger is not None else _ZERO
            for m in policy.metrics
        }
        rp = _plan_region(policy, region, n, rounds, spent, used, calibrated, warnings)
        regions.append(rp)
    location = getattr(ledger, "location", None) if ledger is not None else None
    return Plan(
        policy_name=policy.name,
        policy_version=policy.version,
        policy_hash=policy.content_hash,
        unit=policy.unit,
        neighbouring=policy.neighbouring,
        privacy_unit=policy.privacy_unit,
        max_records_per_person=policy.max_records_per_person,
        counted=policy.counted,
        epoch=int(epoch),
        epoch_budget=Budget(policy.epoch_budget, policy.unit),
        eval_fraction=policy.eval_fraction,
        eval_budget=Budget(policy.eval_budget, policy.unit),
        rounds_per_epoch=rounds,
        policy_rounds_per_epoch=policy.rounds_per_epoch,
        overcommitment=Budget(policy.overcommitment(rounds), policy.unit),
        ledger=None if ledger is None else str(location or type(ledger).__name__),
        regions=tuple(regions),
        warnings=tuple(warnings),
    )


def _plan_region(
    policy: Policy,
    region: str,
    n: int,
    rounds: int,
    spent: Fraction,
    used: Mapping[str, Fraction],
    calibrated: Mapping[str, tuple[mech.MechanismFacts | None, Fraction]],
    warnings: list[str],
) -> RegionPlan:
    budget = policy.eval_budget
    reasons: dict[str, str] = {}
    floors: dict[str, int | None] = {}
    never: list[str] = []
    for name, spec in policy.metrics.items():
        facts, charge = calibrated[name]
        floors[name] = None
        if facts is None:
            reasons[name] = "over-committed policy: this metric has no budget"
            continue
        if spec.target is None:
            continue
        floors[name] = floor = mech.cohort_floor_of(facts, spec.target, spec.bar, spec.magnitude)
        if n < floor:
            reasons[name] = f"cohort {n} < floor {floor}{_records_noun(policy)}"
            if floor > MAX_COHORT:  # as dl.cohort_floor says it (review s30)
                reasons[name] += f", above the largest cohort {MAX_COHORT:_}"
            # if the metric had the whole allocation: calibrated as its release is (a
            # vector's map charges each coordinate's grid rounding; review 40: a scalar's
            # floor said 5,997 where a release of dimension 1000 at cap 1e-9 needs 8,718)
            whole = mech.facts_at_budget(policy, name, budget)
            best = mech.cohort_floor_of(whole, spec.target, spec.bar, spec.magnitude)
            if n < best:
                reasons[name] += f" (needs ≥ {best} even with all of {_show(budget)})"
                never.append(f"{name} (needs n ≥ {best})")
    for name, spec in policy.metrics.items():  # what Ledger.check refuses as NoiseOutOfRange
        facts = calibrated[name][0]
        if facts is not None and not noise_check_at(facts, spec, n, policy).passed:
            said = (
                f"noise scale {facts.scale:.4g} could overflow a double (noise_range): "
                f"raise its {_sym(policy.unit)} or narrow its clip or cap"
            )
            reasons[name] = f"{reasons[name]}; {said}" if name in reasons else said
    if never:
        warnings.append(
            f"region {region} (n={n}{_records_noun(policy)}) can never publish "
            f"{', '.join(never)} at this budget, "
            f"even with the whole {_sym(policy.unit)}_eval = {_show(budget)} on one release; "
            "merge regions or aggregate over a longer window"
        )
    eligible = [m for m in policy.metrics if m not in reasons]
    charge_of = {m: calibrated[m][1] for m in policy.metrics}
    allowed = {m: _allowed(policy, charge_of[m], rounds, used[m]) for m in eligible}
    requested = sum((allowed[m] * charge_of[m] for m in eligible), _ZERO)
    counts = _allocate(eligible, charge_of, allowed, spent, budget)
    planned = sum((counts[m] * charge_of[m] for m in eligible), _ZERO)
    fits = spent + requested <= budget
    if not fits:
        warnings.append(
            f"region {region}: the epoch's releases ask {_show(requested)} but "
            f"{_show(max(budget - spent, _ZERO))} of {_show(budget)} is left "
            f"(spent {_show(spent)}); only {_show(planned)} of it can be released"
        )
    rows = []
    for name, spec in policy.metrics.items():
        facts, charge = calibrated[name]
        done = counts.get(name, 0)
        reason = reasons.get(name, "")
        if not reason and done < rounds:
            left = allowed.get(name, rounds)
            reason = (
                f"{rounds - left} of {rounds} release(s) already spent its allocation"
                if left < rounds and done == left
                else f"only {done} of {rounds} release(s) fit the epoch budget"
            )
        rows.append(
            MetricPlan(
                region=region,
                metric=name,
                kind=spec.kind,
                mechanism=policy.mechanism(name),
                cohort=n,
                budget_per_release=Budget(charge, policy.unit),
                sensitivity=release_sensitivity_of(policy, name)
                if facts is None
                else facts.sensitivity,
                noise_scale=None if facts is None else facts.scale,
                bar=spec.bar,
                error_bar=None
                if facts is None
                else mech.error_bar_of(facts, n, spec.bar, spec.magnitude),
                target=spec.target,
                cohort_floor=floors[name],
                rounds=rounds,
                releases=done,
                publishable=not reason,
                reason=reason,
            )
        )
    return RegionPlan(
        region=region,
        cohort=n,
        metrics=tuple(rows),
        spent=Budget(spent, policy.unit),
        requested=Budget(requested, policy.unit),
        planned=Budget(planned, policy.unit),
        remaining=Budget(max(budget - spent - planned, _ZERO), policy.unit),
        fits=fits,
    )


def _allowed(policy: Policy, charge: Fraction, rounds: int, used: Fraction) -> int:
    """Releases of one metric its allocation still admits this epoch (≤ ``rounds``).

    The ledger's allocation check: ``used + charge ≤ rounds × charge`` per release; a
    pooled policy has no per-metric limit (the plan still plans ``rounds`` releases).
    """
    if policy.allocation == "pooled":
        return rounds
    left = rounds * charge - used
    return max(0, min(rounds, int(left // charge))) if charge > 0 else 0


def _allocate(
    eligible: Sequence[str],
    charge_of: Mapping[str, Fraction],
    allowed: Mapping[str, int],
    spent: Fraction,
    budget: Fraction,
) -> dict[str, int]:
    """How many releases of each metric fit, released round by round in policy order.

    Mirrors the ledger's rules release by release: ``spent + charge ≤ budget`` and at
    most ``allowed[m]`` releases of metric m (its allocation). Spend only grows, so a
    metric that does not fit in one round fits in no later one.
    """
    if spent + sum((allowed[m] * charge_of[m] for m in eligible), _ZERO) <= budget:
        return {m: allowed[m] for m in eligible}
    counts = dict.fromkeys(eligible, 0)
    loss = spent
    for _ in range(max(allowed.values(), default=0)):
        added = False
        for m in eligible:
            if counts[m] < allowed[m] and loss + charge_of[m] <= budget:
                loss += charge_of[m]
                counts[m] += 1
                added = True
        if not added:
            break
    return counts

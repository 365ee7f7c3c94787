"""Pure/Laplace or zCDP/Gaussian? The smaller error bar at the same per-epoch guarantee.

The two definitions are compared at the *same* (ε, δ) guarantee for one client's epoch
of evaluation, at the policy's δ:

- pure: each release at its ε_m, Laplace noise at ``b = Δ₁/ε_m``; the epoch's releases
  (every metric, ``rounds`` times) spend ε = Σ ε_m × rounds, which is ``ε_eval`` when
  the policy commits all of it;
- zCDP: the total ρ whose (ε, δ) conversion (OpenDP's) equals that ε, split by the same
  shares, Gaussian noise at ``σ = Δ₂/√(2ρ_m)``.

Never the whole ``ε_eval`` converted when the releases spend less: ε(ρ) is concave, so a
share s of ρ_eval is far more than s·ε_eval (review 43: a metric at ε = 0.1 of an
ε_eval = 1 was set against a Gaussian at (0.29, 1e-6), and the table said it won).

Each scale is the one a release of that definition is calibrated to (OpenDP's map on
its 2**-40 grid: the closed forms above, unless Δ nears the grid), and each bar is the
one such a release prints. For a zCDP policy the roles swap: the ρ its releases spend,
converted, gives the pure ε. Laplace tends to win for few releases at small budgets; Gaussian
when Δ₂ ≪ Δ₁ or many releases compose.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from dpledger import mechanisms as mech
from dpledger._search import least_integer
from dpledger.accounting import zcdp_epsilon
from dpledger.errors import InvalidInput
from dpledger.planning._common import validated_cohorts, validated_policy, validated_rounds
from dpledger.policy import FrozenModel, Policy
from dpledger.types import Definition, MechanismKind, Unit

__all__ = ["DefinitionChoice", "compare_definitions", "rho_for_epsilon"]


class DefinitionChoice(FrozenModel):
    """One metric in one region: both bars (per-client mean) and the smaller one."""

    region: str
    metric: str
    cohort: int
    epsilon: float  # the pure side's per-release ε
    rho: float  # the zCDP side's per-release ρ, at the same per-epoch (ε, δ)
    laplace_bar: float
    gaussian_bar: float
    better: Definition
    ratio: float  # Gaussian bar / Laplace bar


_RHO_GRID = 2**40
"""ρ is searched on the grid ε·i/2⁴⁰: ~1e-12 of ε, finer than any budget is written."""


def rho_for_epsilon(epsilon: Fraction, delta: float) -> Fraction:
    """The largest ρ on the grid ε·i/2⁴⁰ whose OpenDP (ε, δ) conversion stays ≤ ``epsilon``."""
    if epsilon <= 0:
        raise InvalidInput(f"epsilon must be > 0, got {epsilon}")
    step = Fraction(epsilon) / _RHO_GRID

    def too_big(i: int) -> bool:
        return zcdp_epsilon(i * step, delta) > float(epsilon)

    # ε(ρ) = ρ + 2√(ρ·ln(1/δ)) bounds OpenDP's conversion; its inverse is a close guess
    log = math.log(1 / delta)
    guess = (math.sqrt(log + float(epsilon)) - math.sqrt(log)) ** 2
    first = least_integer(too_big, 1, _RHO_GRID, round(guess / float(step)))
    return (_RHO_GRID if first is None else first - 1) * step


def compare_definitions(
    policy: Policy, cohorts: Mapping[str, int], rounds_per_epoch: int | None = None
) -> tuple[DefinitionChoice, ...]:
    """Per region × metric, the ci95-style bar under each definition (the metric's bar
    kind), each release's budget at ``rounds_per_epoch`` (default: the policy's), as
    :func:`~dpledger.planning.plan` takes it."""
    policy = validated_policy(policy)
    cohorts = validated_cohorts(policy, cohorts)  # declared regions, integers in 1..1e9
    rounds = validated_rounds(policy, rounds_per_epoch)
    budgets = {name: policy.release_budget(name, rounds) for name in policy.metrics}
    spent = rounds * sum(budgets.values(), Fraction(0))  # what the epoch's releases spend
    if spent <= 0:
        return ()
    if policy.definition == "pure":
        eps_spent, rho_spent = spent, rho_for_epsilon(spent, policy.delta)
    else:
        rho_spent, eps_spent = spent, Fraction(zcdp_epsilon(spent, policy.delta))
    out: list[DefinitionChoice] = []
    for name, spec in policy.metrics.items():
        share = budgets[name] / spent
        if share <= 0:
            continue
        dimension = 0 if spec.kind == "scalar_mean" else spec.size
        d1 = mech.policy_sensitivity(policy, name, "laplace")
        d2 = mech.policy_sensitivity(policy, name, "gaussian")
        lap_facts = _facts(name, d1, eps_spent * share, "epsilon", dimension)
        gau_facts = _facts(name, d2, rho_spent * share, "rho", dimension)
        for region, n in cohorts.items():
            lap = mech.error_bar_of(lap_facts, n, spec.bar, spec.magnitude)
            gau = mech.error_bar_of(gau_facts, n, spec.bar, spec.magnitude)
            if not (math.isfinite(lap) and math.isfinite(gau)):
                raise _beyond(name, "its error bar")
            out.append(
                DefinitionChoice(
                    region=region,
                    metric=name,
                    cohort=n,
                    epsilon=float(eps_spent * share),
                    rho=float(rho_spent * share),
                    laplace_bar=lap,
                    gaussian_bar=gau,
                    better="pure" if lap <= gau else "zcdp",
                    ratio=gau / lap,
                )
            )
    return tuple(out)


def _facts(
    metric: str, sensitivity: float, budget: Fraction, unit: Unit, dimension: int
) -> mech.MechanismFacts:
    """One side of the comparison calibrated as a release of it would be (OpenDP's map on
    the 2**k grid, at the metric's dimension: near the grid the closed form Δ/ε is far too
    little noise, review 40), so the bar of the policy's own definition is the one its
    releases print; the metric named when the converted budget (ρ ≈ ε²/4·ln(1/δ)
    underflows below ε ≈ 1e-154) leaves no noise scale."""
    mechanism: MechanismKind = "laplace" if unit == "epsilon" else "gaussian"
    try:
        return mech.calibrate(
            sensitivity=sensitivity,
            budget=budget,
            measure=unit,
            mechanism=mechanism,
            dimension=dimension,
        )
    except InvalidInput:
        sym = "ε" if unit == "epsilon" else "ρ"
        shown = f" {float(budget):.3g}" if float(budget) > 0 else ""
        raise _beyond(metric, f"its converted per-release {sym}{shown}") from None


def _beyond(metric: str, what: str) -> InvalidInput:
    return InvalidInput(
        f"cannot compare definitions for metric {metric!r}: {what} at the same guarantee is "
        "beyond the range of a double (the ε ↔ ρ conversion of so small a budget "
        "underflows); compare at a larger budget"
    )

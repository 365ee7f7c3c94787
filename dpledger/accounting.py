"""Composition rules, in exact arithmetic: scopes, sequential and parallel composition.

Within an epoch, regions are disjoint sets of clients. A client of region r has lost
``spent[ALL] + spent[r]`` (sequential composition of the global releases and its own
region's); a release in region r costs nothing to clients of other regions (parallel
composition). All budgets are :class:`fractions.Fraction` (ε, or ρ under zCDP).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from dpledger.policy import ALL, Policy

__all__ = [
    "ALL",
    "BudgetCheck",
    "check_budget",
    "client_loss",
    "regions_in_view",
    "scope_label",
    "spent_by_scope",
]

_ZERO = Fraction(0)


@dataclass(frozen=True, slots=True)
class BudgetCheck:
    """Outcome of fitting one charge into an epoch, at its most constrained region."""

    fits: bool
    requested: Fraction
    spent: Fraction  # the binding region's client loss before this release
    remaining: Fraction  # the binding region's allocation left before this release
    scope: str  # human label of the binding scope, e.g. "epoch 3, region eu-west"


def scope_label(epoch: int, region: str) -> str:
    """Human name of a scope, for messages and reports."""
    return f"epoch {epoch}, {'all regions' if region == ALL else 'region ' + region}"


def spent_by_scope(charges: Iterable[tuple[str, Fraction]]) -> dict[str, Fraction]:
    """Sum ``(scope, charge)`` pairs per scope, exactly."""
    out: dict[str, Fraction] = {}
    for scope, charge in charges:
        out[scope] = out.get(scope, _ZERO) + charge
    return out


def client_loss(spent: Mapping[str, Fraction], region: str) -> Fraction:
    """A client of ``region``'s epoch loss: global releases plus its own region's.

    For ``region == ALL`` it is the worst client's loss over the regions present.
    """
    if region == ALL:
        regional = max((v for k, v in spent.items() if k != ALL), default=_ZERO)
        return spent.get(ALL, _ZERO) + regional
    return spent.get(ALL, _ZERO) + spent.get(region, _ZERO)


def regions_in_view(policy: Policy, spent: Mapping[str, Fraction]) -> tuple[str, ...]:
    """Regions whose clients a global release touches: declared ones, plus any seen."""
    seen = {k for k in spent if k != ALL}
    return tuple(sorted(set(policy.regions.names) | seen))


def check_budget(
    policy: Policy,
    spent: Mapping[str, Fraction],
    epoch: int,
    region: str,
    charge: Fraction,
) -> BudgetCheck:
    """Whether ``charge`` fits the epoch allocation of every client it touches.

    A regional release must fit ``spent[ALL] + spent[region] + charge ≤ ε_eval``; a
    global release must fit that for every region (an open partition's unseen
    regions have spent nothing regional, so the declared and seen ones bind).
    """
    budget = policy.eval_budget
    if region == ALL:
        candidates = regions_in_view(policy, spent) or (ALL,)
        binding = max(candidates, key=lambda r: client_loss(spent, r))
        loss = client_loss(spent, binding) if binding != ALL else spent.get(ALL, _ZERO)
        label = scope_label(epoch, ALL) + (f" (binding: {binding})" if binding != ALL else "")
    else:
        loss = client_loss(spent, region)
        label = scope_label(epoch, region)
    return BudgetCheck(
        fits=loss + charge <= budget,
        requested=charge,
        spent=loss,
        remaining=max(budget - loss, _ZERO),
        scope=label,
    )

"""Composition rules, in exact arithmetic: scopes, sequential and parallel composition.

Within an epoch, regions are disjoint sets of clients. A client of region r has lost
``spent[ALL] + spent[r]`` (sequential composition of the global releases and its own
region's); a release in region r costs nothing to clients of other regions (parallel
composition). All budgets are :class:`fractions.Fraction` (ε, or ρ under zCDP).
Conversions: summed ρ to (ε, δ) via OpenDP, and PLD (ε, δ) via dp_accounting if present.
"""

from __future__ import annotations

import importlib.util
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from dpledger import _opendp as dp
from dpledger._shown import shown
from dpledger.errors import InvalidInput
from dpledger.mechanisms import MechanismFacts, float_up, privacy_loss
from dpledger.policy import ALL, Policy
from dpledger.types import Budget

__all__ = [
    "PLD_MAX_EPSILON",
    "PLD_MIN_EPSILON",
    "PLD_MIN_GRID_STEPS",
    "BudgetCheck",
    "EpochSpend",
    "allocation_loss",
    "binding_loss",
    "budget_loss",
    "check_allocation",
    "check_budget",
    "client_loss",
    "pld_epsilon",
    "pld_installed",
    "regions_in_view",
    "scope_label",
    "spent_by_scope",
    "zcdp_epsilon",
]

_ZERO = Fraction(0)


@dataclass(frozen=True, slots=True)
class BudgetCheck:
    """Outcome of fitting one charge into an epoch, at its most constrained region."""

    fits: bool
    requested: Budget
    spent: Budget  # the binding region's client loss before this release
    remaining: Budget  # the binding region's allocation left before this release
    scope: str  # human label of the binding scope, e.g. "epoch 3, region eu-west"


@dataclass(frozen=True, slots=True)
class EpochSpend:
    """One epoch's exact spend per ``(scope, metric)``: what the ledger's spend table holds.

    ``by_scope`` sums over metrics (the epoch budget binds per client, whatever the
    metric); ``metric_loss`` is one metric's share of a client's loss (its allocation
    binds per metric).
    """

    totals: Mapping[tuple[str, str], Fraction]
    scopes: Mapping[str, Fraction] | None = None  # per-scope sums, when kept alongside

    @classmethod
    def empty(cls) -> EpochSpend:
        """An epoch nothing was released in."""
        return cls({}, {})

    def by_scope(self) -> dict[str, Fraction]:
        """Exact spend per scope (``"*"`` = global releases), summed over metrics."""
        if self.scopes is not None:
            return dict(self.scopes)
        return spent_by_scope((scope, v) for (scope, _), v in self.totals.items())

    def of_metric(self, metric: str) -> dict[str, Fraction]:
        """Exact spend of one metric per scope."""
        return {scope: v for (scope, m), v in self.totals.items() if m == metric}


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
    return _plus(spent.get(ALL), spent.get(region, _ZERO))


def _plus(overall: Fraction | None, regional: Fraction) -> Fraction:
    """``overall + regional``, without a rational addition when nothing was spent overall
    (most policies never release to all regions; the value is the same)."""
    return regional if overall is None else overall + regional


def regions_in_view(policy: Policy, spent: Mapping[str, Fraction]) -> tuple[str, ...]:
    """Regions whose clients a global release touches: declared ones, plus any seen."""
    seen = {k for k in spent if k != ALL}
    return tuple(sorted(set(policy.regions.names) | seen))


def binding_loss(
    policy: Policy, spent: Mapping[str, Fraction], region: str
) -> tuple[Fraction, str]:
    """The loss that binds a release in ``region``, and the region that has it.

    A regional release binds its own clients (``spent[ALL] + spent[region]``); a global
    one binds the most spent client of every region in view (an open partition's unseen
    regions have spent nothing regional, so the declared and seen ones bind).
    """
    if region != ALL:
        return client_loss(spent, region), region
    candidates = regions_in_view(policy, spent) or (ALL,)
    binding = max(candidates, key=lambda r: client_loss(spent, r))
    return client_loss(spent, binding) if binding != ALL else spent.get(ALL, _ZERO), binding


def budget_loss(policy: Policy, spend: EpochSpend, region: str) -> Fraction:
    """The epoch loss that binds a release in ``region`` (:func:`binding_loss` per scope)."""
    scopes = spend.scopes if spend.scopes is not None else spend.by_scope()
    return binding_loss(policy, scopes, region)[0]


def allocation_loss(policy: Policy, spend: EpochSpend, region: str, metric: str) -> Fraction:
    """The loss that binds a release in ``region`` within ``metric``'s allocation.

    :func:`binding_loss` on the metric's own spend; for one region that is two lookups
    (the metric's global and regional spend), without gathering the metric's scopes.
    """
    if region != ALL:
        totals = spend.totals
        return _plus(totals.get((ALL, metric)), totals.get((region, metric), _ZERO))
    return binding_loss(policy, spend.of_metric(metric), region)[0]


def check_budget(
    policy: Policy,
    spent: Mapping[str, Fraction],
    epoch: int,
    region: str,
    charge: Fraction,
) -> BudgetCheck:
    """Whether ``charge`` fits the epoch allocation of every client it touches.

    ``spent[ALL] + spent[r] + charge ≤ ε_eval`` for the binding region r
    (:func:`binding_loss`).
    """
    budget = policy.eval_budget
    loss, binding = binding_loss(policy, spent, region)
    label = scope_label(epoch, region)
    if region == ALL and binding != ALL:
        label += f" (binding: {binding})"
    unit = policy.unit
    return BudgetCheck(
        fits=loss + charge <= budget,
        requested=Budget(charge, unit),
        spent=Budget(loss, unit),
        remaining=Budget(max(budget - loss, _ZERO), unit),
        scope=label,
    )


def check_allocation(
    policy: Policy,
    spend: EpochSpend,
    epoch: int,
    region: str,
    metric: str,
    charge: Fraction,
) -> BudgetCheck | None:
    """Whether ``charge`` fits metric ``metric``'s allocation for every client it touches.

    Same rule as :func:`check_budget` on the metric's own spend and its allocation
    (:meth:`Policy.allocation_of`); None when the policy pools its allocation.
    """
    allocation = policy.allocation_of(metric)
    if allocation is None:
        return None
    loss = allocation_loss(policy, spend, region, metric)
    unit = policy.unit
    return BudgetCheck(
        fits=loss + charge <= allocation,
        requested=Budget(charge, unit),
        spent=Budget(loss, unit),
        remaining=Budget(max(allocation - loss, _ZERO), unit),
        scope=f"{scope_label(epoch, region)}, metric {metric}'s allocation {allocation}",
    )


def zcdp_epsilon(rho: Fraction, delta: float) -> float:
    """ε at ``delta`` for total ρ, by OpenDP's zCDP → approximate-DP conversion.

    A unit-σ Gaussian at input distance d has ρ = d²/2; d is rounded up until OpenDP's
    map is at least ``rho``, so the conversion never understates the loss.

    OpenDP's conversion overflows (``exp`` of ε) past ρ ≈ 7·10⁴ at every δ, a loss a
    ledger can reach by summing epochs, and below ρ ≈ 5e-309; above
    :data:`_OPENDP_RHO_LIMIT` and below :data:`_OPENDP_RHO_FLOOR` the closed form
    ρ + 2√(ρ·ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3), also a valid (ε, δ) bound, is
    returned instead, rounded up (within 1e-4 relative of OpenDP's there).
    """
    if not 0 < delta < 1:
        raise InvalidInput(f"delta must be in (0, 1), got {shown(delta)}")
    if rho <= 0:
        return 0.0
    if rho > _OPENDP_RHO_LIMIT or rho < _OPENDP_RHO_FLOOR:
        return zcdp_epsilon_bound(rho, delta)
    meas = dp.m.make_gaussian(
        dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=1.0
    )
    d_in = math.sqrt(2 * float(rho))
    while Fraction(meas.map(d_in)) < rho:
        d_in = math.nextafter(d_in, math.inf)
    profile = dp.c.make_zCDP_to_approxDP(meas).map(d_in)
    return float(profile.epsilon(delta))


_OPENDP_RHO_LIMIT = Fraction(50_000)
"""Above this ρ :func:`zcdp_epsilon` uses the closed form: OpenDP 0.16's conversion
overflows from ρ = 70,284 at any δ (measured)."""
_OPENDP_RHO_FLOOR = Fraction(1, 10**300)
"""Below this ρ :func:`zcdp_epsilon` uses the closed form too: the input distance √(2ρ)
nears the smallest double and OpenDP 0.16's conversion overflows (from ρ ≈ 5e-309, a
pure ε ≈ 1e-154, which a policy accepts)."""


def zcdp_epsilon_bound(rho: Fraction, delta: float) -> float:
    """ρ + 2√(ρ·ln(1/δ)), the closed-form (ε, δ) of ρ-zCDP, as a double never below it.

    Every float step is rounded half an ulp at most; the relative 1e-12 added on top
    covers them, so the result is an upper bound of the exact value.
    """
    r = float_up(rho)
    eps = r + 2.0 * math.sqrt(r * math.log(1.0 / delta))
    return math.nextafter(eps * (1.0 + 1e-12), math.inf)


PLD_MAX_EPSILON = 100.0
""":func:`pld_epsilon` gives no view (None) when the composed loss could exceed this ε.

The accountant discretises the privacy loss on a 1e-4 grid: its memory and time grow with
the loss (a single Laplace release at ε = 100 takes ~0.5 GB and seconds; at ε = 2,500 it
needs ~30 GB), and a loss past 100 is no guarantee a PLD view could tighten usefully."""


PLD_MIN_EPSILON = 1e-6
""":func:`pld_epsilon` gives no view (None) when the composed loss is below this ε: the
accountant's 1e-4 grid cannot resolve it (the basic and zCDP views are tighter there), and
dp_accounting fails on the noise multipliers of such losses (an IndexError at an infinite
one, OverflowError for a Gaussian's above ~1e200): any multiplier above 1e100 gives None."""


PLD_MIN_GRID_STEPS = 1e6
"""The PLD view reads a release as continuous noise: only when its scale spans at least
this many steps of OpenDP's output grid 2^k (below, the discrete law's (ε, δ) curve lies
measurably above the continuous one's: 0.061 against 0.044 at 0.9 ε for a discrete Laplace
of 1.1 steps, 0.0554 against 0.0488 at 3; review h39), else no PLD view (None)."""


def _coarse(facts: MechanismFacts) -> bool:
    """Whether the release's noise is too coarse a grid for a continuous PLD to bound it."""
    return facts.k is not None and facts.scale < PLD_MIN_GRID_STEPS * math.ldexp(1.0, facts.k)


def _multiplier(facts: MechanismFacts) -> float:
    """The noise multiplier of a continuous mechanism whose loss is OpenDP's map of these
    facts, rounded down: scale / Δ understates it, since OpenDP charges the rounding of
    the input onto its grid on top of Δ (at a Δ near the grid, many times Δ; review h39).
    Laplace: 1/ε; Gaussian (and Laplace accounted in ρ): 1/√(2ρ)."""
    loss = float_up(privacy_loss(facts))
    if not loss > 0:  # no loss a double holds: beyond what dp_accounting takes (None)
        return math.inf
    m = 1.0 / loss if facts.measure == "epsilon" else 1.0 / math.sqrt(2.0 * loss)
    return m * (1.0 - 1e-12) if m > 0 else 0.0


def pld_installed() -> bool:
    """Whether dp_accounting (the ``pld`` extra) can be imported, for the PLD view."""
    return importlib.util.find_spec("dp_accounting") is not None


def pld_epsilon(facts: Iterable[MechanismFacts], delta: float) -> float | None:
    """ε at ``delta`` by dp_accounting's PLD accountant; None if it is not installed, if
    the composed loss (basic ε of the Laplace releases plus the closed-form ε of the
    Gaussians' ρ) lies outside [:data:`PLD_MIN_EPSILON`, :data:`PLD_MAX_EPSILON`], or if a
    release's noise spans fewer than :data:`PLD_MIN_GRID_STEPS` steps of its grid. Each
    release is read as the continuous mechanism of OpenDP's own map (:func:`_multiplier`),
    not of scale / Δ."""
    try:
        import dp_accounting
        from dp_accounting.pld import pld_privacy_accountant
    except ImportError:
        return None
    kinds = Counter(facts)  # identical mechanisms compose as one event with a count
    if not kinds:
        return 0.0
    if any(_coarse(f) for f in kinds):  # a discrete law a continuous PLD does not bound
        return None
    counts: Counter[tuple[str, float]] = Counter()
    for f, n in kinds.items():
        counts[(f.mechanism, _multiplier(f))] += n
    laplace = sum(n / m for (kind, m), n in counts.items() if kind == "laplace")
    rho = sum(n / (2 * m * m) for (kind, m), n in counts.items() if kind != "laplace")
    gaussian = rho + 2 * math.sqrt(rho * math.log(1 / delta)) if rho > 0 else 0.0
    if not PLD_MIN_EPSILON <= laplace + gaussian <= PLD_MAX_EPSILON:
        return None
    if not all(m <= 1e100 for _, m in counts):  # inf, or beyond what dp_accounting takes
        return None
    acc = pld_privacy_accountant.PLDAccountant()
    for (kind, multiplier), n in sorted(counts.items()):
        event = (
            dp_accounting.LaplaceDpEvent(noise_multiplier=multiplier)
            if kind == "laplace"
            else dp_accounting.GaussianDpEvent(noise_multiplier=multiplier)
        )
        acc.compose(event, n)
    return float(acc.get_epsilon(delta))

"""A client's cumulative privacy loss across every epoch: basic, zCDP and PLD views.

Privacy loss does not reset when a policy window does. For a client of region r, the
releases that touched it are every entry scoped to r or to all regions, in any epoch.
Three figures, from loosest to tightest:

- basic: the sum of pure ε (only when every release was pure Laplace);
- zCDP: each release's ρ (Laplace: ε²/2 via OpenDP's ``make_pureDP_to_zCDP``; Gaussian:
  its recorded ρ) summed, then converted to (ε, δ) by OpenDP's ``make_zCDP_to_approxDP``;
- PLD: Google's ``dp_accounting`` privacy-loss-distribution accountant over the
  recorded mechanisms (optional extra ``pld``), the tightest known.

**Per privacy unit.** A figure is of one privacy unit (``privacy_unit``). A client's
figure sums the client-level releases only: a record-level release bounds what one
person's records change, not a client's (a silo's) aggregate, so such releases are
counted in ``unbounded`` and not in the figure. A person's (record-level) figure sums
both kinds: a client-level release at ε protects a client's whole contribution, hence
every record in it at ε (for a person whose records sit in one client).

The headline (``Lifetime.epsilon``, ``method``) follows the ledger's unit. A pure-DP
ledger's headline is its exact pure ε (δ = 0, ``method="basic"``): the (ε, δ) figures
are shown beside it, never instead of it, because a pure guarantee is stronger than any
(ε, δ) one. A zCDP ledger's headline is the smaller (ε, δ) conversion of its exact ρ.
``delta`` is the headline's δ; ``views_delta`` the δ of the (ε, δ) views.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from dpledger.accounting import pld_epsilon, zcdp_epsilon
from dpledger.ledger.records import Entry
from dpledger.mechanisms import MechanismFacts, float_up
from dpledger.policy import ALL
from dpledger.types import Budget, LifetimeMethod, PrivacyUnit, Unit

__all__ = ["Lifetime", "lifetime_of"]


@dataclass(frozen=True, slots=True)
class Lifetime:
    """A client's cumulative loss over all epochs, with the figure shown and how."""

    region: str
    releases: int
    unit: Unit  # the ledger's budget unit: the headline is exact pure ε, or (ε, δ) of ρ
    epsilon_basic: Fraction | None  # Σ pure ε; None if any release was not pure
    rho: Fraction  # Σ ρ (zCDP) over the same releases
    delta: float  # δ of the headline ``epsilon``: 0 for a pure ledger's exact ε
    views_delta: float  # δ of the (ε, δ) views below (the policy's δ, or the one asked for)
    epsilon_zcdp: float  # ε at ``views_delta`` from the summed ρ, via OpenDP
    epsilon_pld: float | None  # ε at ``views_delta`` by PLD, when dp_accounting is installed
    epsilon: float  # the headline: exact pure ε (pure ledger), else the tighter (ε, δ)
    method: LifetimeMethod
    privacy_unit: PrivacyUnit = "client"  # whose loss: a client's, or one person's records
    unbounded: int = 0  # releases touching the region that this unit's figure cannot bound

    @property
    def total(self) -> Budget:
        """The exact total in the ledger's unit: Σ pure ε, or Σ ρ under zCDP."""
        if self.unit == "epsilon" and self.epsilon_basic is not None:
            return Budget(self.epsilon_basic, "epsilon")
        return Budget(self.rho, "rho")

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form for reports and the CLI."""
        return {
            "region": self.region,
            "releases": self.releases,
            "unit": self.unit,
            "total": self.total.as_dict(),
            "epsilon_basic": None if self.epsilon_basic is None else str(self.epsilon_basic),
            "rho": str(self.rho),
            "delta": self.delta,
            "views_delta": self.views_delta,
            "epsilon_zcdp": self.epsilon_zcdp,
            "epsilon_pld": self.epsilon_pld,
            "epsilon": self.epsilon,
            "method": self.method,
            "privacy_unit": self.privacy_unit,
            "unbounded": self.unbounded,
        }


def _rho_of(entry: Entry) -> Fraction:
    """ρ of one release: its charge under zCDP; ε²/2 for a pure-ε Laplace charge."""
    charge = entry.draft.charge
    return charge.amount if charge.unit == "rho" else charge.amount**2 / 2


def lifetime_of(
    entries: Iterable[Entry],
    region: str,
    delta: float,
    *,
    regions: Iterable[str] = (),
    unit: Unit = "epsilon",
    privacy_unit: PrivacyUnit = "client",
) -> Lifetime:
    """Cumulative loss of a client of ``region`` (staying there) from the ledger's entries.

    ``privacy_unit="record"`` gives one person's loss instead (every release counts);
    ``"client"`` counts client-level releases and reports record-level ones as unbounded.

    For ``region="*"``, the worst client, who may change region between epochs (regions
    are disjoint only within an epoch): basic ε and ρ sum each epoch's worst region; PLD
    composes, per epoch, every region's releases — an upper bound, since a device is in
    one region per epoch.
    """
    entries = list(entries)
    touched = [e for e in entries if region == ALL or e.draft.region in (region, ALL)]
    unbounded = 0
    if privacy_unit == "client":
        unbounded = sum(1 for e in touched if e.draft.facts.privacy_unit != "client")
        entries = [e for e in entries if e.draft.facts.privacy_unit == "client"]
    life = _lifetime(entries, region, delta, regions, unit)
    return dataclasses.replace(life, privacy_unit=privacy_unit, unbounded=unbounded)


def _lifetime(
    entries: list[Entry], region: str, delta: float, regions: Iterable[str], unit: Unit
) -> Lifetime:
    if region != ALL:
        mine = [e for e in entries if e.draft.region in (region, ALL)]
        return _summarise(region, mine, delta, unit)
    names = set(regions) | {e.draft.region for e in entries if e.draft.region != ALL}
    by_epoch: dict[int, list[Entry]] = {}
    for e in entries:
        by_epoch.setdefault(e.draft.epoch, []).append(e)
    basic: Fraction | None = Fraction(0)
    rho = Fraction(0)
    releases = 0
    for epoch_entries in by_epoch.values():
        # each region's (count, ρ, ε) in one pass, not a pass per region: quadratic with
        # thousands of open regions (review 42); a region of `names` without a release
        # of its own in the epoch is touched by the global ones only
        own: dict[str, tuple[int, Fraction, Fraction]] = {}
        for e in epoch_entries:
            n, r, p = own.get(e.draft.region, (0, Fraction(0), Fraction(0)))
            own[e.draft.region] = (n + 1, r + _rho_of(e), p + e.draft.charge.amount)
        n_all, rho_all, eps_all = own.pop(ALL, (0, Fraction(0), Fraction(0)))
        idle = len(own) < len(names)  # some region in view released nothing of its own
        sums = [*own.values(), *([(0, Fraction(0), Fraction(0))] if idle or not own else [])]
        releases += n_all + max(n for n, _, _ in sums)
        rho += rho_all + max(r for _, r, _ in sums)
        if basic is not None and all(e.draft.charge.unit == "epsilon" for e in epoch_entries):
            basic += eps_all + max(p for _, _, p in sums)
        else:
            basic = None
    return _figures(ALL, releases, basic, rho, delta, [e.draft.facts for e in entries], unit)


def _summarise(region: str, mine: list[Entry], delta: float, unit: Unit) -> Lifetime:
    pure = all(e.draft.charge.unit == "epsilon" for e in mine)
    basic = sum((e.draft.charge.amount for e in mine), Fraction(0)) if pure else None
    rho = sum((_rho_of(e) for e in mine), Fraction(0))
    return _figures(region, len(mine), basic, rho, delta, [e.draft.facts for e in mine], unit)


def _figures(
    region: str,
    releases: int,
    basic: Fraction | None,
    rho: Fraction,
    delta: float,
    facts: list[MechanismFacts],
    unit: Unit,
) -> Lifetime:
    eps_z = zcdp_epsilon(rho, delta)
    eps_pld = pld_epsilon(facts, delta)
    if eps_pld is not None and basic is not None:
        # Pure ε-DP is (ε, δ)-DP at every δ, so the PLD view never exceeds the exact ε
        # (at a tiny δ the accountant alone says inf, which JSON shows as null).
        eps_pld = min(eps_pld, float_up(basic))
    method: LifetimeMethod
    if unit == "epsilon" and basic is not None:
        best, method = float_up(basic), "basic"  # the exact pure guarantee is the headline
    else:
        candidates: list[tuple[float, LifetimeMethod]] = [(eps_z, "zcdp")]
        if eps_pld is not None:
            candidates.append((eps_pld, "pld"))
        best, method = min(candidates)
    return Lifetime(
        region=region,
        releases=releases,
        unit=unit,
        epsilon_basic=basic,
        rho=rho,
        delta=0.0 if method == "basic" else delta,
        views_delta=delta,
        epsilon_zcdp=eps_z,
        epsilon_pld=eps_pld,
        epsilon=best,
        method=method,
    )

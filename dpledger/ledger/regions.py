"""Which regions an epoch's budget views list, and which a view of an epoch admits.

An epoch is bound to the policy of its first release (:meth:`Ledger.epoch_policy`); a
ledger may be opened with a later version. Its views (``dpledger ledger show``, the
service's budget routes and page) list the regions of both: a region a later version
added (its clients lost only the epoch's global releases) and one it removed (its
clients spent in the epoch under the version that had it: leaving it out would show
every region of the epoch untouched while one was charged).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpledger._shown import shown
from dpledger.accounting import client_loss
from dpledger.errors import InvalidInput
from dpledger.policy import ALL
from dpledger.types import Budget

if TYPE_CHECKING:
    from collections.abc import Iterable
    from fractions import Fraction

    from dpledger.ledger.core import Ledger
    from dpledger.policy import Policy

__all__ = [
    "admits",
    "check_filters",
    "epoch_budgets",
    "epoch_regions",
    "names_text",
    "region_budgets",
]


def epoch_regions(ledger: Ledger, epoch: int) -> tuple[str, ...]:
    """The regions ``epoch``'s views list, ``'*'`` excluded: the ledger's policy's, then
    those of the policy the epoch is bound to that it lacks, then (open regions) any
    other region the epoch spent in, sorted."""
    bound = ledger.epoch_policy(epoch)
    return _listed(ledger, bound, () if bound is None else ledger.spent_by_region(epoch))


def _listed(ledger: Ledger, bound: Policy | None, spent_in: Iterable[str]) -> tuple[str, ...]:
    named = (*ledger.policy.regions.names, *(() if bound is None else bound.regions.names))
    names = list(dict.fromkeys(named))
    if bound is not None:  # every release of the epoch was under `bound`: it has them all
        names += sorted(set(spent_in) - {ALL, *names})
    return tuple(names)


def epoch_budgets(ledger: Ledger, epoch: int) -> list[tuple[str, Budget, Budget]]:
    """``(region, spent, remaining)`` for each of :func:`epoch_regions`, then ``'*'``: what
    :meth:`Ledger.spent` and :meth:`Ledger.remaining` give, from one read of the epoch's
    spend (each of those reads it whole: with thousands of open regions a view region by
    region was quadratic, review 42)."""
    bound = ledger.epoch_policy(epoch)
    by_region = ledger.spent_by_region(epoch)
    return _rows(ledger, epoch, (*_listed(ledger, bound, by_region), ALL), by_region)


def region_budgets(
    ledger: Ledger, epoch: int, regions: Iterable[str]
) -> list[tuple[str, Budget, Budget]]:
    """``(region, spent, remaining)`` for each of ``regions`` that :func:`admits` has a
    view in ``epoch`` (in their order), from one read of the epoch's spend."""
    wanted = [r for r in regions if admits(ledger, epoch, r)]
    return _rows(ledger, epoch, wanted, ledger.spent_by_region(epoch) if wanted else {})


def _rows(
    ledger: Ledger, epoch: int, regions: Iterable[str], by_region: dict[str, Budget]
) -> list[tuple[str, Budget, Budget]]:
    policy = ledger.epoch_policy(epoch) or ledger.policy
    scopes: dict[str, Fraction] = {r: b.amount for r, b in by_region.items()}
    budget = Budget(policy.eval_budget, policy.unit)
    rows = []
    for region in regions:
        spent = Budget(client_loss(scopes, region), policy.unit)
        rows.append((region, spent, budget - spent))
    return rows


def admits(ledger: Ledger, epoch: int, region: str) -> bool:
    """Whether ``region`` (or ``'*'``) has a view in ``epoch``: the ledger's policy or the
    one the epoch is bound to has it."""
    bound = ledger.epoch_policy(epoch)
    policies = (ledger.policy,) if bound is None else (ledger.policy, bound)
    return region == ALL or any(p.regions.admits(region) for p in policies)


def check_filters(ledger: Ledger, region: str | None, metric: str | None) -> None:
    """Refuse (:class:`InvalidInput`) an entries filter naming a region or metric that
    neither the ledger's policy nor any policy its entries were released under has: an
    empty answer to a typo (``nrth``) reads as "nothing was released there" (review 42).
    A name a recorded version had, or any valid name of open regions, is a filter."""
    here = ledger.policy  # the recorded versions are read only for a name it lacks: an
    # unfiltered page (export's last, a poller's at the tail) never decodes them (diff 4)
    if (region is None or region == ALL or here.regions.admits(region)) and (
        metric is None or metric in here.metrics
    ):
        return
    policies = [here, *(p for _, p in ledger.recorded_policies())]
    if region is not None and region != ALL and not any(p.regions.admits(region) for p in policies):
        names = names_text(sorted({n for p in policies for n in p.regions.names}))
        raise InvalidInput(
            f"unknown region {shown(region)}; the ledger's policies' regions: {names}"
        )
    if metric is not None and not any(metric in p.metrics for p in policies):
        names = names_text(sorted({m for p in policies for m in p.metrics}))
        raise InvalidInput(
            f"unknown metric {shown(metric)}; the ledger's policies' metrics: {names}"
        )


def names_text(names: Iterable[str], most: int = 20) -> str:
    """``names`` for a message: the first ``most``, then how many more (a policy may declare
    10^4 regions: listing them all made an 89 KB message, review 42 diff 4); none: any
    valid name (open regions)."""
    listed = list(dict.fromkeys(names))
    if not listed:
        return "any valid name (open regions)"
    more = f", and {len(listed) - most} more" if len(listed) > most else ""
    return "[" + ", ".join(shown(n) for n in listed[:most]) + more + "]"

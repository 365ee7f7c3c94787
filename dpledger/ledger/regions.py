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

from dpledger.policy import ALL

if TYPE_CHECKING:
    from dpledger.ledger.core import Ledger

__all__ = ["admits", "epoch_regions"]


def epoch_regions(ledger: Ledger, epoch: int) -> tuple[str, ...]:
    """The regions ``epoch``'s views list, ``'*'`` excluded: the ledger's policy's, then
    those of the policy the epoch is bound to that it lacks, then (open regions) any
    other region the epoch spent in, sorted."""
    bound = ledger.epoch_policy(epoch)
    named = (*ledger.policy.regions.names, *(() if bound is None else bound.regions.names))
    names = list(dict.fromkeys(named))
    if bound is not None:  # every release of the epoch was under `bound`: it has them all
        names += sorted(set(ledger.spent_by_region(epoch)) - {ALL, *names})
    return tuple(names)


def admits(ledger: Ledger, epoch: int, region: str) -> bool:
    """Whether ``region`` (or ``'*'``) has a view in ``epoch``: the ledger's policy or the
    one the epoch is bound to has it."""
    bound = ledger.epoch_policy(epoch)
    policies = (ledger.policy,) if bound is None else (ledger.policy, bound)
    return region == ALL or any(p.regions.admits(region) for p in policies)

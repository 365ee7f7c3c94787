"""A refusal under the write lock, with committed spend told apart from staged spend.

The re-check of a round's request reads the committed spend plus what the round's earlier
requests staged in the same transaction. A refusal that said "spent 1/3" of the sum
counted uncommitted requests as spent (review P2): :func:`separated` rewrites the failed
budget (or allocation) check's reason to show both parts, and returns the staged part for
the error (:func:`~dpledger.approval.refusal`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from fractions import Fraction

from dpledger.accounting import EpochSpend, binding_loss, client_loss
from dpledger.approval import Check, Verdict
from dpledger.policy import ALL, Policy
from dpledger.types import Budget

__all__ = ["separated"]

_ZERO = Fraction(0)


def _loss(spent: Mapping[str, Fraction], where: str) -> Fraction:
    """The loss of a client of ``where`` (``"*"``: the global releases alone)."""
    return spent.get(ALL, _ZERO) if where == ALL else client_loss(spent, where)


def separated(
    policy: Policy, late: Verdict, committed: EpochSpend, fresh: EpochSpend, partial: bool
) -> tuple[Verdict, Budget | None]:
    """``late`` (the re-check on ``fresh`` = ``committed`` + staged spend) with its first
    failure's reason split into committed and staged spend, and the staged part (exact,
    in the policy's unit); ``(late, None)`` when nothing staged bears on the refusal."""
    first = late.failures[0] if late.failures else None
    if first is None or first.name not in ("allocation", "budget"):
        return late, None
    check = late.allocation if first.name == "allocation" else late.budget
    if check is None:
        return late, None
    req = late.request
    if first.name == "budget":
        now, before = fresh.by_scope(), committed.by_scope()
    else:
        now, before = fresh.of_metric(req.metric), committed.of_metric(req.metric)
    _, where = binding_loss(policy, now, req.region)  # the scope the check reports
    was = _loss(before, where)
    staged = check.spent.amount - was
    if staged <= 0:
        return late, None
    unit, charge = policy.unit, check.requested.text
    share = f"{req.metric}'s allocation" if first.name == "allocation" else "the budget"
    fate = (
        "they are recorded, this one is not: wait for the next epoch"
        if partial
        else "nothing is recorded (the round is all or nothing): send fewer requests per "
        "epoch, or partial=True to record those that fit"
    )
    reason = (
        f"requested {unit} {charge}, but this call's earlier requests stage "
        f"{Budget(staged, unit).text} of {share} on top of {Budget(was, unit).text} "
        f"committed: {check.remaining.text} remains for it ({check.scope}); {fate}"
    )
    checks = tuple(Check(c.name, False, reason) if c is first else c for c in late.checks)
    return dataclasses.replace(late, checks=checks), Budget(staged, unit)

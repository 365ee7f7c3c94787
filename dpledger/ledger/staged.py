"""A refusal under the write lock, with committed spend told apart from staged spend;
and the checks of a round against a ledger not yet created (:func:`refused_by_a_new_ledger`).

The re-check of a round's request reads the committed spend plus what the round's earlier
requests staged in the same transaction. A refusal that said "spent 1/3" of the sum
counted uncommitted requests as spent (review P2): :func:`separated` rewrites the failed
budget (or allocation) check's reason to show both parts, and returns the staged part for
the error (:func:`~dpledger.approval.refusal`).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from dpledger.accounting import EpochSpend, binding_loss, check_budget
from dpledger.approval import Check, Prepared, Verdict, recheck, refusal
from dpledger.policy import Policy
from dpledger.types import Budget

__all__ = ["refused_by_a_new_ledger", "separated"]


def separated(
    policy: Policy, late: Verdict, committed: EpochSpend, partial: bool
) -> tuple[Verdict, Budget | None, str | None]:
    """``late`` (the re-check on ``committed`` + staged spend) with its first
    failure's reason split into committed and staged spend, and the staged part (exact,
    in the policy's unit): how far the round's earlier requests raise the loss the
    request is checked against above its committed binding loss (for a regional request,
    its region's staged charges); and the scope that committed loss is read at (for a
    global request, its binding region on committed spend: the refusal's ``scope``).
    ``(late, None, None)`` when nothing staged bears on it."""
    first = late.failures[0] if late.failures else None
    if first is None or first.name not in ("allocation", "budget"):
        return late, None, None
    check = late.allocation if first.name == "allocation" else late.budget
    if check is None:
        return late, None, None
    req = late.request
    before = committed.by_scope() if first.name == "budget" else committed.of_metric(req.metric)
    # the loss the request binds at on committed spend alone: for a global request the
    # staged spend may move its binding region (b overtakes a), and then what the ledger
    # has left for it is a's headroom, not b's (review s37, finding 7)
    was = binding_loss(policy, before, req.region)[0]
    staged = check.spent.amount - was
    if staged <= 0:
        return late, None, None
    # the scope that loss is read at: a global request's binding region may differ (a, not
    # b); an allocation's scope names no region, a regional request's is its own
    scope = (
        check_budget(policy, before, req.epoch, req.region, check.requested.amount).scope
        if first.name == "budget"
        else check.scope
    )
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
    return dataclasses.replace(late, checks=checks), Budget(staged, unit), scope


def refused_by_a_new_ledger(
    policy: Policy, prepared: dict[int, Prepared], partial: bool, size: int
) -> dict[int, Verdict]:
    """The ledger-state checks against an empty ledger, before creating it.

    A round that a new ledger would refuse entirely (or, all or nothing, in part)
    creates nothing: the refusal leaves the filesystem as it was.
    """
    totals: dict[int, dict[tuple[str, str], Fraction]] = {}
    refused: dict[int, Verdict] = {}
    for i, p in prepared.items():
        req = p.verdict.request
        epoch = totals.setdefault(req.epoch, {})
        fresh = EpochSpend(dict(epoch))
        verdict = recheck(policy, p, fresh, None)
        if not verdict.approved:
            verdict, staged, scope = separated(policy, verdict, EpochSpend.empty(), partial)
            if not partial:
                raise refusal(verdict, index=i if size > 1 else None, staged=staged, scope=scope)
            refused[i] = verdict
            continue
        key = (req.region, req.metric)
        cost = p.verdict.charge.amount if p.verdict.charge is not None else Fraction(0)
        epoch[key] = epoch.get(key, Fraction(0)) + cost
    return refused
